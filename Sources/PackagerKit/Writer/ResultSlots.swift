import NIOConcurrencyHelpers

/// Result slots for the parallel preparation: one per entry, and the first error.
final class ResultSlots: Sendable {
    /// The slots, set from the preparing threads.
    let slots: PreparedBodies
    private let firstError = NIOLockedValueBox<(any Error)?>(nil)

    /// Slots that start with `values`.
    init(_ values: PreparedBodies) { slots = values }

    var failed: Bool { firstError.withLockedValue { $0 != nil } }
    var error: (any Error)? { firstError.withLockedValue { $0 } }

    func set(_ i: Int, _ value: PreparedBody) {
        do {
            try slots.set(value, at: i)
        } catch {
            fail(error)
        }
    }
    func fail(_ e: any Error) { firstError.withLockedValue { if $0 == nil { $0 = e } } }
}
