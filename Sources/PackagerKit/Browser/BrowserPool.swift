import Foundation

/// The crawl's browser: one headless Chromium, a few tabs at a time, started again once when it dies. Pages wait
/// their turn for a tab; a page that crashes the browser or never loads is reported by the visit, never a hung crawl.
actor BrowserPool {
    private let executable: String
    private let profile: String
    private let tabs: Int
    let pageTimeout: Double
    private let behaviours: PageVisit.Behaviours
    private var browser: DevTools?
    private var busy = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private var restarts = 0

    /// The proxy every connection of the browser goes through.
    let proxy: BrowserProxy

    /// Starts the browser behind a ``BrowserProxy`` that lets a connection through only where `allows` says.
    ///
    /// - Throws: ``PackagerError`` when no Chromium is installed, or it does not start.
    init(settings: Declaration.Browser, profile: String, allows: @escaping BrowserProxy.Decide) throws {
        guard let executable = DevTools.findExecutable() else {
            throw PackagerError(.invalidInput, "browser: needs Chromium: " + DevTools.installHint)
        }
        self.executable = executable
        self.profile = profile
        tabs = settings.tabs
        pageTimeout = settings.pageTimeout
        behaviours = PageVisit.Behaviours(settings)
        do {
            proxy = try BrowserProxy.startBlocking(decide: allows)
        } catch {
            throw PackagerError(.io, "cannot start the browser's proxy on loopback: \(error)")
        }
        do {
            browser = try DevTools.launch(executable: executable, profile: profile, extraArguments: proxy.chromiumArguments)
        } catch {
            proxy.stopBlocking()
            throw PackagerError(.io, "cannot start the browser (\(executable)): \(error); " + DevTools.installHint)
        }
    }

    /// Visits `url` in a tab when one is free.
    func visit(_ url: String, decide: @escaping @Sendable (PageVisit.Request) async -> PageVisit.Decision) async -> PageVisit.Result {
        if busy >= tabs { await withCheckedContinuation { waiting.append($0) } }
        busy += 1
        defer {
            busy -= 1
            if !waiting.isEmpty { waiting.removeFirst().resume() }
        }
        // A browser that died is started again, once: a page that kills it every time does not stop the crawl.
        if browser?.gone != nil, restarts < 1 {
            restarts += 1
            browser?.close()
            browser = try? DevTools.launch(executable: executable, profile: profile + "-\(restarts)", extraArguments: proxy.chromiumArguments)
        }
        guard let browser, browser.gone == nil else { return PageVisit.Result(problem: "the browser is gone") }
        return await PageVisit.visit(url, in: browser, timeout: pageTimeout, behaviours: behaviours, decide: decide)
    }

    /// The running browser's process (for tests that kill it).
    var browserProcess: pid_t? { browser?.pid }

    func close() async {
        browser?.close()
        browser = nil
        await proxy.stop()
    }
}
