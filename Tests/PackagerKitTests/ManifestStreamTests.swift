import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// The writer makes manifest.json entry by entry; from 1 MiB on it deflates it as a stream into the overflow file.
@Suite("manifest.json written as a stream")
struct ManifestStreamTests {
    @Test("a manifest over 1 MiB: streamed, read back whole through its digest, the same JSON as one-piece encoding, and unzip checks it")
    func largeManifest() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), timeClamp: nil))
        let count = 6000
        for i in 0..<count {
            writer.add(
                .init(
                    url: "https://docs.example/section-\(i / 100)/page-\(i).html", status: 200,
                    headers: [
                        ("content-type", "text/html; charset=utf-8"), ("etag", "\"page-\(i)-0123456789abcdef\""),
                        ("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT"), ("cache-control", "public, max-age=3600, stale-while-revalidate=60"),
                    ],
                    body: .data(Data("<p>page \(i)</p>".utf8)), fetchedAt: Date(timeIntervalSince1970: 1_767_323_045)))
        }
        let path = folder.path + "/large.zip"
        try writer.write(to: path)

        let bundle = try MountedBundle(path: path)
        let manifest = try bundle.manifest()
        #expect(manifest.entries.count == count)
        // What was written in pieces is what one-piece encoding of the same manifest gives.
        let listing = try run("unzip", ["-v", path])
        let line = try #require(listing.output.split(separator: "\n").first { $0.hasSuffix("manifest.json") })
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        let size = try #require(Int(fields[0]))
        #expect(fields[1] == "Defl:N" && size > ManifestSink.memoryLimit, "\(line)")
        let json = try run("unzip", ["-p", path, "manifest.json"])
        #expect(Array(json.output.utf8) == ManifestWriter.encode(manifest))
        #expect(try run("unzip", ["-tq", path]).status == 0)
        #expect(try run("bsdtar", ["-tf", path]).output.contains("manifest.json"))
    }
}

/// Tools that go through a large bundle read its manifest an entry at a time.
@Suite("manifest.json read as a stream")
struct ManifestEntriesTests {
    @Test("entry by entry, the manifest's entries are those decoded whole: values with braces, brackets, quotes and escapes, requests with bodies")
    func sameAsWhole() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), timeClamp: nil))
        for i in 0..<3000 {
            var entry = RecordedExchange(
                url: "https://docs.example/p/\(i)?q=%7B\(i)%5D", status: i % 50 == 0 ? 204 : 200,
                headers: [("content-type", "text/html"), ("x-odd", #"}]{["\" \\ "entries": [ \#(i)"#)],
                body: i % 50 == 0 ? nil : .data(Data("<p>{\(i)}</p>".utf8)))
            if i % 7 == 0 {
                entry.request = try Recorder.request(
                    method: "POST", body: Data(#"{"n": [\#(i)], "s": "]}"}"#.utf8), sent: [("content-type", "application/json")], vary: [],
                    responseHeaders: [], secret: { _ in false }, scan: SecretScan([])
                ).get()
            }
            writer.add(entry)
        }
        let path = folder.path + "/odd.zip"
        try writer.write(to: path)
        let bundle = try MountedBundle(path: path)
        let whole = try bundle.manifest().entries
        let stream = try bundle.manifestEntries()
        var streamed: [ManifestEntry] = []
        while let entry = try stream.next() { streamed.append(entry) }
        #expect(streamed.count == 3000)
        #expect(streamed.map(\.key) == whole.map(\.key))
        // Every field, through their encoding: the same entries.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        #expect(try encoder.encode(streamed) == encoder.encode(whole))

        // What the exports read: each key's request, asked in the index's order, with keys the manifest lacks between;
        // the elements without a request are not decoded whole.
        let requests = try bundle.manifestEntries()
        var asked = 0
        for position in 0..<bundle.entryCount {
            let key = bundle.key(ofEntryAt: position)
            let request = try requests.request(forKey: key)
            let expected = try #require(whole.first { $0.key == key })
            #expect(try encoder.encode(request) == encoder.encode(expected.request), "\(key)")
            if request != nil { asked += 1 }
            // A key between this one and the next, which the manifest does not hold.
            if position % 100 == 0 { #expect(try requests.request(forKey: key + "!absent") == nil) }
        }
        #expect(asked == 3000 / 7 + 1)

        // What a refresh reads: each entry it carries over, every other key, absent keys between.
        let carried = try bundle.manifestEntries()
        for position in stride(from: 0, to: bundle.entryCount, by: 2) {
            let key = bundle.key(ofEntryAt: position)
            let entry = try #require(try carried.entry(forKey: key))
            #expect(try encoder.encode(entry) == encoder.encode(whole.first { $0.key == key }!), "\(key)")
            #expect(try carried.entry(forKey: key + "!absent") == nil)
        }
        // A key asked after a greater one is refused, not answered nil; the two keyed readers share one place, so the
        // last key's request is found after its entry was.
        #expect(throws: BundleError.self) { try carried.entry(forKey: bundle.key(ofEntryAt: 0)) }
        let last = bundle.key(ofEntryAt: bundle.entryCount - 1)
        #expect(try encoder.encode(carried.entry(forKey: last)) == encoder.encode(whole.last))
        #expect(try encoder.encode(carried.request(forKey: last)) == encoder.encode(whole.last?.request))
    }

    @Test("verify's declared entries: each entry with a request or volatile fields, with them, and no other")
    func declaredEntries() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), timeClamp: nil))
        var expected: [String: (method: String?, volatile: [String]?, stable: String?)] = [:]
        for i in 0..<500 {
            let url = "https://api.example/v/\(i)"
            var entry = RecordedExchange(
                url: url, headers: [("content-type", "application/json"), ("x-note", #"\"request\": \"volatile\""#)],
                body: .data(Data("{\"n\": \(i)}".utf8)))
            switch i % 4 {
            case 0:
                entry.request = RecordedRequest(method: "POST", headers: [.init(name: "content-type", value: "application/json")], body: Data("{}".utf8))
                expected[url] = ("POST", nil, nil)
            case 1:
                entry.volatile = ["/query_ms"]
                entry.stableSHA256 = String(repeating: "ab", count: 32)
                expected[url] = (nil, ["/query_ms"], String(repeating: "ab", count: 32))
            default: break
            }
            writer.add(entry)
        }
        try writer.write(to: folder.path + "/declared.zip")
        // By URL (a POST's key also names its method and body), from the position each is kept under.
        let bundle = try MountedBundle(path: folder.path + "/declared.zip")
        let table = Verifier.declaredEntries(of: bundle)
        let declared = Dictionary(
            uniqueKeysWithValues: table.positions.map { (String(RequestQualifiers.split(key: bundle.key(ofEntryAt: $0)).url), table[$0]!) })
        #expect(Set(declared.keys) == Set(expected.keys))
        for (key, want) in expected {
            #expect(declared[key]?.request?.method == want.method, "\(key)")
            #expect(declared[key]?.volatile == want.volatile && declared[key]?.stableSha256 == want.stable, "\(key)")
        }
    }
}
