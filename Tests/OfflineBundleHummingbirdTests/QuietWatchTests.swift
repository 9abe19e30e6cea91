import Testing

@testable import OfflineBundleServing

/// The decision behind the connection's idle check and its check of a body being held, without a channel or a clock.
@Suite("QuietWatch: quiet after two checks in a row without activity, and only then")
struct QuietWatchTests {
    /// What each check of `watch` says, given the activity counts seen at the checks in turn.
    static func checks(_ watch: QuietWatch, _ counts: [Int]) -> [Bool] {
        var watch = watch
        return counts.map { watch.check(activity: $0) }
    }

    @Test("activity between checks keeps it awake; two checks without any make it quiet; activity after one quiet check starts over")
    func checks() {
        // One quiet check is half a period: not yet; two in a row are a whole period.
        #expect(Self.checks(QuietWatch(), [0, 0]) == [false, true])
        // Activity at every check; then one quiet check, activity, and two quiet ones.
        #expect(Self.checks(QuietWatch(), [1, 2, 3, 3, 4, 4, 4]) == [false, false, false, false, false, false, true])
    }

    @Test("a watch started at a count sees that count as no activity; a count that wraps is still activity")
    func startedAt() {
        #expect(Self.checks(QuietWatch(activity: 4096), [4096, 4096]) == [false, true])
        #expect(Self.checks(QuietWatch(activity: Int.max), [Int.max &+ 1, Int.min, Int.min]) == [false, false, true])
    }
}
