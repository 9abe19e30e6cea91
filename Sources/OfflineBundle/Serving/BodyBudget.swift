import Synchronization

/// The request body bytes a server's connections may hold at once (bodies are kept only where a bundle matches
/// requests by them): past it, a request is answered 503 rather than held, so many connections sending bodies at
/// once cost the budget, not a megabyte each.
///
/// Shared fairly: one client address holds at most ``perClient`` bytes (an eighth of the budget, and never less than
/// one body of ``BundleRequest/maxBodySize``), so one client's many connections cannot take what the others need.
package final class BodyBudget: Sendable {
    package let limit: Int
    /// The most one client address may hold at once.
    package let perClient: Int
    private let state = Mutex(State())

    private struct State {
        var used = 0
        var byClient: [String: Int] = [:]
    }

    package init(limit: Int) {
        self.limit = limit
        perClient = min(limit, max(limit / 8, BundleRequest.maxBodySize))
    }

    /// Takes `bytes` from the budget, and from `client`'s share when given; false, taking nothing, when they do not fit.
    package func reserve(_ bytes: Int, client: String? = nil) -> Bool {
        state.withLock { state in
            guard state.used + bytes <= limit else { return false }
            if let client {
                let held = state.byClient[client, default: 0]
                guard held + bytes <= perClient else { return false }
                state.byClient[client] = held + bytes
            }
            state.used += bytes
            return true
        }
    }

    /// Gives back `bytes` taken by ``reserve(_:client:)`` (with the same client).
    package func release(_ bytes: Int, client: String? = nil) {
        guard bytes > 0 else { return }
        state.withLock { state in
            state.used -= bytes
            if let client, let held = state.byClient[client] {
                state.byClient[client] = held - bytes > 0 ? held - bytes : nil
            }
        }
    }

    package var inUse: Int { state.withLock { $0.used } }

    /// The client an address counts as: an IPv4 address itself (an IPv4-mapped IPv6 one too), an IPv6 address by its
    /// /64 (one host is given a whole /64 and can take any address in it).
    package static func clientKey(_ address: String) -> String {
        guard address.contains(":") else { return address }
        if address.contains("."), let v4 = address.split(separator: ":").last { return String(v4) }
        // Expanded to eight groups, so `2001:db8::1` and `2001:db8:0:0::2` are one /64.
        let halves = address.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false).map { $0.split(separator: ":").map(String.init) }
        var groups = halves[0]
        if halves.count == 2 { groups += Array(repeating: "0", count: max(0, 8 - halves[0].count - halves[1].count)) + halves[1] }
        let prefix = groups.prefix(4).map { group -> String in
            let trimmed = group.lowercased().drop { $0 == "0" }
            return trimmed.isEmpty ? "0" : String(trimmed)
        }
        return prefix.joined(separator: ":") + "::/64"
    }

    /// What `client` holds.
    package func inUse(by client: String) -> Int { state.withLock { $0.byClient[client, default: 0] } }
}
