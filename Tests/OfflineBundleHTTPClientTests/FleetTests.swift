import Foundation
import OfflineBundle
import OfflineBundleHTTPClient
import OfflineBundleServing
import PackagerKit
import Synchronization
import TestSupport
import Testing

/// A fleet taking the next release: the cache folder shared across releases (a body an earlier release fetched is
/// copied, never fetched again).
@Suite("fleets: the next release by what changed", .serialized)
struct FleetTests {
    /// A release of `count` pages (1–20 KB each) and a 300 KB body of noise; the pages in `changed` say `release`, the
    /// others are the same in every release.
    static func writeRelease(to path: String, count: Int = 200, release: Int, changed: Set<Int>) throws {
        var writer = BundleWriter()
        for i in 0..<count {
            let tag = changed.contains(i) ? "release \(release)" : "every release"
            let text = String(repeating: "<p>page \(i), \(tag): the quick brown fox.</p>\n", count: 20 + (i * 7) % 400)
            writer.add(.init(url: "https://docs.example/p\(i).html", headers: [("content-type", "text/html")], body: .data(Data(text.utf8))))
        }
        writer.add(.init(url: "https://docs.example/noise.bin", headers: [("content-type", "application/octet-stream")], body: .data(noise(300_000, seed: 3))))
        _ = try writer.write(to: path)
    }

    /// The stored bytes (local header and body) of the entries of `local` whose body `other` lacks.
    static func changedBytes(_ local: MountedBundle, since other: MountedBundle) -> UInt64 {
        let held = Set(other.entries.compactMap { $0.body.map { other.bodyRecord(at: $0.index).sha256 } })
        var total: UInt64 = 0
        var seen = Set<[UInt8]>()
        for entry in local.entries {
            guard let body = entry.body else { continue }
            let record = local.bodyRecord(at: body.index)
            guard !held.contains(record.sha256), seen.insert(record.sha256).inserted else { continue }
            total += record.dataOffset + record.storedSize - record.localHeaderOffset
        }
        return total
    }

    @Test("the next release at the same URL fetches its index and the bodies that changed; the rest is copied from the last release's cache, checked")
    func nextReleaseFetchesWhatChanged() async throws {
        let folder = try TemporaryFolder()
        try Self.writeRelease(to: folder.path + "/r0.zip", release: 0, changed: [])
        try Self.writeRelease(to: folder.path + "/r1.zip", release: 1, changed: [3, 50, 120])
        let served = try await RemoteRelease.start(in: folder)
        defer { served.stop() }
        let r0 = try served.mount(folder.path + "/r0.zip")
        try await offPool { try r0.fetchWhole() }
        // The same URL now names R1: mounted anew (what a reloader does once it sees the object replaced).
        let r1 = try served.mount(folder.path + "/r1.zip")
        let local1 = try MountedBundle(path: folder.path + "/r1.zip")
        let mounted = try #require(r1.remoteTraffic)
        try await offPool { try RemoteBundleTests.expectSameBodies(r1, local1) }
        let after = try #require(r1.remoteTraffic)
        let changed = Self.changedBytes(local1, since: try MountedBundle(path: folder.path + "/r0.zip"))
        let reads = after.bytes - mounted.bytes
        #expect(changed > 0 && changed < 100_000)
        // Each changed body fetched alone (with what lies close to it that no release held, none here), nothing else.
        print(
            "R1: every body read fetched \(reads) bytes (\(after.requests - mounted.requests) requests); \(changed) bytes changed; \(after.bytes) in all with the mount"
        )
        #expect(reads <= changed, "reading every body of R1 fetched \(reads) bytes; \(changed) changed")
        #expect(after.requests - mounted.requests <= 3, "\(after.requests - mounted.requests) requests for 3 changed pages")
        let index = try #require(local1.metadata["index.bin"]).compressedSize
        #expect(after.bytes <= index + 128 << 10 + changed, "R1 cost \(after.bytes) bytes in all")
        // Back to R0: its cache holds all of it.
        let back = try served.mount(folder.path + "/r0.zip")
        let local0 = try MountedBundle(path: folder.path + "/r0.zip")
        try await offPool { try RemoteBundleTests.expectSameBodies(back, local0) }
        #expect((back.remoteTraffic?.bytes ?? .max) <= index + 128 << 10, "a rollback fetched \(back.remoteTraffic?.bytes ?? 0) bytes")
    }

