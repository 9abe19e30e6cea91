/// An HTTP/2 stream's turn for a large body (``BodyGate``), as a state machine: the handler tells it what happened and
/// does what it returns, so the rules live here, apart from channels and timers, and are tested alone.
///
/// A stream waits for a turn; once it holds one, a check every ``BodyGate/stallPeriod`` sees whether its answer made
/// progress. An answer that made none while its connection still took bytes (a client that stopped reading this
/// stream, as a browser does with a video once its buffer is full) gives its turn to the next stream and counts among
/// the stalled ones, while the gate takes more of those.
struct StreamTurn {
    enum State: Equatable {
        /// No turn: none was asked for, or it was given back.
        case none
        /// A turn held, and the progress count at the last check.
        case held(progressAtCheck: Int)
        /// The turn was given back because the answer made no progress; it counts among the gate's stalled streams
        /// until the answer ends.
        case stalled
    }

    private(set) var state = State.none

    /// The gate gave a turn, with the progress count now.
    mutating func entered(progress: Int) { state = .held(progressAtCheck: progress) }

    /// What a check asks the handler to do.
    enum CheckAction: Equatable {
        /// Check again a period later.
        case checkAgain
        /// The turn went to the next stream (the gate was told by `stall`); no more checks.
        case stalled
        /// No turn is held: nothing to check.
        case none
    }

    /// One check, with the progress count now; `reading`: the answer waits for its own read off the event loop (a
    /// thread pool held up by other work is not a client that stopped reading); `connectionTakesBytes`: the
    /// connection is writable (a client that reads nothing at all leaves it unwritable, and its streams keep their
    /// turns); `stall`: asks the gate to count one more stalled stream and hand the turn on (false when it has as many
    /// as it takes), asked only when the rest says stalled.
    mutating func check(progress: Int, reading: Bool, connectionTakesBytes: Bool, stall: () -> Bool) -> CheckAction {
        guard case .held(let before) = state else { return .none }
        if progress == before && !reading && connectionTakesBytes && stall() {
            state = .stalled
            return .stalled
        }
        state = .held(progressAtCheck: progress)
        return .checkAgain
    }

    /// What the handler gives back to the gate when the answer ends or the stream goes.
    enum Release: Equatable {
        /// The turn held (``BodyGate/leave()``).
        case turn
        /// Its place among the stalled (``BodyGate/unstall()``).
        case stalledPlace
        case nothing
    }

    /// The answer ended, or the stream went: what is held is given back.
    mutating func release() -> Release {
        defer { state = .none }
        switch state {
        case .held: return .turn
        case .stalled: return .stalledPlace
        case .none: return .nothing
        }
    }
}
