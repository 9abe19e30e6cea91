import Dispatch
import Testing

@testable import OfflineBundle

/// The ranges a remote bundle's cache holds, against a model of one flag per byte.
@Suite("HeldRanges: a remote cache's ranges")
struct HeldRangesTests {
    @Test("random inserts and removals agree with a byte-by-byte model: count, contains, missing")
    func againstModel() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            var held = HeldRanges()
            var model = [Bool](repeating: false, count: 600)
            for _ in 0..<40 {
                let a = UInt64.random(in: 0..<600, using: &generator)
                let b = UInt64.random(in: a...600, using: &generator)
                if Int.random(in: 0..<5, using: &generator) == 0 {
                    held.remove(a..<b)
                    for i in a..<b { model[Int(i)] = false }
                } else {
                    held.insert(a..<b)
                    for i in a..<b { model[Int(i)] = true }
                }
                #expect(held.count == UInt64(model.filter { $0 }.count))
                // Apart and merged: no two ranges touch.
                #expect(zip(held.ranges, held.ranges.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound })
                let c = UInt64.random(in: 0..<600, using: &generator)
                let d = UInt64.random(in: c...600, using: &generator)
                #expect(held.contains(c..<d) == (c..<d).allSatisfy { model[Int($0)] })
                let gaps = held.missing(in: c..<d)
                #expect(gaps.reduce(0) { $0 + $1.count } == (c..<d).filter { !model[Int($0)] }.count)
                #expect(gaps.allSatisfy { $0.allSatisfy { !model[Int($0)] } })
            }
        }
    }

    @Test("what a remote bundle's messages and logs may show of its URL: no query (a presigned signature), no credentials")
    func shownURL() {
        #expect(RemoteObject.shown("https://user:secret@cdn.example/r/a.zip?X-Amz-Signature=abc#f") == "https://cdn.example/r/a.zip")
        #expect(RemoteObject.shown("http://127.0.0.1:8080/a.zip") == "http://127.0.0.1:8080/a.zip")
        #expect(RemoteObject.shown("https://cdn.example/path@v2/a.zip?x") == "https://cdn.example/path@v2/a.zip")
    }
}

@Suite("RangeStore: a remote cache's bytes within its budget")
struct RangeStoreTests {
    @Test("keeps made at once never hold more than the budget: each counts what it writes before it writes")
    func concurrentKeepsStayWithinBudget() throws {
        for _ in 0..<20 {
            let store = try RangeStore(folder: nil, digest: "test", size: 1 << 20, budget: 64 << 10)
            DispatchQueue.concurrentPerform(iterations: 64) { i in
                _ = store.keep([UInt8](repeating: 1, count: 4 << 10), at: UInt64(i) * (4 << 10))
            }
            #expect(store.heldBytes == 64 << 10, "\(store.heldBytes)")
        }
        // A whole object over ranges held already counts them once: a budget of exactly its size takes it.
        let store = try RangeStore(folder: nil, digest: "test", size: 100, budget: 100)
        #expect(store.keep([UInt8](repeating: 2, count: 40), at: 10))
        #expect(store.keep([UInt8](repeating: 3, count: 100), at: 0))
        #expect(store.heldBytes == 100 && !store.keep([9], at: 100))
    }
}
