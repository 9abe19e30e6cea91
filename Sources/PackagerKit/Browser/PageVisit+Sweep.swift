import Foundation
import Synchronization

// The sweep of a page's search box (issue 51): the script that types into it, the probe that finds it, and which
// origins were swept in one crawl or check.

extension PageVisit.Behaviours {
    /// The inputs a page's search box may be, as the behaviours look for them.
    static let searchBoxSelector = "input[type=search], input[name=q], input[name=query], input[name=search], input[role=combobox], input[type=text]"

    /// Whether the page shows a search box the sweep would type into (as ``sweepSteps`` finds it), waiting at most
    /// `milliseconds` for one to show: a page's script may insert its box after the load (Doxygen's menu does, on
    /// jQuery's ready), and a probe run just before that, under load, missed it and the origin was never swept.
    static func searchBoxProbe(waiting milliseconds: Int) -> String {
        """
        new Promise(done => {
          const started = performance.now();
          const look = () => {
            if (Array.from(document.querySelectorAll('\(searchBoxSelector)')).some(el => el.offsetParent !== null || el.getClientRects().length > 0)) {
              done(true);
            } else if (performance.now() - started >= \(milliseconds)) {
              done(false);
            } else {
              setTimeout(look, 100);
            }
          };
          look();
        })
        """
    }

    /// Types each leading letter, digit and `_` into the page's first search box, when the box loads its index in
    /// pieces (Doxygen's, one per first character typed): `a` made the page load something, and `z` then loaded
    /// another file (by path: a search API asked again with another query is not a piece). Each piece is then
    /// loaded. The wait after each is past the 500 ms such boxes wait for the typing to stop, and lasts until what
    /// it loaded has come.
    static let sweepSteps = """
        {
          const box = all('\(searchBoxSelector)')
            .find(el => el.offsetParent !== null || el.getClientRects().length > 0);
          if (box) {
            searchBox = true;
            const loaded = () => {
              const paths = new Set();
              const add = (w) => {
                try {
                  paths.add(w.location.origin + w.location.pathname);
                  for (const e of w.performance.getEntriesByType('resource')) { const u = new URL(e.name); paths.add(u.origin + u.pathname); }
                } catch (e) {}
              };
              add(window);
              for (let i = 0; i < window.frames.length; i++) { add(window.frames[i]); }
              return paths;
            };
            const fresh = (before) => Array.from(loaded()).filter(p => !before.has(p)).length;
            // Until what the page and its frames loaded stays the same for 150 ms and every frame has loaded (at
            // most 1.2 s): on a loaded machine a piece may take longer than the wait, and the next letter would
            // send its frame elsewhere before it came.
            const settle = async () => {
              let last = '';
              for (let i = 0; i < 8; i++) {
                let now = Array.from(loaded()).sort().join(' ');
                for (let f = 0; f < window.frames.length; f++) { try { now += ' ' + window.frames[f].document.readyState; } catch (e) {} }
                if (now === last && !now.includes('loading') && !now.includes('interactive')) return;
                last = now;
                await sleep(150);
              }
            };
            // Types `c`, then waits for what it makes the page load to begin (a search waits out its own pause
            // first: Doxygen's 500 ms) for at most `limit` ms, then for it to settle; whether it loaded anything.
            // On a loaded machine a fixed wait passed before the piece was asked for, and the sweep stopped at `a`.
            const typed = async (c, limit) => {
              const before = loaded();
              type(box, c);
              for (let t = 0; t < limit && fresh(before) === 0; t += 100) { await sleep(100); }
              await settle();
              return fresh(before) > 0;
            };
            type(box, '');
            await sleep(300);
            await settle();
            sweep = {typed: 1, loaded: 0, stoppedAt: 'a'};
            if (await typed('a', 4000)) {
              sweep = {typed: 2, loaded: 1, stoppedAt: 'z'};
              if (await typed('z', 4000)) {
                sweep = {typed: 2, loaded: 2, stoppedAt: null};
                for (const c of 'bcdefghijklmnopqrstuvwxy0123456789_') {
                  sweep.typed += 1;
                  if (await typed(c, 2000)) { sweep.loaded += 1; }
                }
              }
            }
            type(box, '');
          }
        }
        """
}

/// What typing into a page's search box, one leading character at a time, loaded (``SearchSweeps``).
public struct SearchSweep: Codable, Sendable, Equatable {
    /// The page whose box was swept (the first of its origin that showed one).
    public var page: String
    /// Characters typed: 37 when the sweep ran to its end.
    public var typed: Int
    /// Of those, the ones that made the page load something it had not (a piece of the index, a results frame).
    public var loaded: Int
    /// Where the sweep stopped early: `a`, typing it loaded nothing; `z`, it loaded nothing more (a search that is
    /// not in pieces, or one that asks an API again). Nil when every character was typed.
    public var stoppedAt: String?

    public init(page: String, typed: Int, loaded: Int, stoppedAt: String?) {
        self.page = page
        self.typed = typed
        self.loaded = loaded
        self.stoppedAt = stoppedAt
    }
}

/// Which origins' search boxes were swept in one crawl or check: a sweep costs about 30 s of typing, and one page
/// of an origin loads every piece of its index. A page that shows a search box claims its origin; if the sweep found no
/// box after all, the claim is let go, and the next page of that origin claims it. A page that finds the origin
/// claimed waits for that claim to end. (Before, any page claimed: a frame's page without a box held the claim while
/// the page with the box passed by, and the Doxygen test failed so in one full run of three.)
final class SearchSweeps: Sendable {
    private struct State {
        var done: Set<String> = []
        var claimed: Set<String> = []
        var probed: [String: Int] = [:]
    }
    private let state = Mutex(State())

    /// Whether `origin` may still be swept (no page has swept it).
    func open(_ origin: String) -> Bool { state.withLock { !$0.done.contains(origin) } }

    /// How long (ms) a page of `origin` waits for its search box to show: 2 s on the first ``patientPages`` pages of
    /// the origin (a seed page's box is the one that matters most), none after, so that a site without a search box
    /// pays 6 s in all, not 2 s a page.
    func patience(_ origin: String) -> Int {
        state.withLock {
            $0.probed[origin, default: 0] += 1
            return $0.probed[origin, default: 0] <= Self.patientPages ? 2_000 : 0
        }
    }

    static let patientPages = 3

    /// Whether the caller sweeps `origin`'s search box: no other page has. While another page holds the claim, waits
    /// for it to end (at most `patience`; a page's sweep is bound by its script's budget): false once that page swept.
    func claim(_ origin: String, patience: Duration = .seconds(150)) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: patience)
        while true {
            let answer: Bool? = state.withLock {
                if $0.done.contains(origin) { return false }
                return $0.claimed.insert(origin).inserted ? true : nil
            }
            if let answer { return answer }
            guard clock.now < deadline, (try? await Task.sleep(for: .milliseconds(100))) != nil else { return false }
        }
    }

    /// Ends a claim: `swept`, the page had a search box (the origin is done); else another page may claim it.
    func finish(_ origin: String, swept: Bool) {
        state.withLock {
            $0.claimed.remove(origin)
            if swept { $0.done.insert(origin) }
        }
    }
}
