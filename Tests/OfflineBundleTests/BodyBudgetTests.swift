import OfflineBundle
import Testing

/// The body budget's fair shares (security review 3, S8): one client holds at most an eighth, an IPv6 client by its /64.
@Suite("BodyBudget: shares by client")
struct BodyBudgetTests {
    @Test("one client holds at most its share; another still gets room; what is released is its own")
    func shares() {
        let budget = BodyBudget(limit: 16 << 20)
        #expect(budget.perClient == 2 << 20)
        #expect(budget.reserve(1 << 20, client: "10.0.0.1") && budget.reserve(1 << 20, client: "10.0.0.1"))
        #expect(!budget.reserve(1, client: "10.0.0.1"), "past its share")
        #expect(budget.reserve(1 << 20, client: "10.0.0.2"), "another client")
        budget.release(1 << 20, client: "10.0.0.1")
        #expect(budget.reserve(1 << 20, client: "10.0.0.1") && budget.inUse(by: "10.0.0.1") == 2 << 20 && budget.inUse == 3 << 20)
        // A budget under a body's size still lets a client take all of it (at least one body of 1 MiB a client).
        #expect(BodyBudget(limit: 1024).perClient == 1024 && BodyBudget(limit: 4 << 20).perClient == 1 << 20)
    }

    @Test("an IPv6 client counts by its /64, an IPv4-mapped one by its IPv4 address")
    func clientKeys() {
        #expect(BodyBudget.clientKey("192.0.2.7") == "192.0.2.7")
        #expect(BodyBudget.clientKey("2001:db8::1") == BodyBudget.clientKey("2001:0db8:0:0:ffff::2"))
        #expect(BodyBudget.clientKey("2001:db8::1") == "2001:db8:0:0::/64")
        #expect(BodyBudget.clientKey("2001:db8:0:1::1") != BodyBudget.clientKey("2001:db8:0:2::1"))
        #expect(BodyBudget.clientKey("::ffff:192.0.2.7") == "192.0.2.7")
        #expect(BodyBudget.clientKey("::1") == "0:0:0:0::/64")
    }
}
