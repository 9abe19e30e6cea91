import Foundation
import NIOConcurrencyHelpers
import Synchronization

/// One page opened in a tab of a ``DevTools`` browser, every request it makes (its frames' and workers' too) paused
/// and decided by the caller: answered (from a bundle), let through (to the origin), or failed. Generic behaviours run
/// once it has loaded (scroll, focus and type into search boxes, open menus and `<details>`), so code that loads on
/// use loads; then the links of the rendered DOM are read.
///
/// Bounded whatever the page does: a load waits at most `timeout` seconds, a page stops being answered past
/// ``maxRequests`` requests, dialogs are dismissed, and navigations of the page away from itself are failed (and
/// reported as links). A browser that crashes ends the visit with a problem, not a hang.
struct PageVisit: Sendable {
    /// A request the page made.
    struct Request: Sendable, Equatable {
        var url: String
        var method: String
        /// What asked for it, as the browser says: Document, Script, XHR, Fetch, Stylesheet, Image, Font…
        var type: String
        /// The script (or document) that asked, when the browser says.
        var initiator: String?
    }

    /// What became of one request.
    enum Outcome: String, Sendable {
        /// Answered by the caller (from a bundle).
        case answered
        /// Let through to the network.
        case fetched
        case failed
    }

    /// How the caller answers one request.
    enum Decision: Sendable {
        case fulfill(status: Int, headers: [(String, String)], body: Data)
        /// On to the network, with these request headers added (or replacing the browser's of the same name).
        case proceed(headers: [(String, String)] = [])
        case fail
    }

    /// What the visit found.
    struct Result: Sendable {
        /// Every request the page made, in order, and how each was decided.
        var requests: [(request: Request, decision: Outcome)] = []
        /// The links and resources of the rendered DOM (absolute URLs), navigations away included.
        var links: [String] = []
        /// Why the visit ended early, when it did (a crash, a load that never ended).
        var problem: String?
        /// What the caller's probe expression gave, when it gave a string.
        var probe: String?
        /// The addresses the page's scripts gave it with `history.pushState` and `replaceState` (a search page that
        /// writes its query there): a reload at each asks for it.
        var states: [String] = []
        /// What the sweep of the page's search box did, when the page's box was swept (see ``SearchSweeps``).
        var sweep: SearchSweep?
    }

    static let maxRequests = 2_000

    /// What a visit runs in the page once it has loaded.
    struct Behaviours: Sendable, Equatable {
        /// Whether the generic behaviours run: scroll to the end, open `<details>`, focus and type into search boxes,
        /// click menu buttons.
        var generic = true
        /// The declared ones (`browser.behaviors`), run after the generic ones on the pages they match.
        var declared: [Declaration.Behavior] = []
        /// Whether the page's search forms (a GET form with a text box) are submitted with a word, as a user would: the
        /// URL the form builds is asked for (`check --browser`, so that a query the bundle cannot answer is listed).
        var submitsForms = false
        /// The origins whose search box was swept (every leading letter and digit typed, for a search that loads its
        /// index in pieces): shared by every visit of one crawl or check, so that one page of an origin pays for it.
        let sweeps = SearchSweeps()

        init(generic: Bool = true, declared: [Declaration.Behavior] = [], submitsForms: Bool = false) {
            self.generic = generic
            self.declared = declared
            self.submitsForms = submitsForms
        }

        static func == (a: Behaviours, b: Behaviours) -> Bool {
            a.generic == b.generic && a.declared == b.declared && a.submitsForms == b.submitsForms
        }

        init(_ settings: Declaration.Browser) { self.init(generic: settings.genericBehaviors, declared: settings.behaviors) }

        /// Milliseconds the declared waits of the page add to the script's run.
        func waits(on url: String) -> Int {
            declared.filter { $0.applies(to: url) }.reduce(0) { total, step in
                if case .wait(let milliseconds) = step.action { return total + milliseconds }
                return total
            }
        }

