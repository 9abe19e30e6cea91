import ArgumentParser
import PackagerKit

extension Packager {
    struct Extract: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Extract a bundle (or any archive) into a folder, refusing links and names that escape it."
        )

        @Argument(help: "The bundle or archive.")
        var archive: String

        @Argument(help: "The folder to extract into; created if needed. Existing files are never overwritten.")
        var destination: String

        @Option(name: .customLong("strip-components"), help: "Leading path components to drop from entry names.")
        var stripComponents: Int = 0

        func validate() throws {
            if stripComponents < 0 { throw ValidationError("--strip-components cannot be negative") }
        }

        func run() throws {
            try reportingErrors {
                let summary = try Extractor.extract(archive: archive, to: destination, stripComponents: stripComponents)
                print("extracted \(summary.files) files and \(summary.directories) folders (\(formatBytes(summary.bytes))) into \(destination)")
            }
        }
    }
}
