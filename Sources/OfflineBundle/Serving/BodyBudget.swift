import Synchronization

/// The request body bytes a server's connections may hold at once (bodies are kept only where a bundle matches
/// requests by them): past it, a request is answered 503 rather than held, so many connections sending bodies at
/// once cost the budget, not a megabyte each.
package final class BodyBudget: Sendable {
    package let limit: Int
    private let used = Atomic<Int>(0)

    package init(limit: Int) { self.limit = limit }

    /// Takes `bytes` from the budget; false, taking nothing, when they do not fit.
    package func reserve(_ bytes: Int) -> Bool {
        var current = used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= limit else { return false }
            let (exchanged, original) = used.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    package func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.subtract(bytes, ordering: .relaxed)
    }

    package var inUse: Int { used.load(ordering: .relaxed) }
}