        /// The script run on the page at `url`: the behaviours, then what it found as a JSON object: `links`, the
        /// rendered DOM's links; `states`, the addresses the page's scripts gave it (`history.pushState`,
        /// `replaceState`); and `searchBox`, whether it had one to sweep. `sweep`: whether the first search box is swept (see
        /// ``SearchSweeps``).
        func script(for url: String, sweep: Bool = false) -> String {
            var steps: [String] = []
            if generic && sweep { steps.append(Self.sweepSteps) }
            if generic { steps.append(Self.genericSteps) }
            if submitsForms { steps.append(contentsOf: [Self.formSteps, "await sleep(300);", Self.stateSteps]) }
            for step in declared where step.applies(to: url) {
                switch step.action {
                case .click(let selector):
                    steps.append("for (const el of all(\(Self.literal(selector))).slice(0, 20)) { try { el.click(); } catch (e) {} }\nawait sleep(200);")
                case .type(let selector, let text):
                    steps.append("for (const el of all(\(Self.literal(selector))).slice(0, 5)) { type(el, \(Self.literal(text))); }\nawait sleep(200);")
                case .wait(let milliseconds):
                    steps.append("await sleep(\(milliseconds));")
                case .script(let source):
                    // Indirect eval: the page's global scope; a promise it gives is awaited; what it throws is ignored.
                    steps.append("try { await (0, eval)(\(Self.literal(source))); } catch (e) {}")
                }
            }
            return """
                (async () => {
                const sleep = ms => new Promise(r => setTimeout(r, ms));
                const all = selector => { try { return Array.from(document.querySelectorAll(selector)); } catch (e) { return []; } };
                let searchBox = false, sweep = null;
                const type = (el, text) => {
                  try {
                    el.focus();
                    el.dispatchEvent(new FocusEvent('focus', {bubbles: true}));
                    el.value = text;
                    const key = text.slice(-1);
                    el.dispatchEvent(new KeyboardEvent('keydown', {bubbles: true, key}));
                    el.dispatchEvent(new Event('input', {bubbles: true}));
                    el.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key}));
                    el.dispatchEvent(new Event('change', {bubbles: true}));
                  } catch (e) {}
                };
                \(steps.joined(separator: "\n"))
                await sleep(300);
                const found = new Set();
                for (const el of document.querySelectorAll('a[href], area[href], link[href]')) { if (el.href) found.add(String(el.href)); }
                for (const el of document.querySelectorAll('script[src], img[src], iframe[src], source[src], video[src], audio[src], embed[src]')) {
                  if (el.src) found.add(String(el.src));
                }
                return JSON.stringify({links: Array.from(found), states: (window.\(Self.statesName) || []).slice(0, 50), searchBox, sweep});
                })()
                """
        }

        /// Where the script installed before the page's own (``stateRecorder``) keeps the addresses the page's scripts
        /// gave it.
        static let statesName = "__packagerStates"

        /// Run before the page's scripts: keeps every address given to `history.pushState` and `replaceState` (a search
        /// page that writes its query into the address as the user types, say), resolved against the page's. Reloading
        /// the page at that address must be answered too.
        static let stateRecorder = """
            (() => {
              const kept = window.\(statesName) = [];
              for (const name of ['pushState', 'replaceState']) {
                const original = history[name];
                history[name] = function (state, title, url) {
                  try { if (url !== undefined && url !== null) { const u = new URL(String(url), location.href); u.hash = ''; if (kept.length < 50) kept.push(u.href); } } catch (e) {}
                  return original.apply(this, arguments);
                };
              }
            })();
            """

        /// The addresses the page's scripts gave it, asked for as a reload of the page at each would ask.
        static let stateSteps = """
            for (const address of (window.\(statesName) || []).slice(0, 10)) {
              try { const u = new URL(address); if (u.protocol === 'http:' || u.protocol === 'https:') { await fetch(u.href).catch(() => {}); } } catch (e) {}
            }
            """

        static let genericSteps = """
            try { window.scrollTo(0, document.body ? document.body.scrollHeight : 0); } catch (e) {}
            for (const el of all('details:not([open])')) { try { el.open = true; } catch (e) {} }
            for (const el of all('\(searchBoxSelector)').slice(0, 5)) {
              type(el, 'a');
            }
            for (const el of all('[aria-haspopup], [aria-expanded=false], nav button').slice(0, 20)) { try { el.click(); } catch (e) {} }
            """

