import Testing

@testable import OfflineBundleServing

/// The HTTP/2 stream's turn for a large body, alone: what each check and each release asks of the handler.
@Suite("an HTTP/2 stream's turn")
struct StreamTurnTests {
    @Test("a turn held: checked again while the answer makes progress, waits for its own read, or the connection takes nothing")
    func heldWhileProgressing() {
        var turn = StreamTurn()
        #expect(turn.check(progress: 0, reading: false, connectionTakesBytes: true, stall: { true }) == .none)
        turn.entered(progress: 3)
        var asked = 0
        let stall = { () -> Bool in
            asked += 1
            return true
        }
        // Progress since the turn was given.
        #expect(turn.check(progress: 5, reading: false, connectionTakesBytes: true, stall: stall) == .checkAgain)
        // None since, but its own read is under way, or the whole connection takes nothing (a client reading nothing).
        #expect(turn.check(progress: 5, reading: true, connectionTakesBytes: true, stall: stall) == .checkAgain)
        #expect(turn.check(progress: 5, reading: false, connectionTakesBytes: false, stall: stall) == .checkAgain)
        #expect(asked == 0 && turn.state == .held(progressAtCheck: 5))
    }

    @Test("no progress while the connection takes bytes: the turn goes on as stalled, if the gate takes one more; released, the stalled place goes back")
    func stalls() {
        var turn = StreamTurn()
        turn.entered(progress: 7)
        // The gate has as many stalled streams as it takes: the turn is kept, and checked again.
        #expect(turn.check(progress: 7, reading: false, connectionTakesBytes: true, stall: { false }) == .checkAgain)
        #expect(turn.check(progress: 7, reading: false, connectionTakesBytes: true, stall: { true }) == .stalled)
        #expect(turn.state == .stalled)
        // No more checks once stalled.
        #expect(turn.check(progress: 7, reading: false, connectionTakesBytes: true, stall: { true }) == .none)
        #expect(turn.release() == .stalledPlace)
        #expect(turn.release() == .nothing)
        turn.entered(progress: 0)
        #expect(turn.release() == .turn)
        #expect(turn.state == .none)
    }
}
