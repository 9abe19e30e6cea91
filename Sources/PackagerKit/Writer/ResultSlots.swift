import NIOConcurrencyHelpers

/// Result slots for the parallel preparation: one per entry, and the first error.
final class ResultSlots: Sendable {
    private struct State {
        var slots: PreparedBodies
        var error: (any Error)?
    }

    private let state: NIOLockedValueBox<State>

    /// Slots that start with `values`.
    init(_ values: consuming PreparedBodies) {
        state = NIOLockedValueBox(State(slots: values))
    }

    /// The slots, taken out: none is left here.
    func take() -> PreparedBodies {
        state.withLockedValue { state in
            var taken = PreparedBodies()
            swap(&taken, &state.slots)
            return taken
        }
    }

    var failed: Bool { state.withLockedValue { $0.error != nil } }
    var error: (any Error)? { state.withLockedValue { $0.error } }

    func set(_ i: Int, _ value: PreparedBody) { state.withLockedValue { $0.slots[i] = value } }
    func fail(_ e: any Error) { state.withLockedValue { if $0.error == nil { $0.error = e } } }
}
