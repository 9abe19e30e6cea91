import Foundation

/// Spaces requests evenly to stay under a rate.
actor Pacer {
    let interval: Double
    private var next = Date.distantPast

    init(perSecond: Double) { interval = 1 / max(perSecond, 0.001) }

    func wait() async {
        let now = Date()
        let slot = max(now, next)
        next = slot.addingTimeInterval(interval)
        let delay = slot.timeIntervalSince(now)
        if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
    }
}
