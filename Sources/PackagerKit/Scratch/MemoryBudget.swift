import NIOConcurrencyHelpers

/// The bytes a run may keep in memory instead of scratch files, shared by everything that holds bodies: the crawl's
/// received bodies and the writer's compressed ones draw on the same budget, so the two together stay within it.
final class MemoryBudget: Sendable {
    private let left: NIOLockedValueBox<Int>
    /// Bodies larger than this always go to a scratch file.
    let perBody: Int

    init(total: Int, perBody: Int) {
        left = NIOLockedValueBox(total)
        self.perBody = perBody
    }

    /// Takes `n` bytes of the budget; false when they are not there.
    func take(_ n: Int) -> Bool {
        left.withLockedValue { left in
            guard n <= left else { return false }
            left -= n
            return true
        }
    }

    /// The bytes not taken.
    var available: Int { left.withLockedValue { $0 } }

    /// Gives `n` bytes back.
    func give(_ n: Int) { left.withLockedValue { $0 += n } }
}
