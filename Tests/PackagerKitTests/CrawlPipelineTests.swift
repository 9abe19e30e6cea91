import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Bodies hashed and compressed while the crawl goes on (`BodyPipeline`), and the frontier's shortcut for URLs a
/// page names again.
@Suite("crawl: compressing while fetching, and URLs met again")
struct CrawlPipelineTests {
    /// A site with a large page (received into a spool file), a large picture (stored, so its spool file stays), small
    /// pages and a style sheet, and a URL first met as a link the scope leaves out, then as a requisite it admits.
    static func serve(_ origin: Origin) {
        let html = "text/html; charset=utf-8"
        let big = (0..<6000).map { "<p class=\"para\">Paragraph \($0) of a long page, <a href=\"/pages/two.html\">again</a></p>\n" }.joined()
        origin.set(
            "/",
            .text(
                """
                <html><head><link rel="stylesheet" href="/site.css"></head><body>
                <a href="/img/pic.png">the picture on its own</a> <a href="/pages/two.html">two</a> <a href="/pages/big.html">big</a>
                <img src="/img/photo.png"></body></html>
                """, type: html))
        origin.set("/pages/two.html", .text("<html><body><img src=\"/img/pic.png\"><a href=\"/\">home</a></body></html>", type: html))
        origin.set("/pages/big.html", .text("<html><body>" + big + "</body></html>", type: html))
        origin.set("/site.css", .text("body { background: url(/img/pic.png) } " + String(repeating: ".x { color: red }\n", count: 200), type: "text/css"))
        origin.set("/img/pic.png", Origin.Resource(headers: [("Content-Type", "image/png")], body: Array(noise(3000, seed: 1))))
        origin.set("/img/photo.png", Origin.Resource(headers: [("Content-Type", "image/png")], body: Array(noise(400_000, seed: 2))))
    }

    static func declaration(_ origin: Origin) -> Declaration {
        var declaration = Declaration()
        declaration.seeds = [origin.base + "/"]
        declaration.respectRobots = false
        // Links are followed only under /pages/: /img/pic.png is left out as a link, and fetched as a requisite.
        declaration.scope.include = ["*/pages/*"]
        return declaration
    }

