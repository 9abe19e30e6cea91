import Foundation

/// Total and per-host limits on requests in flight.
actor HostLimiter {
    let total: Int
    let perHost: Int
    private var inFlight = 0
    private var byHost: [String: Int] = [:]
    private var waiters: [(host: String, continuation: CheckedContinuation<Void, Never>)] = []

    init(total: Int, perHost: Int) {
        self.total = total
        self.perHost = perHost
    }

    /// Waits for a turn to send to `host`.
    func acquire(_ host: String) async {
        if inFlight < total && byHost[host, default: 0] < perHost {
            take(host)
            return
        }
        await withCheckedContinuation { waiters.append((host, $0)) }
    }

    func release(_ host: String) {
        inFlight -= 1
        byHost[host, default: 1] -= 1
        var index = 0
        while index < waiters.count && inFlight < total {
            let waiter = waiters[index]
            if byHost[waiter.host, default: 0] < perHost {
                waiters.remove(at: index)
                take(waiter.host)
                waiter.continuation.resume()
            } else {
                index += 1
            }
        }
    }

    private func take(_ host: String) {
        inFlight += 1
        byHost[host, default: 0] += 1
    }
}
