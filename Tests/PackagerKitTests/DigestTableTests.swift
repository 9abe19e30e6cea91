import Testing

@testable import PackagerKit

/// The import's table of digests alone, against a Dictionary given the same operations.
@Suite("the import's digest table")
struct DigestTableTests {
    @Test("50,000 digests added, some replaced, the all-zero one among them: every lookup as a Dictionary's, misses nil, across its growth")
    func likeADictionary() {
        var generator = SystemRandomNumberGenerator()
        var table = DigestTable<UInt32>(filler: 0)
        var model: [ExchangeImport.KeyDigest: UInt32] = [:]
        var keys: [ExchangeImport.KeyDigest] = [ExchangeImport.KeyDigest(high: 0, low: 0)]
        // Keys that share their low half (the slot) with others, and random ones.
        for i in 0..<50_000 {
            let low = i % 10 == 0 ? UInt64(7) : generator.next()
            keys.append(ExchangeImport.KeyDigest(high: generator.next(), low: low))
        }
        for (i, key) in keys.enumerated() {
            table[key] = UInt32(i)
            model[key] = UInt32(i)
            if i % 3 == 0 {
                // Replaced: the count stays.
                table[key] = UInt32(i) + 1
                model[key] = UInt32(i) + 1
            }
        }
        #expect(table.count == model.count)
        var wrong = 0
        for key in keys where table[key] != model[key] { wrong += 1 }
        for _ in 0..<1000 where table[ExchangeImport.KeyDigest(high: generator.next(), low: generator.next())] != nil { wrong += 1 }
        #expect(wrong == 0)
        #expect(table[ExchangeImport.KeyDigest(high: 0, low: 0)] == 1)
    }
}
