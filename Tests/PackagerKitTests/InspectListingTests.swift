import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// `packager inspect` lists a bundle a row at a time, its rows read off the index and its JSON written a batch at a time:
/// what it prints must be what the manifest describes and what the whole listing encodes to.
@Suite("inspect: rows from the index, streamed")
struct InspectListingTests {
    /// The WARC test's bundle (pages, a relative redirect, a POST, a credential's answer, a blocked URL), with a
    /// substituted entry, a page whose key is not ASCII, and 600 more pages: past the 256 rows the JSON is written by,
    /// and over many 64 KiB writes, one in five with a media type of two-byte characters (a write that cut one in two
    /// would print U+FFFD).
    static func bundle(at path: String) throws {
        var writer = BundleWriter(options: .init(rules: BundleRules(block: ["*/ads/*"]), createdAt: Date(timeIntervalSince1970: 1_767_225_600)))
        for i in 0..<600 {
            writer.add(
                .init(
                    url: "https://docs.example/p/\(i).html",
                    headers: [
                        ("content-type", i % 5 == 4 ? "text/x-" + String(repeating: "ü", count: 300) : i % 3 == 0 ? "text/html; charset=utf-8" : "text/css")
                    ],
                    body: .data(Data("<p>page \(i % 7)</p>".utf8))))
        }
        writer.add(.init(url: "https://docs.example/caf%C3%A9/", headers: [("content-type", "text/html")], body: .data(Data("é".utf8))))
        writer.add(
            .init(url: "https://cdn.example/lib.js", kind: .substituted, headers: [("content-type", "text/javascript")], body: .data(Data("local".utf8))))
        writer.add(.init(url: "https://docs.example/moved", status: 302, headers: [("location", "../p/1.html?x=1")], body: .data(Data())))
        writer.add(.init(url: "https://docs.example/ads/pixel.gif", status: 204, kind: .blocked))
        var post = RecordedExchange(url: "https://api.example/search", headers: [("content-type", "application/json")], body: .data(Data("{\"hits\":[]}".utf8)))
        post.request = RecordedRequest(method: "POST", headers: [.init(name: "content-type", value: "application/json")], body: Data("{}".utf8))
        writer.add(post)
        try writer.write(to: path)
    }

    @Test("every row read off the index is the manifest's entry: status, kind, media type, sizes, coding, digest and redirect target")
    func rowsAreTheManifests() throws {
        let folder = try TemporaryFolder()
        try Self.bundle(at: folder.path + "/b.zip")
        let view = try Inspector.BundleView(path: folder.path + "/b.zip")
        let bundle = try MountedBundle(path: folder.path + "/b.zip")
        let manifest = try bundle.manifest()
        #expect(view.count == manifest.entries.count && view.count == 605)
        #expect(view.summary.generator == manifest.generator && view.summary.totals == manifest.totals && view.summary.createdAt == manifest.createdAt)
        var redirects = 0
        for (position, described) in manifest.entries.enumerated() {
            let row = view.row(position)
            #expect(row.key == described.key)
            #expect(row.status == described.status && row.kind == described.kind, "\(row.key)")
            #expect(row.mediaType == described.mediaType, "\(row.key)")
            #expect(row.size == described.body?.size && row.storedSize == described.body?.storedSize, "\(row.key)")
            #expect(row.compression == described.body?.compression, "\(row.key)")
            #expect(row.sha256 == (described.body?.sha256 ?? bundle.entry(forKey: described.key)?.body?.sha256), "\(row.key)")
            #expect(row.redirectTo == described.redirectTo, "\(row.key)")
            if row.redirectTo != nil { redirects += 1 }
        }
        #expect(redirects == 1)
        #expect(view.row(manifest.entries.firstIndex { $0.key == "https://docs.example/moved" }!).redirectTo == "https://docs.example/p/1.html?x=1")
    }

    @Test("inspect --json writes, a batch of rows at a time, the bytes of the whole listing encoded; the table lines up on every row")
    func streamedOutput() async throws {
        let folder = try TemporaryFolder()
        try Self.bundle(at: folder.path + "/b.zip")
        try BundleWriter(options: .init()).write(to: folder.path + "/empty.zip")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        for name in ["b.zip", "empty.zip"] {
            let listed = try await run(packagerExecutable, ["inspect", "--json", folder.path + "/" + name])
            #expect(listed.status == 0)
            let whole = String(decoding: try encoder.encode(Inspector.inspectBundle(path: folder.path + "/" + name)), as: UTF8.self) + "\n"
            #expect(listed.output == whole, "\(name): \(listed.output.prefix(2000))")
        }
        let table = try await run(packagerExecutable, ["inspect", folder.path + "/b.zip"])
        #expect(table.status == 0)
        let lines = table.output.split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("STATUS") }), let keyColumn = lines[header].range(of: "KEY")?.lowerBound else {
            Issue.record("no table header: \(table.output)")
            return
        }
        let offset = lines[header].distance(from: lines[header].startIndex, to: keyColumn)
        let rows = lines[(header + 1)...].prefix { !$0.isEmpty }
        #expect(rows.count == 605)
        for row in rows {
            // Every key starts in the KEY column: the widths were measured on every row before any was printed.
            let key = row.dropFirst(offset)
            #expect(key.hasPrefix("https://") && row[row.index(row.startIndex, offsetBy: offset - 1)] == " ", "\(row)")
        }
        #expect(rows.contains { $0.contains("https://docs.example/moved -> https://docs.example/p/1.html?x=1") })
        #expect(table.output.contains("605 entries"))
    }
}
