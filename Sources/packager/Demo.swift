import ArgumentParser
import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdLauncher
import Logging
import OfflineBundle
import OfflineBundleHummingbird
import OfflineBundleServing
import PackagerKit
import ServiceLifecycle

extension Packager {
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "demo",
            abstract: "Run the whole job on the demo site, on loopback: build, serve offline, change the site, verify.",
            discussion: """
                An origin serves a copy of Templates/demo-site; packager build crawls it with a declaration (a blocked ad \
                script, a substituted logo); the origin stops and the bundle answers a few requests; two pages change and \
                one is deleted; verify flags those three and writes HTML and JUnit reports. Needs no network beyond \
                loopback, stops everything it started, and exits 0 when the three changes are flagged.
                """
        )

        @Option(help: "The demo site (default: Templates/demo-site, from the current folder or the repository the tool was built in).")
        var site: String?

        @Option(name: [.short, .customLong("output")], help: "Where the demo writes its declaration, bundle, reports and site copy.")
        var output = "out/demo"

        @Option(name: .customLong("origin-port"), help: "Loopback port of the demo origin (0 picks a free one).")
        var originPort = 0

        @Option(name: .customLong("serve-port"), help: "Loopback port the bundle is served on (0 picks a free one).")
        var servePort = 0

        func run() async throws {
            var flaggedAsExpected = false
            try await reportingErrorsAsync {
                flaggedAsExpected = try await DemoRun(site: try locateSite(), folder: output, originPort: originPort, servePort: servePort).run()
            }
            if !flaggedAsExpected { throw ExitCode(1) }
        }

        func locateSite() throws -> String {
            if let site {
                guard FileManager.default.fileExists(atPath: site + "/index.html") else {
                    throw PackagerError(.invalidInput, "\(site) is not a site folder (it has no index.html)")
                }
                return site
            }
            let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            // .build/<config>/packager, or .build/<triple>/<config>/packager, inside the repository.
            let candidates =
                ["Templates/demo-site"]
                + (2...4).map { up in
                    (0..<up).reduce(executable.deletingLastPathComponent()) { url, _ in url.deletingLastPathComponent() }.appendingPathComponent(
                        "Templates/demo-site"
                    ).path
                }
            guard let found = candidates.first(where: { FileManager.default.fileExists(atPath: $0 + "/index.html") }) else {
                throw PackagerError(.invalidInput, "cannot find the demo site: run packager demo from the repository, or give --site Templates/demo-site")
            }
            return found
        }
    }
}

/// The demo's steps, each printed as it runs.
struct DemoRun {
    let site: String
    let folder: String
    let originPort: Int
    let servePort: Int

    private let style = TerminalStyle(fd: STDOUT_FILENO)
    private static let changed = ["docs/faq.html", "docs/rate-limits.html"]
    private static let deleted = "docs/changelog.html"
    private static let marker = "# The demo's declaration, written by packager demo"

    init(site: String, folder: String, originPort: Int, servePort: Int) {
        self.site = site
        self.folder = folder
        self.originPort = originPort
        self.servePort = servePort
    }

    func step(_ text: String) { print("\n" + (style.enabled ? "\u{1B}[1m== \(text)\u{1B}[0m" : "== \(text)")) }

    /// Runs the demo; returns whether verify flagged exactly the three changes.
    func run() async throws -> Bool {
        let demo = try prepareFolder()
        step("1. an origin on loopback serves a copy of \(site)")
        var origin = try await startDemoServer(port: originPort, router: Self.fileRouter(demo + "/site"))
        let base = "http://127.0.0.1:\(origin.port)"
        print("  \(base)/ serves \(demo)/site")
        let bundlePath = demo + "/demo.bundle.zip"
        do {
            try await build(base: base, folder: demo, bundlePath: bundlePath)
        } catch {
            await origin.stop()
            throw error
        }
        step("3. the origin stops; the bundle answers on loopback")
        await origin.stop()
        try await serveOffline(bundlePath)
        step("4. the origin changes two pages and deletes one")
        try changeSite(demo + "/site")
        origin = try await startDemoServer(port: origin.port, router: Self.fileRouter(demo + "/site"))
        let asExpected: Bool
        do {
            asExpected = try await verify(bundlePath, base: base, folder: demo)
        } catch {
            await origin.stop()
            throw error
        }
        await origin.stop()
        summarize(demo, bundlePath: bundlePath)
        return asExpected
    }

    /// The demo's folder, made anew (only a folder this demo wrote before, or an empty or missing one, is replaced),
    /// with a copy of the site and the local file a substitution answers with; returns its absolute path.
    private func prepareFolder() throws -> String {
        let fm = FileManager.default
        if let names = try? fm.contentsOfDirectory(atPath: folder), !names.isEmpty {
            let declaration = (try? String(contentsOfFile: folder + "/packager.yml", encoding: .utf8)) ?? ""
            guard declaration.hasPrefix(Self.marker) else {
                throw PackagerError(.invalidInput, "\(folder) is not empty and was not written by packager demo; give another --output")
            }
            try fm.removeItem(atPath: folder)
        }
        try fm.createDirectory(atPath: folder + "/local", withIntermediateDirectories: true)
        let demo = URL(fileURLWithPath: folder).standardizedFileURL.path
        try fm.copyItem(atPath: site, toPath: demo + "/site")
        let logo = URL(fileURLWithPath: site).deletingLastPathComponent().appendingPathComponent("demo-logo.svg").path
        try fm.copyItem(atPath: fm.fileExists(atPath: logo) ? logo : site + "/assets/img/logo.svg", toPath: demo + "/local/logo.svg")
        return demo
    }

