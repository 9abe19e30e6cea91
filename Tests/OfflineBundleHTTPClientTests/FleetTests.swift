import Crypto
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
            var remote = try RemoteBundleTests.remote(cache: nil, timeout: .seconds(30), retries: 3)
            remote.readDeadline = .seconds(1)
            let bundle = try await MountedBundle.mount(.remote(origin.base + "/r.zip", remote))
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

    /// nginx serving a channel's folder: `channel.json` and `releases/<digest>.zip`, signed with a key of its own.
    final class ChannelSite: Sendable {
        let folder: String
        let server: RealServer
        let key = Curve25519.Signing.PrivateKey()
        /// The newest document signed with the site's key (what the next one follows, whatever the URL holds now).
        private let latest = Mutex<[UInt8]?>(nil)
        var channelURL: String { server.base + "/channel.json" }
        var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

        init(folder: String, server: RealServer) {
            self.folder = folder
            self.server = server
        }

        static func start(in folder: TemporaryFolder) async throws -> ChannelSite {
            let root = folder.path + "/site"
            try FileManager.default.createDirectory(atPath: root + "/releases", withIntermediateDirectories: true)
            return ChannelSite(folder: root, server: try await RealServer.start("nginx", root: root, state: folder.path + "/site-state"))
        }

        /// Uploads `release` under its digest, then writes the channel's next document naming it (at `url`), signed
        /// with `key` (the site's own by default); returns the document's bytes.
        @discardableResult
        func publish(
            _ release: String, url: String = "releases/{digest}.zip", lifetime: Double = 86_400, key: Curve25519.Signing.PrivateKey? = nil,
            deltas: [String] = []
        ) throws -> [UInt8] {
            let digest = try MountedBundle(path: release).digest
            let object = folder + "/releases/\(digest).zip"
            if !FileManager.default.fileExists(atPath: object) { try FileManager.default.copyItem(atPath: release, toPath: object) }
            // Deltas go to deltas/<their file name>.
            try FileManager.default.createDirectory(atPath: folder + "/deltas", withIntermediateDirectories: true)
            let listed = try deltas.map { path -> ChannelWriter.DeltaFile in
                let name = (path as NSString).lastPathComponent
                try? FileManager.default.removeItem(atPath: folder + "/deltas/" + name)
                try FileManager.default.copyItem(atPath: path, toPath: folder + "/deltas/" + name)
                return ChannelWriter.DeltaFile(path: path, url: "deltas/" + name)
            }
            let (_, envelope) = try ChannelWriter.next(
                release: release, url: url, deltas: listed, previous: key == nil ? latest.withLock { $0 } : nil, lifetime: lifetime, key: key ?? self.key)
            if key == nil { latest.withLock { $0 = envelope } }
            try put(envelope)
            return envelope
        }

        /// Puts `bytes` at the channel's URL: written beside it, then renamed over it.
        func put(_ bytes: [UInt8]) throws {
            try Data(bytes).write(to: URL(fileURLWithPath: folder + "/channel.tmp"))
            guard rename(folder + "/channel.tmp", folder + "/channel.json") == 0 else { throw BundleError(.io, "cannot rename the channel") }
        }

        func stop() { server.stop() }
    }

    /// What a reloader reported.
    final class Events: Sendable {
        private let list = Mutex<[String]>([])
        var all: [String] { list.withLock { $0 } }
        func add(_ event: BundleReloader.Event) { list.withLock { $0.append("\(event)") } }
    }

    /// Waits (30 s at most) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while !condition() {
            guard Date() < deadline else { return false }
            try await Task.sleep(for: .milliseconds(50))
        }
        return true
    }

    @Test(
        "a fleet node follows a signed channel: each new release swapped in for what changed, a replayed old document, another key, an expired document and a release that is not the one named refused while the release held answers on, a rollback from the cache"
    )
    func followsChannel() async throws {
        let folder = try TemporaryFolder()
        for (n, changed) in [(0, Set<Int>()), (1, Set([3, 50, 120])), (2, Set([3, 7]))] {
            try Self.writeRelease(to: folder.path + "/r\(n).zip", release: n, changed: changed)
        }
        let local = try (0...2).map { try MountedBundle(path: folder.path + "/r\($0).zip") }
        let site = try await ChannelSite.start(in: folder)
        defer { site.stop() }
        let v1 = try site.publish(folder.path + "/r0.zip")
        let remote = try RemoteBundleTests.remote(cache: folder.path + "/node-cache")
        let channel = try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: remote)
        // The one mount, given a channel: the release its document names, checked against the document's digest.
        let viaChannel = try await MountedBundle.mount(
            .channel(try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: try RemoteBundleTests.remote(cache: nil))))
        #expect(viaChannel.digest == local[0].digest && viaChannel.remoteURL != nil)
        // A reloader follows a channel by BundleReloader(channel:), not as one of a configuration's bundles.
        let fromConfiguration = #expect(throws: BundleError.self) { try BundleReloader(OfflineLoader.Configuration([.channel(channel)])) }
        #expect(fromConfiguration?.code == .invalidArgument)
        let events = Events()
        let reloader = try BundleReloader(channel: channel, interval: .seconds(0.2), signals: [], report: events.add)
        let watching = Task { try await reloader.run() }
        @Sendable func stopWatching() async {
            watching.cancel()
            _ = try? await watching.value
        }
        try await afterwards(stopWatching) {
            func serving() -> String { reloader.loader.bundles.first?.digest ?? "" }
            #expect(serving() == local[0].digest)
            let page = "https://docs.example/p3.html"
            func read(_ key: String) async throws -> Data {
                let bundle = try #require(reloader.loader.bundles.first)
                return try await offPool { try bundle.body(of: try #require(bundle.entry(forKey: key))) }
            }
            try await offPool { try reloader.loader.bundles.first?.fetchWhole() }
            // The next release: swapped in, and it costs its index and the bodies that changed.
            try site.publish(folder.path + "/r1.zip")
            #expect(try await Self.eventually { serving() == local[1].digest }, "\(events.all)")
            #expect(try await read(page) == (try local[1].body(of: try #require(local[1].entry(forKey: page)))))
            let r1 = try #require(reloader.loader.bundles.first)
            try await offPool { try RemoteBundleTests.expectSameBodies(r1, local[1]) }
            let index = try #require(local[1].metadata["index.bin"]).compressedSize
            let changed = Self.changedBytes(local[1], since: local[0])
            #expect((r1.remoteTraffic?.bytes ?? .max) <= index + 128 << 10 + changed, "R1 cost \(r1.remoteTraffic?.bytes ?? 0) bytes")
            // A replayed old document: refused, said once, and R1 answers on.
            try site.put(v1)
            #expect(try await Self.eventually { events.all.contains { $0.contains("lower than the version 2 held") } }, "\(events.all)")
            // Another key's document, naming R2.
            try site.publish(folder.path + "/r2.zip", key: Curve25519.Signing.PrivateKey())
            #expect(try await Self.eventually { events.all.contains { $0.contains("not signed by the channel's public key") } }, "\(events.all)")
            // A document naming R2 at R1's object: the release is not the one named.
            try site.publish(folder.path + "/r2.zip", url: "releases/\(local[1].digest).zip")
            #expect(try await Self.eventually { events.all.contains { $0.contains("not the release") } }, "\(events.all)")
            // An expired document.
            try site.publish(folder.path + "/r2.zip", lifetime: -60)
            #expect(try await Self.eventually { events.all.contains { $0.contains("expired") } }, "\(events.all)")
            #expect(serving() == local[1].digest)
            #expect(events.all.filter { $0.contains("lower than") }.count == 1, "a refused document was said again: \(events.all)")
            // A release that failed to mount is tried again, backing off: not at every poll.
            #expect(events.all.filter { $0.contains("not the release") }.count <= 6, "\(events.all)")
            // A rollback: R0's bodies are in the cache.
            try site.publish(folder.path + "/r0.zip")
            #expect(try await Self.eventually { serving() == local[0].digest }, "\(events.all)")
            let back = try #require(reloader.loader.bundles.first)
            try await offPool { try RemoteBundleTests.expectSameBodies(back, local[0]) }
            let index0 = try #require(local[0].metadata["index.bin"]).compressedSize
            #expect((back.remoteTraffic?.bytes ?? .max) <= index0 + 128 << 10, "a rollback cost \(back.remoteTraffic?.bytes ?? 0) bytes")
            #expect(channel.document?.version == 5, "\(String(describing: channel.document))")
        }
    }

    @Test("a node restarted while its channel cannot be reached follows the document it kept, from its cache; with none kept it says why")
    func channelOffline() async throws {
        let folder = try TemporaryFolder()
        try Self.writeRelease(to: folder.path + "/r0.zip", release: 0, changed: [])
        let local = try MountedBundle(path: folder.path + "/r0.zip")
        let site = try await ChannelSite.start(in: folder)
        try site.publish(folder.path + "/r0.zip")
        let remote = try RemoteBundleTests.remote(cache: folder.path + "/node-cache", timeout: .seconds(2), retries: 0)
        let first = try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: remote)
        let bundle = try await offPool { try first.mountRelease() }
        try await offPool { try bundle.fetchWhole() }
        site.stop()
        let again = try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: remote)
        #expect(again.document == first.document)
        let offline = try await offPool { try again.mountRelease() }
        try await offPool { try RemoteBundleTests.expectSameBodies(offline, local) }
        let elsewhere = try RemoteBundleTests.remote(cache: folder.path + "/other-cache", timeout: .seconds(2), retries: 0)
        let error = #expect(throws: BundleError.self) { try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: elsewhere) }
        #expect(error?.code == .remote && error?.message.contains(site.channelURL) == true, "\(String(describing: error))")
    }

    @Test(
        "a channel that lists a delta from the release a node holds: the node fetches the delta alone and answers as the next release; a delta whose bytes are not the ones named is refused, and the release mounted by its URL"
    )
    func channelDelta() async throws {
        let folder = try TemporaryFolder()
        for (n, changed) in [(0, Set<Int>()), (1, Set([3, 50, 120])), (2, Set([3, 7]))] {
            try Self.writeRelease(to: folder.path + "/r\(n).zip", release: n, changed: changed)
        }
        // R1's delta carries its changed pages whole (not as patches): what the rollback below borrows.
        try DeltaBundles.make(old: folder.path + "/r0.zip", new: folder.path + "/r1.zip", to: folder.path + "/d1.zip", wholeBodies: true)
        try DeltaBundles.make(old: folder.path + "/r1.zip", new: folder.path + "/r2.zip", to: folder.path + "/d2.zip")
        let local = try (0...2).map { try MountedBundle(path: folder.path + "/r\($0).zip") }
        let site = try await ChannelSite.start(in: folder)
        defer { site.stop() }
        try site.publish(folder.path + "/r0.zip")
        let channel = try ReleaseChannel(url: site.channelURL, publicKey: site.publicKey, remote: try RemoteBundleTests.remote(cache: folder.path + "/node"))
        let r0 = try await offPool { try channel.mountRelease() }
        try await offPool { try r0.fetchWhole() }
        let held = try #require(r0.remoteTraffic)
        try site.publish(folder.path + "/r1.zip", deltas: [folder.path + "/d1.zip"])
        #expect(channel.poll() != .unchanged)
        let r1 = try await offPool { try channel.mountRelease() }
        #expect(r1.deltaDepth == 1 && r1.digest == local[1].digest)
        try await offPool { try RemoteBundleTests.expectSameBodies(r1, local[1]) }
        // Every body the delta does not carry came from the release held, which fetched nothing more.
        #expect(r0.remoteTraffic?.requests == held.requests && r0.remoteTraffic?.bytes == held.bytes)
        // The next delta's bytes at its URL are not the ones the document names: refused, and R2 mounted by its URL.
        try site.publish(folder.path + "/r2.zip", deltas: [folder.path + "/d2.zip"])
        try Data("not the delta".utf8).write(to: URL(fileURLWithPath: site.folder + "/deltas/d2.zip"))
        #expect(channel.poll() != .unchanged)
        let r2 = try await offPool { try channel.mountRelease() }
        #expect(r2.deltaDepth == 0 && r2.remoteURL != nil && r2.digest == local[2].digest)
        try await offPool { try RemoteBundleTests.expectSameBodies(r2, local[2]) }
        // Back to R1, by its URL: the bodies only the delta carried are lent from the delta kept in the cache folder,
        // the rest from R0's; only R1's end and index are fetched.
        try site.publish(folder.path + "/r1.zip")
        #expect(channel.poll() != .unchanged)
        let back = try await offPool { try channel.mountRelease() }
        #expect(back.deltaDepth == 0 && back.digest == local[1].digest)
        let mountRequests = try #require(back.remoteTraffic).requests
        try await offPool { try RemoteBundleTests.expectSameBodies(back, local[1]) }
        let index = try #require(local[1].metadata["index.bin"]).compressedSize
        #expect((back.remoteTraffic?.bytes ?? .max) <= index + 128 << 10, "the rollback fetched \(back.remoteTraffic?.bytes ?? 0) bytes")
        #expect(back.remoteTraffic?.requests == mountRequests, "the rollback's bodies were fetched: \(back.remoteTraffic?.requests ?? 0) requests")
    }
}
