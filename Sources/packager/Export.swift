import ArgumentParser
import PackagerKit

extension Exporter.Format: ExpressibleByArgument {}

extension Packager {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a bundle's manifest and bodies (inflated and checked) as a tarball, or its entries as HAR.",
            discussion: """
                Formats: \(Exporter.Format.allCases.map(\.rawValue).joined(separator: ", ")). The output is reproducible. \
                har writes HAR 1.2 (each entry's request, with a declared request's method, headers and body, and its answer), \
                which Playwright's routeFromHAR and mitmproxy replay.

                \(exitStatusHelp)
                """
        )

        @Argument(help: "The bundle to export.")
        var bundle: String

        @Option(help: "The archive format.")
        var format: Exporter.Format = .tarZstd

        @Option(name: [.short, .customLong("output")], help: "Where to write the archive.")
        var output: String

        func validate() throws {
            try refuseURLs([bundle], command: "export")
            try refuseOutput(output, over: [(bundle, "the bundle to export")])
        }

        func run() throws {
            try reportingErrors {
                let count = try Exporter.export(bundle: bundle, to: output, format: format)
                print("exported \(count) \(format == .har ? "entries" : "files") to \(output)")
            }
        }
    }
}
