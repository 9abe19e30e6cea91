import Foundation
import Synchronization

/// A set of body positions, safe to read and extend from any thread: which bodies passed their checks in a mount.
final class VerifiedBodies: Sendable {
    private let words: Mutex<[UInt64]>

    init(count: Int) { words = Mutex([UInt64](repeating: 0, count: (count + 63) / 64)) }

    func contains(_ n: Int) -> Bool {
        words.withLock { words in n / 64 < words.count && words[n / 64] & (1 << UInt64(n % 64)) != 0 }
    }

    func insert(_ n: Int) {
        words.withLock { words in
            if n / 64 < words.count { words[n / 64] |= 1 << UInt64(n % 64) }
        }
    }
}

/// Inflated bodies, least recently used out first, bounded in bytes; safe from any thread.
package final class InflatedCache: Sendable {
    private struct State {
        var bodies: [Int: (bytes: Data, used: UInt64)] = [:]
        var total = 0
        var clock: UInt64 = 0
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = capacity }

    /// Whether a body of `size` bytes may be kept (an eighth of the capacity at most, so one body cannot empty it).
    package func admits(_ size: UInt64) -> Bool { size <= UInt64(capacity / 8) }

    package func get(_ body: Int) -> Data? {
        state.withLock { state in
            guard let entry = state.bodies[body] else { return nil }
            state.clock += 1
            state.bodies[body] = (entry.bytes, state.clock)
            return entry.bytes
        }
    }

    package func put(_ body: Int, _ bytes: Data) {
        guard admits(UInt64(bytes.count)) else { return }
        let capacity = capacity
        state.withLock { state in
            guard state.bodies[body] == nil else { return }
            state.clock += 1
            state.bodies[body] = (bytes, state.clock)
            state.total += bytes.count
            while state.total > capacity, let oldest = state.bodies.min(by: { $0.value.used < $1.value.used }) {
                state.total -= oldest.value.bytes.count
                state.bodies[oldest.key] = nil
            }
        }
    }

    /// Bytes held now.
    package var bytes: Int { state.withLock { $0.total } }

    /// Whether `body` is held (without counting as a use).
    package func contains(_ body: Int) -> Bool { state.withLock { $0.bodies[body] != nil } }
}
