import ArgumentParser
import PackagerKit

extension Packager {
    struct Extract: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "extract",
            abstract: "Extract a bundle (or any archive) into a folder, refusing links and names that escape it.",
            discussion: exitStatusHelp
        )

        @Argument(help: "The bundle or archive.")
        var archive: String

        @Argument(help: "The folder to extract into; created if needed. Existing files are never overwritten.")
        var destination: String

        @Option(name: .customLong("strip-components"), help: "Leading path components to drop from entry names.")
        var stripComponents: Int = 0

        @Option(name: .customLong("max-entries"), help: "Refuse an archive that lists more entries.")
        var maxEntries = 1_000_000

        @Option(name: .customLong("max-bytes"), help: "Refuse an archive that declares or writes more bytes (default: the free space; 512M, 2G).")
        var maxBytes: String?

        func validate() throws {
            if stripComponents < 0 { throw ValidationError("--strip-components cannot be negative") }
            if maxEntries < 1 { throw ValidationError("--max-entries must be at least 1") }
            if let maxBytes, DeclarationParser.byteSize(maxBytes) == nil {
                throw ValidationError("--max-bytes: '\(maxBytes)' is not a size of one byte or more (say 512M or 2G)")
            }
        }

        func run() throws {
            try reportingErrors {
                let limits = Extractor.Limits(entries: maxEntries, bytes: maxBytes.flatMap(DeclarationParser.byteSize).map { UInt64($0) })
                let summary = try Extractor.extract(archive: archive, to: destination, stripComponents: stripComponents, limits: limits)
                var notes = ""
                if summary.skipped > 0 { notes += "; \(summary.skipped) files were there already and were left as they were" }
                if summary.strippedWhole > 0 {
                    notes += "; \(summary.strippedWhole) entries had no more than \(stripComponents) path components and were not written (--strip-components)"
                }
                if summary.repeated > 0 { notes += "; \(summary.repeated) entries named a file an earlier entry wrote (the first was kept)" }
                print("extracted \(summary.files) files and \(summary.directories) folders (\(formatBytes(summary.bytes))) into \(destination)\(notes)")
            }
        }
    }
}