        /// The URL each GET form with a text box builds when submitted with the word `a` (its other fields as they
        /// stand), asked for as the form's navigation would ask.
        static let formSteps = """
            for (const form of all('form').slice(0, 5)) {
              try {
                if ((form.getAttribute('method') || 'get').toLowerCase() !== 'get') continue;
                const box = form.querySelector('input[type=search], input[type=text], input:not([type])');
                if (!box || !box.name) continue;
                const data = new FormData(form);
                data.set(box.name, 'a');
                const url = new URL(form.getAttribute('action') || location.href, location.href);
                url.search = new URLSearchParams(data).toString();
                url.hash = '';
                if (url.protocol === 'http:' || url.protocol === 'https:') { await fetch(url.href).catch(() => {}); }
              } catch (e) {}
            }
            """

        /// `text` as a JavaScript string literal (a JSON string is one).
        static func literal(_ text: String) -> String {
            let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// Opens `url` in a new tab of `browser` and records what it asks for, `decide` deciding each request.
    ///
    /// - Parameter probe: a JavaScript expression evaluated last (awaited when it is a promise), whose string result is
    ///   ``Result/probe``: what a test reads of the rendered page (how many search results it shows, say).
    static func visit(
        _ url: String, in browser: DevTools, timeout: Double, behaviours: Behaviours = Behaviours(), probe: String? = nil,
        decide: @escaping @Sendable (Request) async -> Decision
    ) async -> Result {
        let recorder = VisitLog(page: url)
        let target: String
        let session: String
        do {
            target = try await browser.send("Target.createTarget", ["url": "about:blank"])["targetId"].string ?? ""
            session = try await browser.send("Target.attachToTarget", ["targetId": .string(target), "flatten": true])["sessionId"].string ?? ""
        } catch {
            return Result(problem: "the browser did not open a tab: \(error)")
        }
        defer { Task { _ = try? await browser.send("Target.closeTarget", ["targetId": .string(target)], timeout: 5) } }
        let handler = recorder.handler(browser: browser, decide: decide)
        var loaded = false
        browser.setHandler(session: session, handler)
        defer {
            browser.removeHandler(session: session)
            for child in recorder.children { browser.removeHandler(session: child) }
        }
        do {
            try await browser.send("Fetch.enable", ["patterns": [["urlPattern": "*"]]], session: session)
            try await browser.send("Network.enable", [:], session: session)
            try await browser.send("Page.enable", [:], session: session)
            try await browser.send("Page.addScriptToEvaluateOnNewDocument", ["source": .string(PageVisit.Behaviours.stateRecorder)], session: session)
            // Out-of-process frames and workers: their requests are paused in their own sessions.
            try await browser.send("Target.setAutoAttach", ["autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true], session: session)
            let navigated = try await browser.send("Page.navigate", ["url": .string(url)], session: session, timeout: timeout)
            if let error = navigated["errorText"].string, !error.isEmpty { return recorder.result(problem: "the page did not load: \(error)") }
            recorder.mainFrame = navigated["frameId"].string
            if await !recorder.waitForLoad(timeout: timeout, browser: browser) {
                return recorder.result(problem: browser.gone ?? "the page did not finish loading in \(Int(timeout)) s")
            }
            loaded = true
            await recorder.waitForQuiet(limit: min(5, timeout), browser: browser)
            // Declared scripts may take up to the page timeout, on top of the declared waits; a sweep of the search box
            // types 37 characters, each up to 2 s (4 s for the first two) and 1.2 s more apart, a few seconds each
            // only where a letter loads nothing.
            let origin = PageVisit.origin(of: url)
            // Only a page with a search box claims its origin's sweep (a frame's page without one must not hold it
            // while the page that has one passes by).
            var sweep = false
            if behaviours.generic, let origin, behaviours.sweeps.open(origin) {
                let patience = behaviours.sweeps.patience(origin)
                let box = try await browser.send(
                    "Runtime.evaluate", ["expression": .string(Behaviours.searchBoxProbe(waiting: patience)), "awaitPromise": true, "returnByValue": true],
                    session: session, timeout: 10 + Double(patience) / 1000)
                if box["result"]["value"].bool == true { sweep = await behaviours.sweeps.claim(origin) }
            }
            let budget = 10_000 + behaviours.waits(on: url) + (behaviours.declared.isEmpty ? 0 : Int(timeout * 1000)) + (sweep ? 120_000 : 0)
            var swept = false
            defer { if sweep, let origin { behaviours.sweeps.finish(origin, swept: swept) } }
            let evaluated = try await browser.send(
                "Runtime.evaluate",
                [
                    "expression": .string(behaviours.script(for: url, sweep: sweep)), "awaitPromise": true, "returnByValue": true,
                    "timeout": .number(Double(budget)),
                ],
                session: session, timeout: Double(budget) / 1000 + 5)
            await recorder.waitForQuiet(limit: min(5, timeout), browser: browser)
            await recorder.settleWorkers(limit: min(10, timeout), browser: browser)
            if let text = evaluated["result"]["value"].string, let data = text.data(using: .utf8),
                let found = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            {
                recorder.addLinks(found["links"] as? [String] ?? [])
                recorder.addStates(found["states"] as? [String] ?? [])
                swept = found["searchBox"] as? Bool ?? false
                if let sweep = found["sweep"] as? [String: Any], let typed = sweep["typed"] as? Int, let loaded = sweep["loaded"] as? Int {
                    recorder.sweep = SearchSweep(page: url, typed: typed, loaded: loaded, stoppedAt: sweep["stoppedAt"] as? String)
                }
            }
            if let probe {
                let value = try await browser.send(
                    "Runtime.evaluate", ["expression": .string(probe), "awaitPromise": true, "returnByValue": true, "timeout": 60_000],
                    session: session, timeout: 65)
                recorder.probe = value["result"]["value"].string
            }
        } catch let error as DevTools.Failure where loaded && browser.gone == nil && error.message == DevTools.Failure.navigatedAway {
            // Loaded, the page went elsewhere on its own (a script set location) while a command ran on it: what it
            // asked for until then is recorded (the page it went to among it), not a problem of this page. Before its
            // load, the same answer may mean a tab closed: that stays a problem.
            return recorder.result(problem: nil)
        } catch {
            return recorder.result(problem: browser.gone ?? "\(error)")
        }
        return recorder.result(problem: nil)
    }
}

extension PageVisit {
    /// `scheme://host[:port]` of `url`, lowercased; nil for a URL without a host.
    static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host, !host.isEmpty else { return nil }
        return "\(scheme)://\(host)".lowercased() + (components.port.map { ":\($0)" } ?? "")
    }
}

/// The state of one visit, shared by the event handler (on the browser's reading thread) and the visit.
private final class VisitLog: Sendable {
    private struct State {
        var requests: [(request: PageVisit.Request, decision: PageVisit.Outcome)] = []
        /// The browser's network id of each request, whose initiator is looked up when the visit ends (the event that
        /// names it may come after the request was paused).
        var networkIds: [String?] = []
        var links: [String] = []
        var states: [String] = []
        var loaded = false
        var crashed: String?
        var lastActivity = Date()
        var inFlight = 0
        var initiators: [String: String] = [:]
        var mainFrame: String?
        var children: [String] = []
        /// The sessions of the page's dedicated workers (among `children`).
        var workers: [String] = []
        var navigated = false
        var probe: String?
        var sweep: SearchSweep?
    }

    let page: String
    private let state = NIOLockedValueBox(State())

    init(page: String) { self.page = page }

    var mainFrame: String? {
        get { state.withLockedValue { $0.mainFrame } }
        set { state.withLockedValue { $0.mainFrame = newValue } }
    }

    var children: [String] { state.withLockedValue { $0.children } }

    var probe: String? {
        get { state.withLockedValue { $0.probe } }
        set { state.withLockedValue { $0.probe = newValue } }
    }

    var sweep: SearchSweep? {
        get { state.withLockedValue { $0.sweep } }
        set { state.withLockedValue { $0.sweep = newValue } }
    }

    func addLinks(_ links: [String]) { state.withLockedValue { $0.links.append(contentsOf: links) } }
    func addStates(_ states: [String]) { state.withLockedValue { $0.states.append(contentsOf: states) } }

    func result(problem: String?) -> PageVisit.Result {
        state.withLockedValue { state in
            var seen = Set<String>()
            let links = state.links.filter { seen.insert($0).inserted }
            var requests = state.requests
            for (i, id) in state.networkIds.enumerated() where requests[i].request.initiator == nil {
                requests[i].request.initiator = id.flatMap { state.initiators[$0] }
            }
            var seenStates = Set<String>()
            return PageVisit.Result(
                requests: requests, links: links, problem: problem ?? state.crashed, probe: state.probe,
                states: state.states.filter { seenStates.insert($0).inserted }, sweep: state.sweep)
        }
    }

    /// Waits for the load event (or a crash, of the page or the browser), at most `timeout` seconds; whether it came.
    func waitForLoad(timeout: Double, browser: DevTools) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let (loaded, crashed) = state.withLockedValue { ($0.loaded, $0.crashed) }
            if loaded { return true }
            if crashed != nil || browser.gone != nil { return false }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Waits until no request has been paused or answered for 0.3 s, at most `limit` seconds.
    func waitForQuiet(limit: Double, browser: DevTools) async {
        let deadline = Date().addingTimeInterval(limit)
        while Date() < deadline, browser.gone == nil {
            let (last, inFlight) = state.withLockedValue { ($0.lastActivity, $0.inFlight) }
            if inFlight == 0 && Date().timeIntervalSince(last) > 0.3 { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits until the page's workers are idle and ask for nothing more, `limit` seconds at most. A worker quiet on
    /// the network may be busy running script that asks next (MkDocs' parses its search index, then imports lunr.js):
    /// a command evaluated in it is answered only once its current task is done, and what that task asked for is then
    /// paused here, so the visit waits for it as for any request.
    func settleWorkers(limit: Double, browser: DevTools) async {
        let deadline = Date().addingTimeInterval(limit)
        for _ in 0..<4 {
            let (workers, before) = state.withLockedValue { ($0.workers, $0.requests.count) }
            let left = deadline.timeIntervalSinceNow
            guard !workers.isEmpty, left > 0.5, browser.gone == nil else { return }
            for worker in workers {
                _ = try? await browser.send("Runtime.evaluate", ["expression": "0"], session: worker, timeout: left)
            }
            await waitForQuiet(limit: max(0.5, deadline.timeIntervalSinceNow), browser: browser)
            if state.withLockedValue({ $0.requests.count }) == before { return }
        }
    }

    func handler(browser: DevTools, decide: @escaping @Sendable (PageVisit.Request) async -> PageVisit.Decision) -> DevTools.EventHandler {
        { [self] method, params, session in
            switch method {
            case "Page.loadEventFired":
                state.withLockedValue { $0.loaded = true }
            case "Inspector.targetCrashed":
                state.withLockedValue { $0.crashed = "the page crashed the browser's renderer" }
            case "Page.javascriptDialogOpening":
                // A page held by a dialog is not quiet: what its script asks for after the dialog counts as the page's.
                state.withLockedValue { $0.inFlight += 1 }
                Task {
                    _ = try? await browser.send("Page.handleJavaScriptDialog", ["accept": false], session: session, timeout: 5)
                    self.state.withLockedValue {
                        $0.inFlight -= 1
                        $0.lastActivity = Date()
                    }
                }
            case "Network.requestWillBeSent":
                let initiator = params["initiator"]
                let by = initiator["url"].string ?? initiator["stack"]["callFrames"].array.first?["url"].string
                if let id = params["requestId"].string, let by, !by.isEmpty { state.withLockedValue { $0.initiators[id] = by } }
            case "Target.attachedToTarget":
                // A frame or worker of the page: its requests are paused and decided the same way.
                guard let child = params["sessionId"].string else { return }
                let isWorker = params["targetInfo"]["type"].string == "worker"
                state.withLockedValue {
                    $0.children.append(child)
                    if isWorker { $0.workers.append(child) }
                }
                browser.setHandler(session: child, handler(browser: browser, decide: decide))
                Task {
                    _ = try? await browser.send("Fetch.enable", ["patterns": [["urlPattern": "*"]]], session: child, timeout: 10)
                    _ = try? await browser.send("Network.enable", [:], session: child, timeout: 10)
                    _ = try? await browser.send("Runtime.runIfWaitingForDebugger", [:], session: child, timeout: 10)
                }
            case "Fetch.requestPaused":
                paused(params, session: session, browser: browser, decide: decide)
            default:
                break
            }
        }
    }

    private func paused(
        _ params: JSONValue, session: String, browser: DevTools, decide: @escaping @Sendable (PageVisit.Request) async -> PageVisit.Decision
    ) {
        guard let id = params["requestId"].string else { return }
        let url = params["request"]["url"].string ?? ""
        let type = params["resourceType"].string ?? "Other"
        let networkId = params["networkId"].string
        let sent = params["request"]["headers"]
        let request = PageVisit.Request(url: url, method: params["request"]["method"].string ?? "GET", type: type, initiator: nil)
        // The page navigating away from itself (a clicked link, a script's location change): a link, not a visit.
        let (navigatesAway, tooMany) = state.withLockedValue { state -> (Bool, Bool) in
            state.lastActivity = Date()
            let isMainDocument = type == "Document" && params["frameId"].string == state.mainFrame
            let away = isMainDocument && state.navigated
            if isMainDocument { state.navigated = true }
            if away { state.links.append(url) }
            return (away, state.requests.count >= PageVisit.maxRequests)
        }
        if navigatesAway || tooMany || url.hasPrefix("data:") || url.hasPrefix("blob:") {
            let verdict = url.hasPrefix("data:") || url.hasPrefix("blob:")
            Task {
                if verdict {
                    _ = try? await browser.send("Fetch.continueRequest", ["requestId": .string(id)], session: session, timeout: 10)
                } else {
                    _ = try? await browser.send(
                        "Fetch.failRequest", ["requestId": .string(id), "errorReason": "BlockedByClient"], session: session, timeout: 10)
                }
            }
            return
        }
        state.withLockedValue { $0.inFlight += 1 }
        Task {
            let decision = await decide(request)
            let word: PageVisit.Outcome
            switch decision {
            case .fulfill(let status, let headers, let body):
                word = .answered
                let fields: [JSONValue] = headers.map { ["name": .string($0.0), "value": .string($0.1)] }
                _ = try? await browser.send(
                    "Fetch.fulfillRequest",
                    [
                        "requestId": .string(id), "responseCode": .number(Double(status)), "responseHeaders": .array(fields),
                        "body": .string(body.base64EncodedString()),
                    ], session: session, timeout: 30)
            case .proceed(let extra):
                word = .fetched
                var message: [String: JSONValue] = ["requestId": .string(id)]
                if !extra.isEmpty {
                    // The browser's own headers, then the declared ones in their place.
                    let replaced = Set(extra.map { $0.0.lowercased() })
                    var fields: [JSONValue] = []
                    if case .object(let members) = sent {
                        for (name, value) in members where !replaced.contains(name.lowercased()) {
                            if let value = value.string { fields.append(["name": .string(name), "value": .string(value)]) }
                        }
                    }
                    for (name, value) in extra { fields.append(["name": .string(name), "value": .string(value)]) }
                    message["headers"] = .array(fields)
                }
                _ = try? await browser.send("Fetch.continueRequest", .object(message), session: session, timeout: 10)
            case .fail:
                word = .failed
                _ = try? await browser.send("Fetch.failRequest", ["requestId": .string(id), "errorReason": "BlockedByClient"], session: session, timeout: 10)
            }
            state.withLockedValue {
                $0.requests.append((request, word))
                $0.networkIds.append(networkId)
                $0.inFlight -= 1
                $0.lastActivity = Date()
            }
        }
    }
}
