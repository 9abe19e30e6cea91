import Foundation
import TestSupport
import Testing

@testable import OfflineBundle

/// `index.bin` built entry by entry and body by body, checked against what it announced, and read back.
@Suite("the index accumulator")
struct IndexAccumulatorTests {
    static func digest(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: 32) }

    static func addBody(_ index: inout IndexAccumulator, _ byte: UInt8, at offset: UInt64) throws {
        // Even digests are stored (their size is their stored size), odd ones deflated.
        let stored = byte % 2 == 0
        try index.addBody(
            sha256: digest(byte), localHeaderOffset: offset, dataOffset: offset + 48, storedSize: 10 + UInt64(byte),
            size: stored ? 10 + UInt64(byte) : 20 + UInt64(byte), crc32: UInt32(byte), storedCRC32: stored ? UInt32(byte) : UInt32(byte) + 1,
            compression: stored ? .stored : .deflate)
    }

    @Test(
        "what it was given reads back through the reader: bodies, keys, header blocks shared between entries; in memory, and kept in files",
        arguments: [false, true])
    func readsBack(spilled: Bool) throws {
        let folder = try TemporaryFolder()
        var index = try IndexAccumulator(entryCount: 3, bodyCount: 2, spillFolder: spilled ? folder.path : nil, memoryLimit: 0)
        try Self.addBody(&index, 1, at: 0)
        try Self.addBody(&index, 2, at: 100)
        let (sha256, size, storedSize, compression) = try index.body(at: 1)
        #expect(Array(sha256) == Self.digest(2) && size == 12 && storedSize == 12 && compression == .stored)
        let headers = [(name: "content-type", value: "text/html")]
        try index.add(key: "https://a.example/1", status: 200, kind: .recorded, flags: 0, headers: headers, body: 0, fetchedAt: 5, originDate: nil)
        try index.add(key: "https://a.example/2", status: 200, kind: .recorded, flags: 0, headers: headers, body: 1, fetchedAt: nil, originDate: 7)
        try index.add(key: "https://a.example/3", status: 404, kind: .recorded, flags: 0, headers: [], body: nil, fetchedAt: nil, originDate: nil)
        let bytes = try index.finish(manifestSHA256: Self.digest(9), rules: BundleRules(), createdAt: nil).joinedBytes()
        let read = try BundleIndex(bytes: bytes, bodyArea: 1 << 20, maxRatio: 1000)
        #expect(read.entryCount == 3 && read.bodyCount == 2 && read.blockCount == 2)
        #expect(read.body(at: 0).sha256 == Self.digest(1) && read.body(at: 1).dataOffset == 148 && read.body(at: 0).storedCRC32 == 2)
        #expect((0..<3).map(read.entryKey) == ["https://a.example/1", "https://a.example/2", "https://a.example/3"])
        #expect(read.entryHeaders(1).map { [$0.name, $0.value] } == [["content-type", "text/html"]])
    }

    @Test("kept in files past a limit, the index is byte for byte the one built in memory: 3,000 entries, repeated and distinct header blocks, bodies")
    func spilledIsTheSame() throws {
        let folder = try TemporaryFolder()
        func build(_ spillFolder: String?) throws -> [UInt8] {
            var index = try IndexAccumulator(entryCount: 3000, bodyCount: 200, spillFolder: spillFolder, memoryLimit: 10_000)
            for b in 0..<200 {
                var digest = [UInt8](repeating: 0, count: 32)
                digest[0] = UInt8(b / 256)
                digest[1] = UInt8(b % 256)
                try index.addBody(
                    sha256: digest, localHeaderOffset: UInt64(b * 100), dataOffset: UInt64(b * 100 + 40), storedSize: 50, size: 70, crc32: 1,
                    storedCRC32: 2, compression: .deflate)
            }
            #expect(try index.body(at: 150).sha256.elementsEqual([0, 150] + [UInt8](repeating: 0, count: 30)))
            for e in 0..<3000 {
                // Every seventh entry has header lines of its own; the rest share a few blocks.
                let headers = [(name: "content-type", value: e % 7 == 0 ? "text/plain; n=\(e)" : "text/html; v=\(e % 5)")]
                try index.add(
                    key: "https://a.example/" + String(format: "%05d", e), status: 200, kind: .recorded, flags: 0, headers: headers,
                    body: e % 3 == 0 ? nil : e % 200, fetchedAt: Int64(e), originDate: nil)
            }
            #expect(index.bodyBytes == 200 * 70 && index.storedBytes == 200 * 50)
            return try index.finish(manifestSHA256: Self.digest(9), rules: BundleRules(), createdAt: nil).joinedBytes()
        }
        let inMemory = try build(nil)
        let inFiles = try build(folder.path)
        #expect(inMemory == inFiles)
        // The header's counts (§4.1): 3,000 entries, 200 bodies, and the distinct header blocks.
        #expect(inFiles.u32(16) == 3000 && inFiles.u32(20) == 200 && inFiles.u32(28) == 5 + 3000 / 7 + 1)
        // The files were unlinked when made: nothing is left in the folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
    }

    @Test("more or fewer entries or bodies than announced, bodies out of digest order, keys out of order: each refused")
    func refusals() throws {
        func refused(_ build: (inout IndexAccumulator) throws -> Void, _ text: String) throws {
            var index = try IndexAccumulator(entryCount: 1, bodyCount: 1)
            #expect {
                try build(&index)
            } throws: { error in
                "\(error)".contains(text)
            }
        }
        let key = "https://a.example/"
        func entry(_ index: inout IndexAccumulator, _ key: String) throws {
            try index.add(key: key, status: 200, kind: .recorded, flags: 0, headers: [], body: 0, fetchedAt: nil, originDate: nil)
        }
        try refused(
            {
                try entry(&$0, key)
                try entry(&$0, key + "b")
            }, "more index entries than announced")
        try refused(
            {
                try Self.addBody(&$0, 1, at: 0)
                try Self.addBody(&$0, 2, at: 100)
            }, "more index bodies than announced")
        // Finished short of what it announced (the accumulator is consumed by finishing, so not through `refused`).
        for short in [true, false] {
            var index = try IndexAccumulator(entryCount: 1, bodyCount: 1)
            if short { try Self.addBody(&index, 1, at: 0) } else { try entry(&index, key) }
            do {
                _ = try index.finish(manifestSHA256: Self.digest(0), rules: BundleRules(), createdAt: nil)
                Issue.record("finished with fewer entries or bodies than announced")
            } catch {
                #expect("\(error)".contains("differ from those announced"))
            }
        }
        var twoBodies = try IndexAccumulator(entryCount: 2, bodyCount: 2)
        try Self.addBody(&twoBodies, 2, at: 0)
        #expect(throws: BundleError.self) { try Self.addBody(&twoBodies, 1, at: 100) }
        var twoEntries = try IndexAccumulator(entryCount: 2, bodyCount: 0)
        try twoEntries.add(key: key + "b", status: 200, kind: .recorded, flags: 0, headers: [], body: nil, fetchedAt: nil, originDate: nil)
        #expect(throws: BundleError.self) {
            try twoEntries.add(key: key + "a", status: 200, kind: .recorded, flags: 0, headers: [], body: nil, fetchedAt: nil, originDate: nil)
        }
        // A body reference beyond the announced bodies.
        var outOfRange = try IndexAccumulator(entryCount: 1, bodyCount: 1)
        #expect(throws: BundleError.self) {
            try outOfRange.add(key: key, status: 200, kind: .recorded, flags: 0, headers: [], body: 1, fetchedAt: nil, originDate: nil)
        }
    }
}
