import ArgumentParser
import PackagerKit

extension Exporter.Format: ExpressibleByArgument {}

extension Packager {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Write a bundle's manifest and bodies (inflated and checked) as a tarball, or its entries as HAR, WARC or WACZ.",
            discussion: """
                Formats: \(Exporter.Format.allCases.map(\.rawValue).joined(separator: ", ")). The output is reproducible. \
                har writes HAR 1.2 (each entry's request, with a declared request's method, headers and body, and its answer), \
                which Playwright's routeFromHAR and mitmproxy replay. warc writes WARC 1.1, a gzip member per record (name the \
                output .warc.gz): each entry's response (a body stored once for several entries written once, then revisit \
                records) and its request, with SHA-256 digests, which pywb replays and warcio checks; blocked entries are left out. \
                wacz writes WACZ 1.1.1: that WARC, its CDXJ index, the HTML pages' list and their digests, in a ZIP that \
                replayweb.page and pywb open and wacz validate checks.

                \(exitStatusHelp)
                """
        )

        @Argument(help: "The bundle to export.")
        var bundle: String

        @Option(help: "The archive format.")
        var format: Exporter.Format = .tarZstd

        @Option(name: [.short, .customLong("output")], help: "Where to write the archive.")
        var output: String

        @Option(
            name: .customLong("sign-key"),
            help:
                "wacz: sign its datapackage digest with this Ed25519 private key file (default: $PACKAGER_SIGN_KEY, base64); pack --from-warc --public-key checks it."
        )
        var signKey: String?

        func validate() throws {
            try refuseURLs([bundle], command: "export")
            try refuseOutput(output, over: [(bundle, "the bundle to export"), (signKey, "the signing key")])
            if signKey != nil, format != .wacz { throw ValidationError("--sign-key signs a WACZ only (--format wacz)") }
        }

        func run() throws {
            try reportingErrors {
                if format == .warc || format == .wacz {
                    let key = format == .wacz ? try SigningKeys.privateKey(file: signKey, environment: "PACKAGER_SIGN_KEY") : nil
                    let summary =
                        try format == .warc
                        ? WARCExporter.export(bundle: bundle, to: output) : WACZExporter.export(bundle: bundle, to: output, signingKey: key)
                    let left = summary.blocked == 0 ? "" : "; \(summary.blocked) blocked left out"
                    let signed = summary.signedBy.map { ", signed by \($0)" } ?? ""
                    print("exported \(summary.entries) entries as \(summary.records) WARC records to \(output)\(left)\(signed)")
                    return
                }
                let count = try Exporter.export(bundle: bundle, to: output, format: format)
                print("exported \(count) \(format == .har ? "entries" : "files") to \(output)")
            }
        }
    }
}
