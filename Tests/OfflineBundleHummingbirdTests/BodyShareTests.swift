import OfflineBundle
import Testing

@testable import OfflineBundleServing

/// A connection's share of the body budget, alone: every reservation comes back, whichever way a body ends.
@Suite("a connection's share of the body budget")
struct BodyShareTests {
    @Test("reserved from a Content-Length, taken as the body comes, the rest given back at its end; a body answered, then the connection gone")
    func reservedTakenReleased() {
        let budget = BodyBudget(limit: 1000)
        var share = BodyShare(budget: budget)
        share.client = "192.0.2.1"
        #expect(share.reserveAhead(300) && budget.inUse == 300)
        #expect(share.take(200) && share.held == 200 && share.reservedAhead == 100 && budget.inUse == 300)
        share.bodyEnded()
        #expect(share.reservedAhead == 0 && budget.inUse == 200)
        share.answered(200)
        #expect(share.held == 0 && budget.inUse == 0)
        // Without a Content-Length: taken from the budget as the bytes come; a body dropped gives back what it held.
        #expect(share.take(150) && budget.inUse == 150)
        share.dropBody(of: 150)
        #expect(share.held == 0 && budget.inUse == 0)
        // What a connection holds when it goes comes back whole.
        #expect(share.reserveAhead(400) && share.take(100))
        share.releaseAll()
        #expect(share.held == 0 && share.reservedAhead == 0 && budget.inUse == 0)
    }

    @Test("past the budget: a reservation or a body's next bytes are refused, and nothing is counted for them")
    func refused() {
        let budget = BodyBudget(limit: 100)
        var share = BodyShare(budget: budget)
        #expect(!share.reserveAhead(150) && budget.inUse == 0 && share.reservedAhead == 0)
        #expect(share.take(80) && !share.take(30) && share.held == 80 && budget.inUse == 80)
        share.releaseAll()
        #expect(budget.inUse == 0)
    }
}
