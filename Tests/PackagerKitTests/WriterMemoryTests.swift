import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// What the writer no longer holds per entry: the ZIP central directory goes to the overflow file as it grows, keys
/// are kept as bytes, and a body's bytes are let go once written.
@Suite("the writer's memory per entry")
struct WriterMemoryTests {
    @Test("a central directory spilled to the overflow file is the same bytes as one kept in memory, and unzip and bsdtar read it")
    func spilledCentralDirectory() throws {
        let folder = try TemporaryFolder()
        let scratch = try ScratchFolder(in: folder.path)
        defer { scratch.remove() }
        func write(_ name: String, spill: OverflowFile?) throws -> [UInt8] {
            let path = folder.path + "/" + name
            let output = try AtomicOutput(destination: path)
            // 300 bytes at a time: the 500 records below go out in many parts.
            let zip = ZipWriter(output: output, spill: spill, spillSize: 300)
            for i in 0..<500 {
                let data = Array("entry \(i)\n".utf8)
                try zip.addEntry(name: "e/\(i).txt", method: 0, crc32: CRC32.checksum(data), size: UInt64(data.count), data: data)
            }
            try zip.finish(comment: Array("comment".utf8))
            try output.commit()
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        let overflow = OverflowFile(in: scratch)
        let spilled = try write("spilled.zip", spill: overflow)
        let kept = try write("kept.zip", spill: nil)
        #expect(spilled == kept)
        // The overflow file did hold the records.
        var probe = [UInt8](repeating: 0, count: 4)
        try probe.withUnsafeMutableBytes { try overflow.read(into: $0, at: 0) }
        #expect(probe == [0x50, 0x4B, 0x01, 0x02])
        #expect(try run("unzip", ["-tq", folder.path + "/spilled.zip"]).status == 0)
        let listing = try run("bsdtar", ["-tf", folder.path + "/spilled.zip"])
        #expect(listing.status == 0 && listing.output.split(separator: "\n").count == 500)
        #expect(try run("unzip", ["-p", folder.path + "/spilled.zip", "e/499.txt"]).output == "entry 499\n")
    }

    @Test("bodies of 16 MiB and more are read in chunks: deflated by zlib when their type is worth it, stored when not, the same bytes read back, reproducibly")
    func largeBodiesStreamed() throws {
        let folder = try TemporaryFolder()
        let site = try TemporaryFolder()
        var page = Data()
        let line = Data("<p>Offline and fine, line after line, with a number: ".utf8)
        for i in 0..<400_000 { page += line + Data("\(i)</p>\n".utf8) }
        #expect(page.count >= StreamingBody.threshold)
        try site.file("big.html", page)
        let noisy = noise(StreamingBody.threshold + 12_345, seed: 9)
        try site.file("big.bin", noisy)
        for name in ["a.zip", "b.zip"] {
            _ = try Packer(options: .init(baseURL: "https://example.com/")).pack(source: site.path, output: folder.path + "/" + name)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/a.zip")) == Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.zip")))
        let bundle = try MountedBundle(path: folder.path + "/a.zip", options: .init(verification: .sha256))
        let html = try #require(bundle.entry(for: "https://example.com/big.html"))
        #expect(html.body?.compression == .deflate && (html.body?.storedSize ?? .max) < UInt64(page.count / 4))
        #expect(try bundle.body(of: html) == page)
        let bin = try #require(bundle.entry(for: "https://example.com/big.bin"))
        #expect(bin.body?.compression == .stored)
        #expect(try bundle.body(of: bin) == noisy)
        #expect(try run("unzip", ["-tq", folder.path + "/a.zip"]).status == 0)
        #expect(Checker.check(path: folder.path + "/a.zip").isValid)
    }

    @Test("a bundle of many bodies, some the same: written whole, each distinct body once, every entry answers its own bytes")
    func manyBodies() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), memoryBudget: 64 << 10, timeClamp: nil))
        // 30,000 entries: more central directory than the 1 MiB kept in memory; every third body is one shared by others,
        // half of them kept in memory within the small budget and the rest spooled.
        let count = 30_000
        func body(_ i: Int) -> String { i % 3 == 0 ? "shared \(i % 7)" : "<p>page \(i)</p>" + String(repeating: "x", count: i % 50) }
        for i in 0..<count {
            writer.add(
                .init(
                    url: "https://docs.example/p/\(i).html", headers: [("content-type", i % 2 == 0 ? "text/html" : "image/png")],
                    body: .data(Data(body(i).utf8))))
        }
        let path = folder.path + "/many.zip"
        let summary = try writer.write(to: path)
        let distinct = Set((0..<count).map(body)).count
        #expect(summary.entries == count && summary.bodies == distinct && summary.deduplicated == count - distinct)
        #expect(try run("unzip", ["-tq", path]).status == 0)
        let bundle = try MountedBundle(path: path)
        for i in stride(from: 0, to: count, by: 997) {
            let entry = try #require(bundle.entry(for: "https://docs.example/p/\(i).html"))
            #expect(String(decoding: try bundle.body(of: entry), as: UTF8.self) == body(i), "\(i)")
        }
        #expect(Checker.check(path: path).issues.isEmpty)
    }

    @Test(
        "tables in scratch files: the keys sorted in runs, the bodies by digest, the prepared bodies, the index's parts: the same bundle, byte for byte, as one written in memory; a key answered twice is still refused"
    )
    func tablesInScratchFiles() throws {
        let folder = try TemporaryFolder()
        // Keys that share long prefixes and differ in length (a shorter one before its extension), bodies shared,
        // entries without a body, a key with request qualifiers; added out of key order.
        func writer(limit: Int?) -> BundleWriter {
            var options = BundleWriter.Options(createdAt: Date(timeIntervalSince1970: 1_767_323_045), memoryBudget: 16 << 10, timeClamp: nil)
            if let limit { options.tableMemoryLimit = limit }
            var writer = BundleWriter(options: options)
            for i in (0..<6_000).reversed() {
                let url =
                    "https://docs.example/" + (i % 4 == 0 ? "a/\(i)" : "a/\(i)/" + String(repeating: "deep/", count: i % 9)) + (i % 11 == 0 ? "?q=\(i)" : "")
                let body: BundleWriter.BodySource? = i % 13 == 0 ? nil : .data(Data((i % 5 == 0 ? "shared \(i % 3)" : "<p>page \(i)</p>").utf8))
                var entry = RecordedExchange(
                    url: url, status: body == nil ? 204 : 200, headers: [("content-type", "text/html"), ("x-n", "\(i % 40)")], body: body)
                if i % 17 == 0 {
                    entry.request = try? Recorder.request(
                        method: "POST", body: Data("{\"n\":\(i)}".utf8), sent: [("content-type", "application/json")], vary: [], responseHeaders: [],
                        secret: { _ in false }, scan: SecretScan([])
                    ).get()
                }
                writer.add(entry)
            }
            return writer
        }
        let inMemory = try writer(limit: nil).write(to: folder.path + "/memory.zip")
        // 512 bytes: every table goes to a file, the keys in about 700 runs.
        let spilled = try writer(limit: 512).write(to: folder.path + "/spilled.zip")
        #expect(inMemory == spilled)
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/memory.zip")) == Data(contentsOf: URL(fileURLWithPath: folder.path + "/spilled.zip")))
        #expect(spilled.deduplicated > 0 && spilled.entries == 6_000)
        #expect(try run("unzip", ["-tq", folder.path + "/spilled.zip"]).status == 0)
        #expect(Checker.check(path: folder.path + "/spilled.zip").issues.isEmpty)

        var twice = writer(limit: 512)
        twice.add(.init(url: "https://docs.example/a/2000", body: .data(Data("again".utf8))))
        #expect {
            try twice.write(to: folder.path + "/twice.zip")
        } throws: { error in
            "\(error)".contains("two entries answer the same request key https://docs.example/a/2000")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/twice.zip"))
    }

    @Test("an entry whose status allows no body, given one, is refused by its key")
    func bodyWhereNoneIsAllowed() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        writer.add(.init(url: "https://docs.example/a", body: .data(Data("a".utf8))))
        writer.add(.init(url: "https://docs.example/empty", status: 204, body: .data(Data("not empty".utf8))))
        #expect {
            try writer.write(to: folder.path + "/refused.zip")
        } throws: { error in
            "\(error)".contains("status 204 cannot have a body") && "\(error)".contains("https://docs.example/empty")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/refused.zip"))
    }

    @Test("a writer whose entries come from a crawl's store writes them once; a second write is refused, not a bundle without bodies")
    func storeWrittenOnce() throws {
        let folder = try TemporaryFolder()
        let store = EntryStore(path: folder.path + "/entries")
        for i in 0..<3 {
            _ = store.append(.init(url: "https://docs.example/\(i)", headers: [("content-type", "text/plain")], body: .data(Data("body \(i)".utf8))))
        }
        let session = BuildSession(scratch: try ScratchFolder(in: folder.path), received: MemoryBudget(total: 64 << 20, perBody: .max), prepared: nil)
        defer { session.remove() }
        let writer = BundleWriter(options: .init(), session: session, store: store)
        let summary = try writer.write(to: folder.path + "/first.zip")
        #expect(summary.entries == 3 && summary.bodies == 3)
        #expect {
            try writer.write(to: folder.path + "/second.zip")
        } throws: { error in
            "\(error)".contains("written to one bundle only")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/second.zip"))
    }
}
