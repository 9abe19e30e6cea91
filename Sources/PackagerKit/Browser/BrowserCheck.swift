import Foundation
import NIOPosix
import OfflineBundle

/// `packager check --browser`: the offline proof. The bundle's pages are opened in headless Chromium with no network
/// at all (every request is paused and answered by the loader, and every host name fails to resolve), the generic
/// behaviours run on each, and every request the bundle could not answer is listed with the page and the script that
/// asked: what a user offline would meet as a broken page.
public enum BrowserCheck {
    public struct Options: Sendable {
        /// How many of the bundle's pages to open, spread evenly over them in key order; nil opens them all.
        public var sample: Int?
        /// Seconds a page may take to load.
        public var pageTimeout: Double = 20
        /// Pages open at once.
        public var tabs = 2
        /// URLs opened besides the bundle's pages (a search page with its query, say).
        public var extraPages: [String] = []
        /// The Chromium to run (default: ``DevTools`` finds one).
        public var executable: String?
        /// Whether the generic behaviours run on each page (as in the crawl).
        public var genericBehaviors = true
        /// Declared behaviours (a declaration's `browser.behaviors`), run on the pages they match.
        public var behaviors: [Declaration.Behavior] = []

        public init(
            sample: Int? = nil, pageTimeout: Double = 20, tabs: Int = 2, extraPages: [String] = [], executable: String? = nil,
            genericBehaviors: Bool = true, behaviors: [Declaration.Behavior] = []
        ) {
            self.sample = sample
            self.pageTimeout = pageTimeout
            self.tabs = tabs
            self.extraPages = extraPages
            self.executable = executable
            self.genericBehaviors = genericBehaviors
            self.behaviors = behaviors
        }
    }

    /// A request the bundle could not answer.
    public struct Miss: Codable, Sendable, Equatable {
        public var page: String
        public var url: String
        public var method: String
        /// What asked for it: Script, XHR, Fetch, Image, Stylesheet, Document…
        public var type: String
        /// The script or document that asked, when the browser says.
        public var initiator: String?
        /// The nearest request the bundle recorded under the same path, and what differed (``MissExplanation``); nil
        /// when nothing was recorded there.
        public var nearMiss: String? = nil
    }

    /// A page that could not be checked, and why.
    public struct Problem: Codable, Sendable, Equatable {
        public var page: String
        public var reason: String
    }

    public struct Report: Codable, Sendable {
        public var pages: Int
        public var requests: Int
        public var answered: Int
        public var unanswered: [Miss]
        public var problems: [Problem]
        /// Whether every request of every page was answered and every page opened.
        public var passed: Bool { unanswered.isEmpty && problems.isEmpty }
    }

    /// The HTML pages of the loader's bundles the check opens: status 200, `text/html`, in key order, one key per
    /// distinct body (`/` and `/index.html` are one page), sampled.
    static func pages(of loader: OfflineLoader, sample: Int?) -> [String] {
        var pages: [(key: String, body: String)] = []
        for bundle in loader.bundles {
            for entry in bundle.entries where entry.status == 200 && entry.kind != .blocked {
                let type = entry.header("content-type").map(MediaTypes.essence(of:)) ?? ""
                if type == "text/html" || type == "application/xhtml+xml" { pages.append((entry.key, entry.body.map { "\($0.sha256)" } ?? entry.key)) }
            }
        }
        var seenKeys = Set<String>()
        var seenBodies = Set<String>()
        let keys = pages.sorted { $0.key < $1.key }.filter { seenKeys.insert($0.key).inserted && seenBodies.insert($0.body).inserted }.map(\.key)
        guard let sample, sample < keys.count, sample > 0 else { return keys }
        return (0..<sample).map { keys[$0 * keys.count / sample] }
    }

    /// Opens the pages in a browser answered by `loader` alone, and lists what it could not answer.
    ///
    /// - Throws: ``PackagerError`` when no Chromium can be found or started.
    public static func run(loader: OfflineLoader, options: Options, profileFolder: String) async throws -> Report {
        guard let executable = options.executable ?? DevTools.findExecutable() else {
            throw PackagerError(.invalidInput, "--browser needs Chromium: " + DevTools.installHint)
        }
        // Nothing leaves: every name fails to resolve, and every connection (to an IP literal too, WebRTC's over TCP)
        // goes to a proxy that refuses it; WebRTC's UDP is off.
        let proxy: BrowserProxy
        do {
            proxy = try await BrowserProxy.start { _, _, _ in false }
        } catch {
            throw PackagerError(.io, "cannot start the browser's proxy on loopback: \(error)")
        }
        let browser: DevTools
        do {
            browser = try DevTools.launch(executable: executable, profile: profileFolder, offline: true, extraArguments: proxy.chromiumArguments)
        } catch {
            await proxy.stop()
            throw PackagerError(.io, "cannot start the browser: \(error)")
        }
        defer { browser.close() }
        let pages = pages(of: loader, sample: options.sample) + options.extraPages
        // Search forms are submitted too: a query the pages would ask for that the bundle cannot answer is a miss.
        let behaviours = PageVisit.Behaviours(generic: options.genericBehaviors, declared: options.behaviors, submitsForms: options.genericBehaviors)
        var results: [(page: String, result: PageVisit.Result)] = []
        await withTaskGroup(of: (String, PageVisit.Result).self) { group in
            var next = 0
            func start() {
                guard next < pages.count else { return }
                let page = pages[next]
                next += 1
                group.addTask {
                    (page, await PageVisit.visit(page, in: browser, timeout: options.pageTimeout, behaviours: behaviours) { await answer($0, from: loader) })
                }
            }
            for _ in 0..<max(1, options.tabs) { start() }
            for await done in group {
                results.append(done)
                start()
            }
        }
        await proxy.stop()
        var report = Report(pages: pages.count, requests: 0, answered: 0, unanswered: [], problems: [])
        for (page, result) in results.sorted(by: { $0.page < $1.page }) {
            if let problem = result.problem { report.problems.append(Problem(page: page, reason: problem)) }
            // A page that asked for one URL again and again (a search box typed into) is listed once for it.
            var listed = Set<String>()
            for (request, decision) in result.requests {
                report.requests += 1
                if decision == .answered {
                    report.answered += 1
                } else if listed.insert(request.method + " " + request.url).inserted {
                    // Said against the nearest recorded request: a query the page's script built, a header it sent.
                    let why = loader.explainMiss(BundleRequest(method: request.method, url: request.url))
                    report.unanswered.append(
                        Miss(
                            page: page, url: request.url, method: request.method, type: request.type, initiator: request.initiator,
                            nearMiss: why?.nearest == nil ? nil : why?.description))
                }
            }
        }
        return report
    }

    /// The loader's answer to one request of the browser; a miss fails it.
    static func answer(_ request: PageVisit.Request, from loader: OfflineLoader) async -> PageVisit.Decision {
        guard let response = loader.response(for: BundleRequest(method: request.method, url: request.url)) else { return .fail }
        // Bodies are read off the cooperative pool, as every integration reads them.
        guard let body = try? await NIOThreadPool.singleton.runIfActive({ try response.bodyData() }) else { return .fail }
        let headers = response.headers.filter { $0.name != .contentLength }.map { ($0.name.canonicalName, $0.value) }
        return .fulfill(status: response.status, headers: headers, body: body)
    }
}
