import Foundation
import OfflineBundle
import Testing

@testable import PackagerKit

/// The import's tables that live in scratch files past a size: the digest table alone, against a Dictionary given the
/// same operations; the array of fixed-size values under it, against an array; the prepared bodies' table.
@Suite("the import's scratch tables")
struct DigestTableTests {
    @Test(
        "20,000 digests added, some replaced, the all-zero one among them: every lookup as a Dictionary's, misses nil, across its growth, in memory and in a file",
        arguments: [false, true])
    func likeADictionary(spilled: Bool) throws {
        let scratch = try ScratchFolder(in: NSTemporaryDirectory())
        defer { scratch.remove() }
        var generator = SystemRandomNumberGenerator()
        // 16 KiB: the slots (24 bytes) go to a file once the table passes 1,024 of them.
        var table = spilled ? DigestTable(folder: scratch.path, memoryLimit: 16 << 10) : DigestTable()
        var model: [ExchangeImport.KeyDigest: UInt64] = [:]
        var keys: [ExchangeImport.KeyDigest] = [ExchangeImport.KeyDigest(high: 0, low: 0)]
        // Keys that share their low half (the slot) with others, and random ones.
        for i in 0..<20_000 {
            let low = i % 10 == 0 ? UInt64(7) : generator.next()
            keys.append(ExchangeImport.KeyDigest(high: generator.next(), low: low))
        }
        for (i, key) in keys.enumerated() {
            try table.set(UInt64(i), for: key)
            model[key] = UInt64(i)
            if i % 3 == 0 {
                // Replaced: the count stays.
                try table.set(UInt64(i) + 1, for: key)
                model[key] = UInt64(i) + 1
            }
        }
        #expect(table.spilled == spilled)
        #expect(table.count == model.count)
        var wrong = 0
        for key in keys where try table.value(for: key) != model[key] { wrong += 1 }
        for _ in 0..<1000 where try table.value(for: ExchangeImport.KeyDigest(high: generator.next(), low: generator.next())) != nil { wrong += 1 }
        #expect(wrong == 0)
        #expect(try table.value(for: ExchangeImport.KeyDigest(high: 0, low: 0)) == 1)
    }

    struct Pair: Equatable {
        var a: UInt64
        var b: UInt32
    }