    @Test("a body damaged in the last release's cache is not lent: it is forgotten there and fetched, and both releases read right")
    func damagedDonorIsNotLent() async throws {
        let folder = try TemporaryFolder()
        try Self.writeRelease(to: folder.path + "/r0.zip", release: 0, changed: [])
        try Self.writeRelease(to: folder.path + "/r1.zip", release: 1, changed: [3])
        let served = try await RemoteRelease.start(in: folder)
        defer { served.stop() }
        let r0 = try served.mount(folder.path + "/r0.zip")
        try await offPool { try r0.fetchWhole() }
        let local0 = try MountedBundle(path: folder.path + "/r0.zip")
        let key = "https://docs.example/p9.html"
        let record = local0.bodyRecord(at: try #require(local0.entry(forKey: key)?.body).index)
        let cache = folder.path + "/remote-cache"
        let data = try #require(try FileManager.default.contentsOfDirectory(atPath: cache).first { $0.hasPrefix(r0.digest) && $0.hasSuffix(".data") })
        try flipByte(at: Int(record.dataOffset) + 5, in: cache + "/" + data)
        let r1 = try served.mount(folder.path + "/r1.zip")
        let mounted = try #require(r1.remoteTraffic)
        let page = try await offPool { try r1.body(of: try #require(r1.entry(forKey: key))) }
        #expect(page == (try local0.body(of: try #require(local0.entry(forKey: key)))))
        // Fetched (the damaged copy was refused), not lent.
        #expect((r1.remoteTraffic?.requests ?? 0) == mounted.requests + 1)
        // R0 mounted again fetches the body it no longer trusts, and reads right.
        let back = try served.mount(folder.path + "/r0.zip")
        try await offPool { try RemoteBundleTests.expectSameBodies(back, local0) }
    }

    @Test("a stalled server holds no read past the read's deadline: serve answers 503 with Retry-After at once, and the fetch goes on for the cache")
    func readDeadline() async throws {
        let folder = try TemporaryFolder()
        try RemoteBundleTests.writeRelease(to: folder.path + "/r.zip", count: 300, large: false)
        let server = RemoteBundleFaultTests.RangeServer(bytes: Array(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/r.zip"))))
        let stall = Mutex<Double>(0)
        try await withOrigin { origin in
            origin.route("/r.zip") { request in
                var answer = server.answer(request)
                answer.delay = stall.withLock { $0 }
                return answer
            }
            // 30 s a request and 3 retries: without the deadline, a stalled server would hold a read for 2 minutes.
            var remote = try RemoteBundleTests.remote(cache: nil, timeout: 30, retries: 3)
            remote.readDeadline = 1
            let bundle = try await MountedBundle.mount(url: origin.base + "/r.zip", remote: remote)
            let serving = try await OfflineBundleChannelServer.start(
                handle: LoaderHandle(OfflineLoader(bundles: [bundle])), routes: [.init(origin: "https://docs.example")])
            try await afterwards({ await serving.stop() }) {
                // A page the mount's requests did not bring.
                let entry = try #require(bundle.entries.first { $0.key.hasSuffix(".html") && !bundle.bodyIsLocal($0.body?.index ?? 0) })
                let key = entry.key
                let path = String(key.dropFirst("https://docs.example".count))
                stall.withLock { $0 = 12 }
                let started = Date()
                let got = try await curlExchange("http://127.0.0.1:\(serving.port)\(path)", in: folder)
                let waited = Date().timeIntervalSince(started)
                #expect(got.status == 503 && got.header("retry-after") != nil, "\(got.status)")
                // 1 s expected; the stall is 12 s.
                #expect(waited < 8, "the read waited \(waited) s")
                let error = await #expect(throws: BundleError.self) { try await offPool { try bundle.body(of: entry) } }
                #expect(error?.message.contains("deadline") == true && error?.message.contains(origin.base + "/r.zip") == true, "\(String(describing: error))")
                // The fetch went on: once the server answers, the body is held, and read with no request more.
                let deadline = Date().addingTimeInterval(60)
                while !bundle.bodyIsLocal(try #require(entry.body).index) && Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
                stall.withLock { $0 = 0 }
                let requests = try #require(bundle.remoteTraffic).requests
                let local = try MountedBundle(path: folder.path + "/r.zip")
                #expect(try await offPool { try bundle.body(of: entry) } == (try local.body(of: try #require(local.entry(forKey: key)))))
                #expect(bundle.remoteTraffic?.requests == requests)
                let again = try await curlExchange("http://127.0.0.1:\(serving.port)\(path)", in: folder)
                #expect(again.status == 200)
            }
        }
    }
}
