import Testing

@testable import OfflineBundleServing

/// The connection's own state alone, without a channel: the serving tests run it with one.
@Suite("a connection's state between requests")
struct ConnectionStateTests {
    @Test("a request is answered at once only when nothing is under way, nothing waits and the channel takes more")
    func arrival() {
        var state = ConnectionState()
        #expect(state.isQuiet && state.answersAtOnce)
        var arrivals = [state.arrival(othersWaiting: false, writable: true)]
        arrivals.append(state.arrival(othersWaiting: true, writable: true))
        arrivals.append(state.arrival(othersWaiting: false, writable: false))
        #expect(arrivals == [.answer, .wait, .wait])
        state.answerStarted()
        #expect(!state.isQuiet && !state.answersAtOnce)
        let duringAnswer = state.arrival(othersWaiting: false, writable: true)
        #expect(duringAnswer == .wait)
        state.answerEnded()
        let after = state.arrival(othersWaiting: false, writable: true)
        #expect(state.isQuiet && after == .answer)
    }

    @Test("requests waiting are resumed once an answer's writes are done, never between them, and writes nest")
    func writes() {
        var state = ConnectionState()
        // Nothing asked for a resume during the writes: none after them.
        var outermost = state.writesBegin()
        #expect(outermost && !state.isQuiet)
        var resumes = state.writesEnd(outermost: outermost)
        #expect(!resumes && state.isQuiet)

        // The channel became writable during the writes: not now, once they are done.
        outermost = state.writesBegin()
        var may = state.mayResume()
        #expect(!may)
        let inner = state.writesBegin()
        #expect(!inner)
        resumes = state.writesEnd(outermost: inner)
        #expect(!resumes, "an inner write's end resumes nothing")
        may = state.mayResume()
        #expect(!may && !state.isQuiet, "still writing after the inner writes")
        resumes = state.writesEnd(outermost: outermost)
        #expect(resumes)
        may = state.mayResume()
        #expect(may && state.isQuiet)
        // The resume was taken: the next writes owe none.
        outermost = state.writesBegin()
        resumes = state.writesEnd(outermost: outermost)
        #expect(!resumes)

        // A request read during the writes waits, and is taken once they are done.
        outermost = state.writesBegin()
        let arrival = state.arrival(othersWaiting: false, writable: true)
        #expect(arrival == .wait)
        resumes = state.writesEnd(outermost: outermost)
        #expect(resumes)
    }

    @Test("a half-closed connection closes once nothing answers or waits; one ending stays ending")
    func halfClose() {
        var state = ConnectionState()
        #expect(!state.closesAfterInput(nothingWaits: true), "open: the client may send more")
        state.answerStarted()
        state.inputEnded()
        #expect(state.phase == .inputClosed && !state.isQuiet)
        #expect(!state.closesAfterInput(nothingWaits: true), "an answer is under way")
        state.answerEnded()
        #expect(!state.closesAfterInput(nothingWaits: false), "requests wait")
        #expect(state.closesAfterInput(nothingWaits: true))
        state.ending()
        #expect(state.isClosing && !state.closesAfterInput(nothingWaits: true), "closing already")
        state.inputEnded()
        #expect(state.phase == .closing)
    }
}