    @Test("a scratch array against an array: appended past its limit, set at random places through its few pages, made of zeros in a file")
    func scratchArrayLikeAnArray() throws {
        let scratch = try ScratchFolder(in: NSTemporaryDirectory())
        defer { scratch.remove() }
        var generator = SystemRandomNumberGenerator()
        // 16-byte values, 4 KiB pages of 256, 16 pages held: 30,000 values span 118 pages.
        let array = ScratchArray<Pair>(folder: scratch.path, memoryLimit: 32 << 10)
        var model: [Pair] = []
        for i in 0..<30_000 {
            let value = Pair(a: generator.next(), b: UInt32(i))
            try array.append(value)
            model.append(value)
            if i == 3_000 { #expect(array.spilled) }
        }
        for _ in 0..<20_000 {
            let i = Int.random(in: 0..<model.count)
            let value = Pair(a: generator.next(), b: UInt32.random(in: 0...UInt32.max))
            try array.set(value, at: i)
            model[i] = value
        }
        #expect(array.count == model.count)
        var wrong = 0
        for i in model.indices.shuffled() where try array.value(at: i) != model[i] { wrong += 1 }
        #expect(wrong == 0)

        let zeros = try ScratchArray<Pair>(zeros: 10_000, folder: scratch.path, memoryLimit: 1 << 10)
        #expect(zeros.spilled && zeros.count == 10_000)
        try zeros.set(Pair(a: 1, b: 2), at: 9_999)
        #expect(try zeros.value(at: 9_999) == Pair(a: 1, b: 2))
        #expect(try zeros.value(at: 0) == Pair(a: 0, b: 0))
        #expect(try zeros.value(at: 5_000) == Pair(a: 0, b: 0))
        // Without a folder it never spills.
        let inMemory = ScratchArray<Pair>(folder: nil, memoryLimit: 16)
        for i in 0..<100 { try inMemory.append(Pair(a: UInt64(i), b: 0)) }
        #expect(!inMemory.spilled)
        #expect(try inMemory.value(at: 99).a == 99)
    }

    @Test("prepared bodies in a file: each entry's body read back as set (spool offset, bytes held, a file's path, written, none), the count of bodies kept")
    func preparedBodiesInAFile() throws {
        let scratch = try ScratchFolder(in: NSTemporaryDirectory())
        defer { scratch.remove() }
        // 72-byte records: 64 KiB is about 900 of them.
        let bodies = PreparedBodies(folder: scratch.path, memoryLimit: 64 << 10)
        // Paths of 60 bytes and more: about 120 KB of them, past the 32 KiB they are kept in memory up to.
        func path(_ i: Int) -> String { "/scratch/bodies/\(i)-" + String(repeating: "x", count: 40 + i % 13) }
        func body(_ i: Int) -> PreparedBody? {
            guard i % 5 != 0 else { return nil }
            let digest = BodyDigest(bytes: (0..<32).map { UInt8(truncatingIfNeeded: i &* 31 &+ $0) })
            let storage: PreparedBody.Storage = i % 5 == 1 ? .memory([UInt8(i & 0xFF)]) : i % 5 == 2 ? .source(.file(path(i))) : .spool(offset: UInt64(i) * 7)
            return PreparedBody(
                digest: digest, crc32: UInt32(i), storedCRC32: UInt32(i) + 1, size: UInt64(i) * 3, storedSize: UInt64(i) * 2,
                compression: i % 2 == 0 ? .deflate : .stored, storage: storage)
        }
        let count = 10_000
        for i in 0..<count { try bodies.append(i % 7 == 0 ? nil : body(i)) }
        for i in stride(from: 0, to: count, by: 7) { try bodies.set(body(i), at: i) }
        try bodies.setWritten(1)
        try bodies.setWritten(3)
        // A body read from its own file has nothing held to let go: it is read from its path still.
        try bodies.setWritten(2)
        #expect(bodies.count == count)
        #expect(try (0..<count).count { try bodies.digest(at: $0) != nil } == count - count / 5)
        var wrong = 0
        for i in 0..<count {
            let read = try bodies.body(at: i)
            let expected = body(i)
            guard let read, let expected else {
                if (read == nil) != (expected == nil) { wrong += 1 }
                continue
            }
            var same = read.digest == expected.digest && read.crc32 == expected.crc32 && read.storedCRC32 == expected.storedCRC32
            same = same && read.size == expected.size && read.storedSize == expected.storedSize && read.compression == expected.compression
            switch (read.storage, expected.storage) {
            case (.written, _): same = same && i == 1
            case (.spool(let a), .spool(let b)): same = same && a == b
            case (.memory(let a), .memory(let b)): same = same && a == b
            case (.source(.file(let a)), .source(.file(let b))): same = same && a == b
            default: same = false
            }
            if !same { wrong += 1 }
        }
        #expect(wrong == 0)
    }
}

/// The writer's sort in bounded memory, against the standard library's.
@Suite("the external sorter")
struct ExternalSorterTests {
    @Test(
        "records of 0 bytes to 100 KiB, sorted in memory and in over 100 runs of a kilobyte merged in two passes, come out as sorted() orders them",
        arguments: [false, true])
    func likeSorted(spilled: Bool) throws {
        let scratch = try ScratchFolder(in: NSTemporaryDirectory())
        defer { scratch.remove() }
        var generator = SystemRandomNumberGenerator()
        var records: [[UInt8]] = []
        for i in 0..<5_000 {
            // Short records over few letters (many equal prefixes, some equal records), and now and then a long one.
            let length = i % 997 == 0 ? 100_000 + i : Int.random(in: 0...12, using: &generator)
            records.append((0..<length).map { _ in UInt8.random(in: 97...100, using: &generator) })
        }
        // Runs of about 1 KiB (a record and its 16-byte span each): over 100 of them, merged in two passes (64 at a time).
        let sorter = ExternalSorter(folder: spilled ? scratch.path : nil, memoryLimit: 1024) { $0.lexicographicallyPrecedes($1) }
        for record in records { try sorter.append(record) }
        #expect(sorter.spilled == spilled)
        if spilled { #expect(sorter.runCount > ExternalSorter.fanIn) }
        for _ in 0..<2 {
            // Read twice: a second pass merges the runs again.
            let sorted = try sorter.sorted()
            var out: [[UInt8]] = []
            while let record = try sorted.next({ Array($0) }) { out.append(record) }
            // Compared whole, not shown whole: a failure would print 5,000 records.
            let same = out == records.sorted { $0.lexicographicallyPrecedes($1) }
            #expect(same, "the records came out of order or changed")
        }
    }
}