    /// Step 2: the declaration, the build, and an offline check of the bundle.
    private func build(base: String, folder demo: String, bundlePath: String) async throws {
        step("2. packager build packager.yml")
        let declarationText = """
            \(Self.marker) from the starter's keys.
            output: demo.bundle.zip
            seeds: ["\(base)/"]
            concurrency: {total: 8, per-host: 8}
            retries: {attempts: 2, backoff: 200ms}
            substitutions:
              - url: \(base)/assets/img/logo.svg
                file: local/logo.svg
            block: ["*/ads/*"]
            drop-query-parameters: ["utm_*"]

            """
        try OutputFile.write(declarationText, to: demo + "/packager.yml")
        let declaration = try DeclarationParser().parse(contentsOf: demo + "/packager.yml")
        let report = try await Builder(declaration: declaration, options: .init(output: bundlePath)).run()
        guard report.succeeded else {
            throw PackagerError(.io, "the demo build failed: " + report.failures.map { "\($0.url): \($0.reason)" }.joined(separator: "; "))
        }
        print(
            "  built \(bundlePath): \(report.entries) entries, \(report.bodies) bodies, \(formatBytes(report.fileSize)); "
                + "blocked \(report.blocked), substituted \(report.substituted), in \(String(format: "%.1f", report.seconds)) s")
        let check = Checker.check(path: bundlePath)
        print("  packager check: " + (check.issues.isEmpty ? "ok, every digest verified" : "\(check.issues.count) problems"))
    }

    /// Step 3: the bundle served on loopback, asked for a few paths.
    private func serveOffline(_ bundlePath: String) async throws {
        let router = Router()
        router.add(middleware: try OfflineBundleMiddleware<BasicRequestContext>(loader: try OfflineLoader(path: bundlePath)))
        let served = try await startDemoServer(port: servePort, router: router)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            for path in ["/", "/docs/getting-started.html", "/about/", "/assets/img/logo.svg", "/ads/tracker.js", "/not-in-the-bundle"] {
                let response = try await client.execute(HTTPClientRequest(url: "http://127.0.0.1:\(served.port)\(path)"), timeout: .seconds(10))
                let body = try await response.body.collect(upTo: 16 << 20)
                let type = response.headers.first(name: "content-type") ?? "-"
                print("  GET \(path)  ->  \(response.status.code), \(body.readableBytes) bytes, \(type)")
            }
        } catch {
            try? await client.shutdown()
            await served.stop()
            throw error
        }
        try? await client.shutdown()
        await served.stop()
    }

    /// Step 4: two pages changed, one deleted.
    private func changeSite(_ site: String) throws {
        for page in Self.changed {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: site + "/" + page))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("\n<p>Updated after the release.</p>\n".utf8))
            try handle.close()
        }
        try FileManager.default.removeItem(atPath: site + "/" + Self.deleted)
        print("  changed \(Self.changed.joined(separator: " and ")), deleted \(Self.deleted)")
    }

    /// Step 5: verify against the changed origin, with its reports; whether exactly the three changes were flagged.
    private func verify(_ bundlePath: String, base: String, folder demo: String) async throws -> Bool {
        step("5. packager verify")
        var options = Verifier.Options()
        options.retries.attempts = 1
        // The demo asks its own origin, on loopback.
        options.allowPrivateAddresses = true
        let verified = try await Verifier(options: options).verify(bundleAt: bundlePath)
        print(try ReportFormatter.render(verified, as: .text, color: style.enabled))
        try OutputFile.write(try ReportFormatter.render(verified, as: .html), to: demo + "/verify.html")
        try OutputFile.write(try ReportFormatter.render(verified, as: .junit), to: demo + "/verify.xml")
        let flagged = Set(
            verified.entries.filter { [.stale, .gone, .moved].contains($0.verdict) }.map { $0.url.replacingOccurrences(of: base + "/", with: "") })
        let expected = Set(Self.changed + [Self.deleted])
        let asExpected = flagged == expected
        print(
            "  verify exited \(verified.exitCode), as expected (1: something is stale, gone or moved); flagged: \(flagged.sorted().joined(separator: ", "))"
                + (asExpected ? "" : style.red("; expected \(expected.sorted().joined(separator: ", "))")))
        return asExpected
    }

    private func summarize(_ demo: String, bundlePath: String) {
        step("done: everything is in \(demo)")
        print(
            """
              declaration     \(demo)/packager.yml
              bundle          \(bundlePath)   (packager inspect it; unzip -l it)
              verify report   \(demo)/verify.html (HTML), \(demo)/verify.xml (JUnit)
              the site        \(demo)/site (as changed in step 4)
              local files     \(demo)/local (logo.svg answers the substituted URL)
            (the origins have stopped: run packager demo again to repeat the whole check)
            """)
    }

    /// A router that serves a folder as a web server would, with ETag and Last-Modified (so verify has validators).
    static func fileRouter(_ root: String) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: FileMiddleware(root, searchForIndexHtml: true, logger: Logger(label: "demo-origin", factory: { _ in SwiftLogNoOpLogHandler() })))
        return router
    }
}

/// Starts a demo server on 127.0.0.1, with the error in the CLI's words.
private func startDemoServer(port: Int, router: Router<BasicRequestContext>) async throws -> HummingbirdServer {
    do {
        return try await HummingbirdServer.start(responder: router.buildResponder(), port: port, serverName: "packager-demo")
    } catch {
        throw PackagerError(.io, "cannot serve on 127.0.0.1:\(port): \(error)")
    }
}