    static func write(_ entries: [RecordedExchange], session: BuildSession, to path: String) throws -> Data {
        var writer = BundleWriter(options: .init(createdAt: nil, timeClamp: Date(timeIntervalSince1970: 1_000_000_000)), session: session)
        for entry in entries { writer.add(entry) }
        try writer.write(to: path)
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    @Test("bodies compressed while crawling: every one prepared, received bytes given back, spool files of deflated bodies gone, the same bundle byte for byte")
    func compressesWhileCrawling() async throws {
        try await withOrigin { origin in
            Self.serve(origin)
            let folder = try TemporaryFolder()
            let declaration = Self.declaration(origin)

            let total = 64 << 20
            let memory = MemoryBudget(total: total, perBody: 256 << 10)
            let kept = MemoryBudget(total: 1 << 20, perBody: .max)
            let session = BuildSession(scratch: try ScratchFolder(in: folder.path), received: memory, prepared: kept)
            defer { session.remove() }
            let crawl = try await Crawler(declaration: declaration, session: session, progress: nil).run()
            let crawled = try crawl.entries()
            #expect(crawl.failures.isEmpty, "\(crawl.failures)")
            #expect(crawled.count == 6)
            // Every body was prepared during the crawl, and no entry holds its body as received any more.
            #expect(crawled.allSatisfy { $0.body == nil && $0.prepared != nil }, "\(crawled.map { ($0.url, $0.body != nil) })")
            let big = try #require(crawled.first { $0.url.hasSuffix("/pages/big.html") }?.prepared)
            #expect(big.compression == .deflate && big.size > 256 << 10)
            // The received bodies' bytes went back to the crawl's budget; what is held in memory is the compressed streams
            // and the small stored picture, counted against the budget for kept bodies.
            let held = crawled.compactMap(\.prepared).reduce(0) { sum, body in
                if case .memory(let bytes) = body.storage { return sum + bytes.count }
                return sum
            }
            #expect(memory.available == total, "budget left \(memory.available) of \(total)")
            #expect(kept.available == (1 << 20) - held && held > 0 && held < 100_000, "kept budget left \(kept.available), held \(held)")
            // Spool files: only the stored photo's is left (the bundle is written from it); the big page's was deleted.
            let spooled = try FileManager.default.contentsOfDirectory(atPath: session.scratch.path).filter { !$0.hasPrefix("overflow") }
            let photo = try #require(crawled.first { $0.url.hasSuffix("/img/photo.png") }?.prepared)
            guard case .source(.file(let photoPath)) = photo.storage else {
                Issue.record("the photo is not read from its spool file: \(photo.storage)")
                return
            }
            #expect(spooled == [(photoPath as NSString).lastPathComponent], "\(spooled)")

            // The same crawl, compressed by the writer afterwards: the same bundle.
            let plainSession = BuildSession(
                scratch: try ScratchFolder(in: folder.path), received: MemoryBudget(total: total, perBody: 256 << 10), prepared: nil)
            defer { plainSession.remove() }
            let plain = try await Crawler(declaration: declaration, session: plainSession, progress: nil).run()
            let plainEntries = try plain.entries()
            #expect(plainEntries.allSatisfy { $0.prepared == nil })
            let pipelined = try Self.write(crawled, session: session, to: folder.path + "/pipelined.zip")
            let after = try Self.write(plainEntries, session: plainSession, to: folder.path + "/after.zip")
            // Compared as one Bool: a failed == between two bundles of 400 KB made the test library diff them for 15 minutes.
            #expect(pipelined.elementsEqual(after), "\(pipelined.count) bytes against \(after.count)")

            // With no memory to keep them in, the compressed streams go to the overflow file: the same bundle again.
            let spilledSession = BuildSession(
                scratch: try ScratchFolder(in: folder.path), received: MemoryBudget(total: total, perBody: 256 << 10),
                prepared: MemoryBudget(total: 0, perBody: .max))
            defer { spilledSession.remove() }
            let spilledCrawl = try await Crawler(declaration: declaration, session: spilledSession, progress: nil).run()
            let spilledEntries = try spilledCrawl.entries()
            // A stored body received into memory goes there too (held as its source, it stayed in memory to the end);
            // one received into a spool file is read from it.
            for entry in spilledEntries {
                switch entry.prepared?.storage {
                case .spool: break
                case .source(.file): #expect(entry.prepared?.compression == .stored, "\(entry.url)")
                default: Issue.record("\(entry.url) is held in memory with no budget for it")
                }
            }
            #expect(spilledEntries.contains { if case .spool = $0.prepared?.storage { $0.prepared?.compression == .stored } else { false } })
            let spilled = try Self.write(spilledEntries, session: spilledSession, to: folder.path + "/spilled.zip")
            #expect(spilled.elementsEqual(after), "\(spilled.count) bytes against \(after.count)")
            let bundle = try MountedBundle(path: folder.path + "/pipelined.zip")
            #expect(try bundle.body(of: try #require(bundle.entry(for: origin.base + "/pages/big.html"))).count == big.size)
            #expect(try bundle.body(of: try #require(bundle.entry(for: origin.base + "/img/photo.png"))).count == 400_000)
        }
    }

    @Test("a URL left out as a link is still fetched when another page names it as a requisite; repeats are not counted again")
    func linkThenRequisite() async throws {
        try await withOrigin { origin in
            Self.serve(origin)
            let folder = try TemporaryFolder()
            let session = BuildSession(scratch: try ScratchFolder(in: folder.path), received: MemoryBudget(total: 64 << 20, perBody: 256 << 10), prepared: nil)
            defer { session.remove() }
            let crawl = try await Crawler(declaration: Self.declaration(origin), session: session, progress: nil).run()
            let crawled = try crawl.entries()
            let keys = Set(crawled.map(\.url))
            #expect(keys.contains(origin.base + "/img/pic.png"), "\(keys.sorted())")
            #expect(origin.count("/img/pic.png") == 1)
            // Named as a link once, on the home page: counted once, although the big page names two.html 6,000 times.
            #expect(crawl.skipped == ["matches no scope.include pattern": 1], "\(crawl.skipped)")
            #expect(origin.count("/pages/two.html") == 1)
        }
    }
}

/// A count shared with the pipeline's worker threads.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

@Suite("the body pipeline")
struct BodyPipelineTests {
    @Test("a prepared body is let go: the queue does not hold it, and its bytes are back in the budget")
    func releasesBodies() async throws {
        let folder = try TemporaryFolder()
        let scratch = try ScratchFolder(in: folder.path)
        defer { scratch.remove() }
        let memory = MemoryBudget(total: 1 << 20, perBody: 256 << 10)
        let delivered = Counter()
        let pipeline = BodyPipeline(
            level: 6, memory: memory, kept: MemoryBudget(total: 1 << 20, perBody: .max), overflow: OverflowFile(in: scratch)
        ) { _, _ in delivered.add() }
        for i in 0..<50 {
            let body = Data(String(repeating: "page \(i) ", count: 500).utf8)
            #expect(memory.take(body.count))
            pipeline.submit(
                .init(
                    index: i, entry: .init(url: "https://a.example/\(i)", headers: [("content-type", "text/html")], body: .data(body)), ownsFile: false,
                    budgeted: true))
        }
        await pipeline.finish()
        #expect(delivered.value == 50)
        #expect(pipeline.held == 0)
        #expect(memory.available == 1 << 20)
    }
}

@Suite("a crawl's entries kept in a scratch file")
struct EntryStoreTests {
    @Test("every field reads back exactly, from the file and from what is not yet written, with bodies and prepared bodies in memory")
    func roundTrip() throws {
        let folder = try TemporaryFolder()
        let store = EntryStore(path: folder.path + "/entries")
        var written: [RecordedExchange] = []
        for i in 0..<2000 {
            let entry = RecordedExchange(
                url: "https://docs.example/päge-\(i).html?q=\(i)", status: [200, 301, 404, 204][i % 4],
                kind: [EntryKind.recorded, .substituted, .blocked][i % 3],
                headers: (0..<(i % 5)).map { ("x-header-\($0)", "välue \(i) \($0) " + String(repeating: "é", count: i % 40)) },
                body: i % 2 == 0 ? .data(Data("body \(i)".utf8)) : nil, fetchedAt: i % 7 == 0 ? nil : Date(timeIntervalSince1970: 1_767_323_045.25 + Double(i)),
                originDate: i % 3 == 0 ? Date(timeIntervalSince1970: -86_400.5) : nil, source: i % 6 == 0 ? "local/file-\(i).svg" : nil,
                synthesizeETag: i % 4 == 1, lastModifiedSynthesized: i % 5 == 2)
            #expect(store.append(entry) == i)
            written.append(entry)
        }
        store.setPrepared(
            4,
            PreparedBody(
                digest: BodyDigest(bytes: Array(repeating: UInt8(7), count: 32)), crc32: 1, storedCRC32: 2, size: 3, storedSize: 4, compression: .deflate,
                storage: .memory([1]))
        )
        // Part of the records went to the file (64 KiB at a time), the rest are still in memory.
        let onDisk = (try? FileManager.default.attributesOfItem(atPath: folder.path + "/entries")[.size] as? Int) ?? 0
        #expect(onDisk > 0)
        #expect(store.count == written.count)
        for (i, expected) in written.enumerated() {
            let read = try store.entry(at: i)
            #expect(read.url == expected.url && read.status == expected.status && read.kind == expected.kind, "\(i)")
            #expect(read.headers.map { [$0.name, $0.value] } == expected.headers.map { [$0.name, $0.value] }, "\(i)")
            #expect(read.fetchedAt == expected.fetchedAt && read.originDate == expected.originDate && read.source == expected.source, "\(i)")
            #expect(read.synthesizeETag == expected.synthesizeETag && read.lastModifiedSynthesized == expected.lastModifiedSynthesized, "\(i)")
            if i == 4 {
                #expect(read.body == nil && read.prepared?.storedSize == 4)
            } else if case .data(let data) = read.body, case .data(let sent) = expected.body {
                #expect(data == sent && read.prepared == nil)
            } else {
                #expect(read.body == nil && expected.body == nil, "\(i)")
            }
        }
        // A damaged record is refused, not misread.
        #expect(EntryStore.decode(Array(EntryStore.encode(written[3]).dropLast())) == nil)
    }
}
