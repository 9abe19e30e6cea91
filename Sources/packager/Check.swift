import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

extension Packager {
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check",
            abstract: "Check a bundle offline: every body's digest, the index against the manifest, the signature.",
            discussion: """
                Exits 0 when the bundle is intact, 1 with every problem listed when it is not, 2 when it could not be checked \
                as given (a file that does not exist, a folder, a delta without its base or over another bundle than its own, \
                a bundle URL whose server cannot be read).

                With --browser, the bundle's pages are then opened in headless Chromium with no network at all (the bundle \
                answers every request, and host names do not resolve), their search boxes typed into and menus opened, and \
                every request the bundle could not answer is listed with its page and the script that asked; exits 1 when \
                there is one. Needs Chromium (Debian: chromium-headless-shell).
                """
        )

        @Argument(
            help:
                "The bundle to check: a file, or an http(s) URL (every byte read from the URL as it serves it now, never from the cache folder). A delta is a file; the bundles it stands over may be URLs, read by range requests."
        )
        var path: String

        @Argument(help: "When the bundle is a delta: the bundle it was made over (itself a delta over the next, and so on, as packager serve takes them).")
        var bases: [String] = []

        @OptionGroup(title: "Bundle URLs") var remote: RemoteFlags

        @Option(name: .customLong("public-key"), help: "A file with the Ed25519 public key (32 raw bytes or base64) the bundle must be signed by.")
        var publicKey: String?

        @Flag(help: "Print JSON.")
        var json = false

        @Flag(help: "Also open the bundle's pages in headless Chromium, offline, and list every request the bundle cannot answer.")
        var browser = false

        @Option(help: "With --browser: open this many of the pages, spread over them (default: all).")
        var sample: Int?

        @Option(name: .customLong("open"), help: "With --browser: also open this URL (repeatable), e.g. a search page with its query.")
        var extraPages: [String] = []

        @Option(name: .customLong("page-timeout"), help: "With --browser: seconds a page may take to load.")
        var pageTimeout: Double = 20

        @Option(help: "With --browser: pages open at once.")
        var tabs = 2

        @Option(
            name: .customLong("behaviors"),
            help: "With --browser: run the behaviours of this declaration's browser section on the pages (browser.behaviors, browser.generic-behaviors).")
        var behaviorsFrom: String?

        func validate() throws {
            if let sample, sample < 1 { throw ValidationError("--sample must be at least 1") }
            guard (1...16).contains(tabs) else { throw ValidationError("--tabs must be between 1 and 16") }
            guard pageTimeout.isFinite, pageTimeout > 0, pageTimeout <= 600 else { throw ValidationError("--page-timeout must be between 0 and 600 seconds") }
            if behaviorsFrom != nil && !browser { throw ValidationError("--behaviors goes with --browser") }
        }

        func run() async throws {
            var integrity: Checker.Report?
            try reportingErrors {
                let key = try publicKey.map(readPublicKey)
                let report = Checker.check(path: path, bases: bases, publicKey: key, remote: try remote.options(for: [path] + bases))
                integrity = report
                if json {
                    // With --browser, one JSON document for both: printed once the browser is done.
                    if !browser { try printJSON(report) }
                } else if report.isValid {
                    let signature =
                        switch (report.signatureValid, report.signerChecked) {
                        case (true?, true): ", signature valid, by \(report.signer ?? "the given key") (the given public key)"
                        case (true?, false):
                            ", signed by \(report.signer ?? "a key"), but the signer was not checked (give --public-key to check who signed it)"
                        default: ", unsigned"
                        }
                    print("ok: \(report.path): \(report.entries) entries, \(report.bodies) bodies, \(formatBytes(report.bytesVerified)) verified\(signature)")
                } else {
                    // Not checked at all when the input was wrong (a wrong base, a missing file), not the bundle damaged.
                    let verdict = report.refusedInput ? "NOT CHECKED" : "FAILED"
                    print("\(verdict): \(report.path): \(report.issues.count) problem\(report.issues.count == 1 ? "" : "s")")
                    for issue in report.issues { print("  " + terminalSafe(issue.description)) }
                }
                if !report.isValid {
                    if json && browser { try printJSON(report) }
                    throw ExitCode(report.refusedInput ? 2 : 1)
                }
            }
            guard browser else { return }
            guard let integrity else { return }
            try await reportingErrorsAsync {
                let key = try publicKey.map(readPublicKey)
                let loader = try OfflineLoader(
                    bundles: MountedBundle.mount(paths: [path] + bases, options: .init(requiredPublicKey: key), remote: try remote.options(for: [path] + bases))
                )
                let profile = FileManager.default.temporaryDirectory.appendingPathComponent("packager-browser-\(UUID().uuidString)").path
                defer { try? FileManager.default.removeItem(atPath: profile) }
                let settings = try behaviorsFrom.map { try DeclarationParser().parse(contentsOf: $0).browser } ?? Declaration.Browser()
                let options = BrowserCheck.Options(
                    sample: sample, pageTimeout: pageTimeout, tabs: tabs, extraPages: extraPages, genericBehaviors: settings.genericBehaviors,
                    behaviors: settings.behaviors)
                let result = try await BrowserCheck.run(loader: loader, options: options, profileFolder: profile)
                if json {
                    try printJSON(CombinedReport(check: integrity, browser: result))
                } else {
                    print("browser: \(result.pages) pages opened offline, \(result.requests) requests, \(result.answered) answered by the bundle")
                    for miss in result.unanswered {
                        let by = miss.initiator.map { ", asked by \($0)" } ?? ""
                        print(terminalSafe("  not in the bundle: \(miss.method) \(miss.url) (\(miss.type)\(by)) on \(miss.page)"))
                        if let near = miss.nearMiss { print(terminalSafe("    \(near)")) }
                    }
                    for problem in result.problems { print(terminalSafe("  not checked: \(problem.page): \(problem.reason)")) }
                }
                if !result.passed { throw ExitCode(1) }
            }
        }
    }
}

/// `check --json --browser`: the integrity report and the browser's, one document.
private struct CombinedReport: Encodable {
    var check: Checker.Report
    var browser: BrowserCheck.Report
}
