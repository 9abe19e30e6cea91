import ArgumentParser
import CMalloc
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Pack: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pack",
            abstract:
                "Pack a folder, or a .zip/.tar.gz/.tar.zst of one, into a bundle that answers for a base URL; or a HAR recording, or WARC and WACZ web archives.",
            discussion: """
                Each file answers for BASE-URL + its relative path; index.html also answers for its \
                folder's URL. Media types come from file extensions.

                Example: packager pack dist --base-url https://docs.example.com/ -o docs.bundle.zip

                \(exitStatusHelp)
                """
        )

        @Argument(help: "The folder or archive to pack.")
        var source: String?

        @Option(name: .customLong("base-url"), help: "The URL the folder's root answers for.")
        var baseURL: String?

        @Option(
            name: .customLong("from-har"),
            help: "Pack a HAR 1.2 recording (browsers' developer tools, Playwright, mitmproxy) instead of a folder: each request's answer.")
        var fromHAR: String?

        @Option(
            name: .customLong("from-warc"),
            help: ArgumentHelp(
                "Pack web archives instead of a folder: WARC files (.warc, .warc.gz) and WACZ packages, each response record's answer (repeatable).",
                valueName: "file"))
        var fromWARC: [String] = []

        @Option(
            name: .customLong("public-key"),
            help: "With --from-warc: every archive must be a WACZ signed by this Ed25519 public key (export --format wacz --sign-key).")
        var publicKey: String?

        @Option(name: [.short, .customLong("output")], help: "Where to write the bundle.")
        var output: String

        @Option(name: .customLong("strip-components"), help: "Leading path components to drop from archive entries.")
        var stripComponents: Int = 0

        @Option(name: .customLong("drop-query"), help: "A query parameter pattern to drop from request keys (repeatable, e.g. 'utm_*').")
        var dropQuery: [String] = []

        @Option(
            name: .customLong("match"),
            help: ArgumentHelp(
                "How a recording's requests are matched under a URL pattern (repeatable): 'PATTERN json-body [POINTER...]', 'PATTERN graphql [POINTER...]', 'PATTERN form-body [NAME...]' or 'PATTERN ignore-params NAME...'.",
                valueName: "rule"))
        var match: [String] = []

        @Option(help: "Charset added to text media types; 'none' adds none.")
        var charset: String = "utf-8"

        @Flag(name: .customLong("include-hidden"), help: "Also pack files and folders whose names start with a dot.")
        var includeHidden = false

        @Flag(
            name: .customLong("query-matters"),
            help:
                "Answer a URL with a query only if that exact URL was packed (by default /search.html?q=x is answered by search.html, as a static server does)."
        )
        var queryMatters = false

        @Option(name: .customLong("compression-level"), help: "Deflate level for text bodies, 1 (fast) to 12 (small).")
        var compressionLevel: Int = BundleWriter.defaultCompressionLevel

        @Flag(
            name: .customLong("stored-index"),
            help: "Store index.bin as it is rather than deflated: a larger bundle that mounts faster (100,000 files: 9 MB more, 20 ms less).")
        var storedIndex = false

        @Option(name: .customLong("sign-key"), help: "Sign the bundle with this Ed25519 private key file (default: $PACKAGER_SIGN_KEY, base64).")
        var signKey: String?

        func validate() throws {
            if publicKey != nil, fromWARC.isEmpty { throw ValidationError("--public-key checks the WACZ packages of --from-warc") }
            if !fromWARC.isEmpty {
                guard source == nil, baseURL == nil, fromHAR == nil else {
                    throw ValidationError("--from-warc packs web archives: give no folder, no --base-url and no --from-har")
                }
            } else if fromHAR != nil {
                guard source == nil, baseURL == nil else { throw ValidationError("--from-har packs a recording: give no folder and no --base-url") }
            } else {
                guard source != nil else { throw ValidationError("give the folder or archive to pack (or --from-har FILE, or --from-warc FILE)") }
                guard baseURL != nil else { throw ValidationError("--base-url is required: the URL the folder's root answers for") }
            }
            for rule in match where !BundleRules.isMatchRule(rule) {
                throw ValidationError(
                    "--match '\(rule)' is not a match rule: a URL pattern, then json-body, graphql or form-body and what they leave out, or ignore-params and the names (docs/FORMAT.md §4.6)"
                )
            }
            guard (1...12).contains(compressionLevel) else { throw ValidationError("--compression-level must be 1 to 12") }
            guard stripComponents >= 0 else { throw ValidationError("--strip-components cannot be negative") }
            try refuseOutput(
                output,
                over: [(source, "the folder or archive to pack"), (fromHAR, "the recording to pack"), (signKey, "the signing key")]
                    + fromWARC.map { ($0, "a web archive to pack") })
        }

        func run() throws {
            try reportingErrors {
                let key = try SigningKeys.privateKey(file: signKey, environment: "PACKAGER_SIGN_KEY")
                var writerOptions = BundleWriter.Options(dropQueryParameters: dropQuery, signingKey: key, compressionLevel: compressionLevel)
                writerOptions.storesIndex = storedIndex
                writerOptions.rules.match = match
                if !fromWARC.isEmpty {
                    // Bodies read and compressed on several threads, as a crawl's (CMalloc/shim.h): freed ones of a MiB
                    // and more are given back rather than kept in each thread's arena (docs/BENCHMARKS.md, a 10 GiB WARC).
                    packager_tune_allocator_for_bodies()
                    // The entries go to a scratch store beside the output, their bodies compressed while the archives are read.
                    let entries = try RecordedEntries(beside: output, compressionLevel: compressionLevel)
                    defer { entries.remove() }
                    let imported = try WARCImporter.read(fromWARC, rules: writerOptions.rules, into: entries, publicKey: try publicKey.map(readPublicKey))
                    defer { imported.removeSpool() }
                    guard imported.count > 0 else {
                        for skipped in imported.skipped.prefix(20) { print(terminalSafe("  skipped \(skipped.place) (\(skipped.url)): \(skipped.reason)")) }
                        throw PackagerError(
                            .invalidInput,
                            "\(fromWARC.joined(separator: ", ")): none of its \(imported.records) records can be packed (\(imported.skipped.count + imported.moreSkipped) skipped)"
                        )
                    }
                    let w = try entries.write(to: output, options: writerOptions)
                    report(
                        w, taken: imported.count, headline: "recorded exchanges (of \(imported.records) records)",
                        notes: imported.notes.map { ($0.place, $0.url, $0.note) }, skipped: imported.skipped.map { ($0.place, $0.url, $0.reason) },
                        more: (imported.moreNotes, imported.moreSkipped))
                    for signer in Set(imported.signers).sorted() { print("  the WACZ's signature checked: signed by \(signer)") }
                    return
                }
                if let fromHAR {
                    let imported = try HARImporter.read(fromHAR, rules: writerOptions.rules)
                    guard !imported.entries.isEmpty else { throw PackagerError(.invalidInput, "\(fromHAR): no entry of the recording can be packed") }
                    return try writeRecorded(
                        imported.entries, options: writerOptions, headline: "recorded requests",
                        notes: imported.notes.map { ("entry \($0.entry)", $0.url, $0.note) },
                        skipped: imported.skipped.map { ("entry \($0.entry)", $0.url, $0.reason) }, more: (imported.moreNotes, imported.moreSkipped))
                }
                guard let source, let baseURL else { return }
                let packer = Packer(
                    options: .init(
                        baseURL: baseURL, charset: charset == "none" ? nil : charset, stripComponents: stripComponents, includeHidden: includeHidden,
                        writer: writerOptions, ignoresQuery: !queryMatters))
                let summary = try packer.pack(source: source, output: output)
                let w = summary.write
                print("packed \(summary.files) files into \(output)")
                print("  \(w.entries) request keys, \(w.bodies) bodies (\(w.deduplicated) duplicate\(w.deduplicated == 1 ? "" : "s") stored once)")
                print("  \(formatBytes(w.bodyBytes)) of content stored in \(formatBytes(w.storedBytes)); bundle \(formatBytes(w.fileSize))")
                print("  digest sha256:\(w.digest)")
                for skipped in summary.skipped { print("  skipped \(skipped)") }
            }
        }

        /// Writes a recording's entries (HAR, WARC) and says what was kept with less and what was skipped, each by its
        /// place in the recording (`entry 3`, `the record at offset 1024 of crawl.warc.gz`).
        func writeRecorded(
            _ entries: [RecordedExchange], options: BundleWriter.Options, headline: String, notes: [(place: String, url: String, text: String)],
            skipped: [(place: String, url: String, text: String)], more: (notes: Int, skipped: Int)
        ) throws {
            var writer = BundleWriter(options: options)
            for entry in entries { writer.add(entry) }
            report(try writer.write(to: output), taken: entries.count, headline: headline, notes: notes, skipped: skipped, more: more)
        }

        /// Says what a recording's bundle holds, what was kept with less and what was skipped.
        func report(
            _ w: BundleWriter.Summary, taken: Int, headline: String, notes: [(place: String, url: String, text: String)],
            skipped: [(place: String, url: String, text: String)], more: (notes: Int, skipped: Int)
        ) {
            print("packed \(taken) \(headline) into \(output)")
            print("  \(w.entries) request keys, \(w.bodies) bodies; bundle \(formatBytes(w.fileSize))")
            print("  digest sha256:\(w.digest)")
            for kept in notes { print(terminalSafe("  kept \(kept.place) (\(kept.url)): \(kept.text)")) }
            if more.notes > 0 { print("  kept \(more.notes) more with less, not listed (the first \(notes.count) are)") }
            for left in skipped { print(terminalSafe("  skipped \(left.place) (\(left.url)): \(left.text)")) }
            if more.skipped > 0 { print("  skipped \(more.skipped) more, not listed (the first \(skipped.count) are)") }
        }
    }
}
