import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Delta: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delta",
            abstract: "Write the delta from one release to the next: only the bodies the old bundle lacks, and the new index.",
            discussion: """
                The delta mounts over OLD and answers as NEW does (packager serve DELTA OLD), and packager apply OLD DELTA \
                rebuilds NEW byte for byte, so NEW's signature holds. A reader that does not know deltas refuses one.

                \(exitStatusHelp)
                """
        )

        @Argument(help: "The bundle the delta is made over (the release the fleet holds).")
        var old: String

        @Argument(help: "The bundle the delta stands for (the next release).")
        var new: String

        @Option(name: .shortAndLong, help: "Where to write the delta.")
        var output: String

        @Flag(
            name: .customLong("whole-bodies"),
            help: """
                Carry each changed body as NEW stores it, not as a patch of its old one: a larger delta whose gzip answers are NEW's bytes too (with patches, gzip answers of changed bodies are the same content deflated by the runtime).
                """)
        var wholeBodies = false

        func validate() throws {
            try refuseURLs([old, new], command: "delta")
            try refuseOutput(output, over: [(old, "OLD, the release the delta stands over"), (new, "NEW")])
        }

        func run() throws {
            try reportingErrors {
                let summary = try DeltaBundles.make(old: old, new: new, to: output, wholeBodies: wholeBodies)
                let info = summary.info
                let share = info.target.size == 0 ? 0 : Double(summary.size) / Double(info.target.size) * 100
                print(
                    "wrote \(output): \(formatBytes(summary.size)) (\(String(format: "%.2f", share)) % of \(formatBytes(info.target.size))); "
                        + "\(info.carried) \(info.carried == 1 ? "body" : "bodies") carried, \(info.patched) as patches, \(info.reused) read from the base; "
                        + "keys: \(info.added) added, \(info.changed) changed, \(info.removed.count) removed")
            }
        }
    }

    struct Apply: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apply",
            abstract: "Rebuild a release from the bundle before it and the delta (or deltas, oldest first) made over it.",
            discussion: """
                The output is the release the (last) delta stands for, byte for byte; a delta made over another bundle is \
                refused, naming both, and nothing is written.

                Exits 0 when the release is written; 2 when the input is wrong (a delta over another bundle, a file that \
                does not exist, an output that is one of the bundles read or in no folder); 1 when a delta or its base \
                is damaged, or the rebuilt file is not the release the delta names.
                """
        )

        @Argument(help: "The bundle, then each delta made over the one before it.")
        var bundles: [String]

        @Option(name: .shortAndLong, help: "Where to write the rebuilt bundle.")
        var output: String

        func validate() throws {
            if bundles.count < 2 { throw ValidationError("apply takes a bundle and at least one delta made over it") }
            try refuseURLs(bundles, command: "apply")
            // Before anything is read: an output that cannot be written, or that is one of the bundles read (delta -o
            // refuses its inputs too; a service may still be serving the base).
            try refuseUnwritableOutput(output)
            try refuseOutput(output, over: bundles.map { ($0, "a bundle apply reads") })
        }

        func run() throws {
            try reportingErrors {
                // The order is the other way round from serve's (base first here): say so when it is given serve's way.
                if let first = bundles.first, (try? MountedBundle.deltaInfo(atPath: first)) ?? nil != nil {
                    throw PackagerError(
                        .invalidInput, "\(first) is a delta: apply takes the bundle first, then each delta made over the one before it (apply OLD DELTA -o NEW)"
                    )
                }
                let info = try DeltaBundles.apply(bundles.reversed(), to: output)
                print("wrote \(output): \(formatBytes(info.target.size)), sha256:\(info.target.sha256) (the bundle sha256:\(info.target.digest) stands for)")
            }
        }
    }
}
