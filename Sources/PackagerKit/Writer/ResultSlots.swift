import NIOConcurrencyHelpers

/// Result slots for the parallel preparation: one per entry, and the first error.
final class ResultSlots: Sendable {
    private struct State {
        var slots: [PreparedBody?]
        var error: (any Error)?
    }

    private let state: NIOLockedValueBox<State>

    init(count: Int) {
        state = NIOLockedValueBox(State(slots: Array(repeating: nil, count: count)))
    }

    var failed: Bool { state.withLockedValue { $0.error != nil } }
    var error: (any Error)? { state.withLockedValue { $0.error } }
    var values: [PreparedBody?] { state.withLockedValue { $0.slots } }

    func set(_ i: Int, _ value: PreparedBody) { state.withLockedValue { $0.slots[i] = value } }
    func fail(_ e: any Error) { state.withLockedValue { if $0.error == nil { $0.error = e } } }
}
