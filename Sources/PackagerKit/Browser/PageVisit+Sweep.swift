import Foundation
import Synchronization

// The sweep of a page's search box (issue 51): the script that types into it, the probe that finds it, and which
// origins were swept in one crawl or check.

extension PageVisit.Behaviours {
    /// The inputs a page's search box may be, as the behaviours look for them.
    static let searchBoxSelector = "input[type=search], input[name=q], input[name=query], input[name=search], input[role=combobox], input[type=text]"

    /// Whether the page shows a search box the sweep would type into (as ``sweepSteps`` finds it).
    static let searchBoxProbe = """
        Array.from(document.querySelectorAll('\(searchBoxSelector)'))
          .some(el => el.offsetParent !== null || el.getClientRects().length > 0)
        """

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
            if (await typed('a', 4000) && await typed('z', 4000)) {
              for (const c of 'bcdefghijklmnopqrstuvwxy0123456789_') { await typed(c, 2000); }
            }
            type(box, '');
          }
        }
        """
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
    }
    private let state = Mutex(State())

    /// Whether `origin` may still be swept (no page has swept it).
    func open(_ origin: String) -> Bool { state.withLock { !$0.done.contains(origin) } }

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
