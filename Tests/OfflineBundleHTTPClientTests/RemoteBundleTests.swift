import AsyncHTTPClient
import Foundation
import InMemoryTracing
import NIOCore
import OfflineBundle
import OfflineBundleHTTPClient
import OfflineBundleServing
import PackagerKit
import Synchronization
import TestSupport
import Testing

/// Remote bundles: mounted where they lie, by HTTP range requests, from the web servers people put in front of object
/// storage (nginx, Apache httpd, Caddy, lighttpd) and from an S3-compatible API (moto) by a presigned URL; and what a
/// hostile or failing server gets.
@Suite("remote bundles by HTTP range reads", .serialized)
struct RemoteBundleTests {
    /// A bundle of `count` pages (1–20 KB, text), a few larger bodies (100 KB of noise, and 5 MB to read in pieces).
    static func writeRelease(to path: String, count: Int = 300, version: String = "v1", large: Bool = true) throws {
        var writer = BundleWriter()
        for i in 0..<count {
            let text = String(repeating: "<p>page \(i) of release \(version): the quick brown fox.</p>\n", count: 20 + (i * 7) % 400)
            writer.add(.init(url: "https://docs.example/p\(i).html", headers: [("content-type", "text/html")], body: .data(Data(text.utf8))))
        }
        writer.add(.init(url: "https://docs.example/noise.bin", headers: [("content-type", "application/octet-stream")], body: .data(noise(100_000, seed: 3))))
        if large {
            writer.add(
                .init(
                    url: "https://docs.example/large.bin", headers: [("content-type", "application/octet-stream")], body: .data(noise(5_000_000, seed: 4))))
        }
        writer.add(.init(url: "https://docs.example/version.txt", headers: [("content-type", "text/plain")], body: .data(Data(version.utf8))))
        _ = try writer.write(to: path)
    }

    static func remote(cache: String?, timeout: Duration = .seconds(10), retries: Int = 1, whole: RemoteOptions.WholeObjectAnswer = .download) throws
        -> RemoteOptions
    {
        RemoteOptions(
            transport: try HTTPClientRemoteTransport(connectTimeout: .seconds(5)), cacheDirectory: cache, timeout: timeout, retries: retries, wholeObject: whole
        )
    }

    /// Every entry's body through `remote` is the local file's, byte for byte.
    static func expectSameBodies(_ remote: MountedBundle, _ local: MountedBundle) throws {
        #expect(remote.entryCount == local.entryCount && remote.digest == local.digest)
        for entry in local.entries {
            let other = try #require(remote.entry(forKey: entry.key))
            #expect(try remote.body(of: other) == local.body(of: entry), "\(entry.key)")
        }
    }

    @Test("cold mount in two requests within index + 64 KiB, warm mount in one, offline from the cache: nginx, Apache, Caddy, lighttpd")
    func realServers() async throws {
        let kinds = ["nginx", "apache", "caddy", "lighttpd"].filter(RealServer.installed.contains)
        #expect(!kinds.isEmpty, "no web server installed (make deps installs them)")
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/www/release.zip")
        let local = try MountedBundle(path: folder.path + "/www/release.zip")
        let indexEntry = try #require(local.metadata["index.bin"])
        let indexBytes = indexEntry.compressedSize
        // The tail request brings the index too when it lies in the object's last bytes (a small deflated one does).
        let coldRequests = local.file.size - indexEntry.localHeaderOffset <= UInt64(MountedBundle.remoteTailBytes) ? 1 : 2
        for kind in kinds {
            let server = try await RealServer.start(kind, root: folder.path + "/www", state: folder.path + "/state-\(kind)")
            defer { server.stop() }
            let cache = folder.path + "/cache-\(kind)"
            let url = server.base + "/release.zip"
            let bundle = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache)))
            let mounted = try #require(bundle.remoteTraffic)
            #expect(mounted.requests == coldRequests, "\(kind): a cold mount took \(mounted.requests) requests")
            #expect(mounted.bytes <= indexBytes + (64 << 10), "\(kind): a cold mount fetched \(mounted.bytes) bytes (index \(indexBytes))")
            // One body, one request.
            let page = try #require(bundle.entry(forKey: "https://docs.example/p7.html"))
            #expect(try bundle.body(of: page) == local.body(of: try #require(local.entry(forKey: page.key))))
            #expect(bundle.remoteTraffic?.requests == coldRequests + 1, "\(kind)")
            try await offPool { try Self.expectSameBodies(bundle, local) }
            // Warm: one conditional request, then every body from the cache.
            let warm = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache)))
            #expect(warm.remoteTraffic?.requests == 1, "\(kind): a warm mount took \(warm.remoteTraffic?.requests ?? 0) requests")
            try await offPool { try Self.expectSameBodies(warm, local) }
            #expect(warm.remoteTraffic?.requests == 1, "\(kind): a warm read went to the server")
            server.stop()
            // Offline: mounted from what the cache holds.
            let offline = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache, timeout: .seconds(2), retries: 0)))
            try await offPool { try Self.expectSameBodies(offline, local) }
        }
    }

    @Test("a startup set is fetched before it is asked for, bodies near each other in one request; the cache folder keeps to its bound")
    func prefetchAndBound() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/www/a.zip", version: "a")
        try Self.writeRelease(to: folder.path + "/www/b.zip", count: 200, version: "b", large: false)
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        defer { server.stop() }
        let cache = folder.path + "/cache"
        let a = try await MountedBundle.mount(.remote(server.base + "/a.zip", try Self.remote(cache: cache)))
        let keys = (0..<40).map { "https://docs.example/p\($0 * 7).html" } + ["https://docs.example/not-there.html"]
        let sent = try await offPool { try a.prefetch(keys: keys) }
        #expect(sent >= 1 && sent <= 40, "\(sent) requests for 40 bodies")
        let after = try #require(a.remoteTraffic).requests
        let local = try MountedBundle(path: folder.path + "/www/a.zip")
        for key in keys.dropLast() {
            #expect(try a.body(of: try #require(a.entry(forKey: key))) == local.body(of: try #require(local.entry(forKey: key))))
        }
        #expect(a.remoteTraffic?.requests == after, "a prefetched body was fetched again")
        #expect(try await offPool { try a.prefetch(keys: keys) } == 0)
        try await offPool { try a.fetchWhole() }
        let aFiles = try FileManager.default.contentsOfDirectory(atPath: cache).filter { $0.hasPrefix(a.digest) }
        #expect(aFiles.count == 3, "\(aFiles)")
        // B mounted with a bound that holds B but not A and B: A, mounted least recently, goes.
        let bSize = try #require(try FileManager.default.attributesOfItem(atPath: folder.path + "/www/b.zip")[.size] as? NSNumber).uint64Value
        var bounded = try Self.remote(cache: cache)
        bounded.cacheBytes = bSize + (1 << 20)
        let b = try await MountedBundle.mount(.remote(server.base + "/b.zip", bounded))
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache).filter { $0.hasPrefix(a.digest) }.isEmpty, "A's cache files were kept")
        let bLocal = try MountedBundle(path: folder.path + "/www/b.zip")
        try await offPool { try Self.expectSameBodies(b, bLocal) }
        // Past its bound a bundle's reads still answer, from bytes it does not keep.
        var tiny = try Self.remote(cache: folder.path + "/tiny")
        tiny.cacheBytes = 70 << 10
        let c = try await MountedBundle.mount(.remote(server.base + "/b.zip", tiny))
        try await offPool { try Self.expectSameBodies(c, bLocal) }
        #expect((c.remoteTraffic?.held ?? .max) <= 70 << 10)
    }

    @Test("every vector of docs/vectors read from nginx by range reads: a bundle of version 2 or 3 answers as its file, a broken one is refused as its file is")
    func vectors() async throws {
        let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/vectors").path
        let folder = try TemporaryFolder()
        let served = try await RemoteRelease.start(in: folder)
        defer { served.stop() }
        let names = try FileManager.default.contentsOfDirectory(atPath: vectors).filter { $0.hasSuffix(".zip") }.sorted()
        #expect(names.count >= 15)
        for name in names {
            let path = vectors + "/" + name
            let local = Result { try MountedBundle(path: path) }
            let remote = Result { try served.mount(path) }
            switch (local, remote) {
            case (.success(let file), .success(let bundle)):
                #expect(file.formatVersion >= 2 && bundle.digest == file.digest && bundle.entryCount == file.entryCount, "\(name)")
                // Each body as its file gives it, or refused with the same code (broken-body.zip).
                for entry in file.entries {
                    let other = try #require(bundle.entry(forKey: entry.key))
                    switch (Result { try file.body(of: entry) }, Result { try bundle.body(of: other) }) {
                    case (.success(let a), .success(let b)): #expect(a == b, "\(name): \(entry.key)")
                    case (.failure(let a), .failure(let b)):
                        #expect((a as? BundleError)?.code == (b as? BundleError)?.code, "\(name): \(entry.key): \(a) / \(b)")
                    default: Issue.record("\(name): \(entry.key) reads differently from its URL")
                    }
                }
            case (.success(let file), .failure(let error)):
                #expect(file.formatVersion == 1 && (error as? BundleError)?.code == .unsupported, "\(name): \(error)")
            case (.failure(let error), .success):
                Issue.record("\(name): its file is refused (\(error)) but its URL mounts")
            case (.failure(let fileError), .failure(let urlError)):
                let delta = name.contains("delta-")
                #expect(
                    delta ? (urlError as? BundleError)?.code == .unsupported : (urlError as? BundleError) != nil,
                    "\(name): \(fileError) / \(urlError)")
            }
        }
    }

    @Test("a delta on disk mounted over a base read from nginx: every key answers as the next release's file")
    func deltaOverRemoteBase() async throws {
        let folder = try TemporaryFolder()
        try Self.writeRelease(to: folder.path + "/old.zip", count: 120, version: "v1", large: false)
        try Self.writeRelease(to: folder.path + "/new.zip", count: 121, version: "v2", large: false)
        try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/next.delta.zip")
        let served = try await RemoteRelease.start(in: folder)
        defer { served.stop() }
        let base = try served.mount(folder.path + "/old.zip")
        let delta = try MountedBundle(deltaPath: folder.path + "/next.delta.zip", base: base)
        #expect(delta.base?.remoteURL != nil)
        let new = try MountedBundle(path: folder.path + "/new.zip")
        try await offPool { try Self.expectSameBodies(delta, new) }
    }

    @Test("a body past the 16 MiB a first read fetches is read on in 4 MiB requests, not one per chunk")
    func largeBody() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        var writer = BundleWriter()
        let body = noise(20 << 20, seed: 9)
        writer.add(.init(url: "https://docs.example/video.bin", headers: [("content-type", "application/octet-stream")], body: .data(body)))
        _ = try writer.write(to: folder.path + "/www/large.zip")
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        defer { server.stop() }
        let bundle = try await MountedBundle.mount(.remote(server.base + "/large.zip", try Self.remote(cache: nil)))
        let mounted = try #require(bundle.remoteTraffic).requests
        let read = try await offPool { try bundle.body(of: bundle.entry(forKey: "https://docs.example/video.bin")!) }
        #expect(read == body)
        // 16 MiB at the first read, then the last 4 MiB in one request (1 MiB chunks would take four).
        let requests = try #require(bundle.remoteTraffic).requests - mounted
        #expect(requests <= 3, "\(requests) requests for a 20 MiB body")
    }

    @Test("a damaged cache file: the body fails its check at its first read in the process, is forgotten, and is fetched again within that read")
    func damagedCache() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/www/release.zip", count: 50, large: false)
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        defer { server.stop() }
        let cache = folder.path + "/cache"
        let url = server.base + "/release.zip"
        let local = try MountedBundle(path: folder.path + "/www/release.zip")
        let key = "https://docs.example/p9.html"
        let good = try local.body(of: try #require(local.entry(forKey: key)))
        let first = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache)))
        #expect(try first.body(of: try #require(first.entry(forKey: key))) == good)
        // One byte of the cached body flipped on disk, as a failing disk would.
        let record = local.bodyRecord(at: try #require(local.entry(forKey: key)?.body).index)
        let data = try #require(try FileManager.default.contentsOfDirectory(atPath: cache).first { $0.hasSuffix(".data") })
        try flipByte(at: Int(record.dataOffset) + 5, in: cache + "/" + data)
        let second = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache)))
        let entry = try #require(second.entry(forKey: key))
        // Checked at its first read in this process, forgotten and fetched again within the same read.
        let before = try #require(second.remoteTraffic).requests
        #expect(try second.body(of: entry) == good)
        #expect(second.remoteTraffic?.requests == before + 1)
        // The next process finds it right too.
        let third = try await MountedBundle.mount(.remote(url, try Self.remote(cache: cache)))
        #expect(try third.body(of: try #require(third.entry(forKey: key))) == good)
    }

    @Test("a signature required of a remote bundle: the signed vector mounts by its key, an unsigned one and another key are refused")
    func requiredSignature() async throws {
        let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/vectors").path
        let folder = try TemporaryFolder()
        let served = try await RemoteRelease.start(in: folder)
        defer { served.stop() }
        let key = try BundlePublicKey(contentsOf: vectors + "/vector-test-key.pub").bytes
        let signed = try served.mount(vectors + "/v2-pack-signed.zip", options: .init(requiredPublicKey: key))
        #expect(signed.isSigned && signed.remoteTraffic?.requests ?? 0 <= 2)
        let unsigned = #expect(throws: BundleError.self) { try served.mount(vectors + "/v2-pack.zip", options: .init(requiredPublicKey: key)) }
        #expect(unsigned?.code == .signature)
        let other = #expect(throws: BundleError.self) {
            try served.mount(vectors + "/v2-pack-signed.zip", options: .init(requiredPublicKey: [UInt8](repeating: 7, count: 32)))
        }
        #expect(other?.code == .signature)
    }

    @Test("a server that loses its origin keeps answering what its cache holds, and says why for the rest")
    func lostOrigin() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/www/release.zip")
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        let bundle = try await MountedBundle.mount(.remote(server.base + "/release.zip", try Self.remote(cache: nil, timeout: .seconds(2), retries: 1)))
        let held = try #require(bundle.entry(forKey: "https://docs.example/p1.html"))
        let before = try bundle.body(of: held)
        server.stop()
        #expect(try bundle.body(of: held) == before)
        let missing = try #require(bundle.entry(forKey: "https://docs.example/p2.html"))
        let error = try #require(throws: BundleError.self) { try bundle.body(of: missing) }
        #expect(error.code == .remote && error.message.contains(server.base + "/release.zip"), "\(error)")
    }

    /// Release v1 served by nginx as www/release.zip, and v2 (one page more) beside it, to be put in its place.
    static func servedRelease() async throws -> (folder: TemporaryFolder, server: RealServer) {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try writeRelease(to: folder.path + "/www/release.zip", version: "v1")
        try writeRelease(to: folder.path + "/v2.zip", count: 301, version: "v2")
        return (folder, try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state"))
    }

    @Test("an object replaced mid-use is never mixed with the mounted index: reads of what is held go on, others fail as changed, and a reloader swaps")
    func swapSafety() async throws {
        let (folder, server) = try await Self.servedRelease()
        defer { server.stop() }
        let url = server.base + "/release.zip"
        let remote = try Self.remote(cache: folder.path + "/cache")
        let reloader = try BundleReloader(paths: [url], interval: .zero, signals: [], remote: remote)
        let first = try #require(reloader.loader.bundles.first)
        let version = try #require(first.entry(forKey: "https://docs.example/version.txt"))
        #expect(try first.body(of: version) == Data("v1".utf8))
        #expect(!first.remoteReplaced())
        // Replaced as a release pipeline replaces it: written beside, renamed over.
        try FileManager.default.copyItem(atPath: folder.path + "/v2.zip", toPath: folder.path + "/www/next.zip")
        #expect(rename(folder.path + "/www/next.zip", folder.path + "/www/release.zip") == 0)
        #expect(try first.body(of: version) == Data("v1".utf8), "a held body reads as mounted")
        let unread = try #require(first.entry(forKey: "https://docs.example/p3.html"))
        let error = try #require(throws: BundleError.self) { try first.body(of: unread) }
        #expect(error.code == .changed, "\(error)")
        // The read that saw it told the reloader, which mounts the new object.
        for _ in 0..<100 where reloader.loader.bundles.first === first { try await Task.sleep(for: .milliseconds(50)) }
        let second = try #require(reloader.loader.bundles.first)
        #expect(second !== first)
        #expect(try second.body(of: try #require(second.entry(forKey: "https://docs.example/version.txt"))) == Data("v2".utf8))
        #expect(second.entryCount == first.entryCount + 1)
    }

    @Test(
        "a remote bundle whose replacement failed to mount (an upload caught half done) is mounted again once a good one is in place, and the half one is not mounted again and again"
    )
    func reloadAfterAFailedReplacement() async throws {
        let (folder, server) = try await Self.servedRelease()
        defer { server.stop() }
        let reloader = try BundleReloader(paths: [server.base + "/release.zip"], interval: .seconds(0.1), signals: [], remote: try Self.remote(cache: nil))
        let first = try #require(reloader.loader.bundles.first)
        let running = Task { try await reloader.run() }
        defer { running.cancel() }
        func replace(with bytes: Data, modified: Double) throws {
            let next = folder.path + "/www/next.zip"
            try bytes.write(to: URL(fileURLWithPath: next))
            // nginx's ETag is the modification time and size: each version is told apart.
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: modified)], ofItemAtPath: next)
            #expect(rename(next, folder.path + "/www/release.zip") == 0)
        }
        let good = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/v2.zip"))
        try replace(with: good.prefix(good.count / 2), modified: 1_700_000_000)
        for _ in 0..<100 where reloader.counts.failed == 0 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(reloader.counts.failed >= 1, "the half upload was seen and failed to mount")
        #expect(reloader.loader.bundles.first === first, "the mounted release keeps answering")
        // A body the mounted release never read is not there any more: served, it is a 503 to ask again later (after
        // waiting for a newer mount that does not come), not a 500.
        let serving = try await OfflineBundleChannelServer.start(
            handle: reloader.handle, routes: [BundleRoute(origin: "https://docs.example")], responseCacheSize: 0)
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let asked = ContinuousClock.now
        let response = try await http.execute(HTTPClientRequest(url: "http://127.0.0.1:\(serving.port)/p3.html"), timeout: .seconds(30))
        #expect(response.status.code == 503 && response.headers.first(name: "retry-after") == "5", "\(response.status)")
        // At once: the server knows the replacement failed to mount (it waits up to 10 s for one on its way).
        #expect(ContinuousClock.now - asked < .seconds(8))
        try await http.shutdown()
        await serving.stop()
        // Checks every 0.1 s meanwhile: the half upload was not mounted again while it stayed.
        #expect(reloader.counts.failed <= 2, "\(reloader.counts)")
        try replace(with: good, modified: 1_700_000_100)
        for _ in 0..<150 where reloader.loader.bundles.first === first { try await Task.sleep(for: .milliseconds(20)) }
        let second = try #require(reloader.loader.bundles.first)
        #expect(second !== first, "the good upload is mounted")
        #expect(try second.body(of: try #require(second.entry(forKey: "https://docs.example/version.txt"))) == Data("v2".utf8))
    }

    @Test("serve answers from a remote bundle swapped 20 times under 8 clients: no failed request, every body of one version")
    func serveSwapsUnderLoad() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/a.zip", count: 60, version: "v1")
        try Self.writeRelease(to: folder.path + "/b.zip", count: 60, version: "v2")
        try FileManager.default.copyItem(atPath: folder.path + "/a.zip", toPath: folder.path + "/www/release.zip")
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        defer { server.stop() }
        let reloader = try BundleReloader(paths: [server.base + "/release.zip"], interval: .zero, signals: [], remote: try Self.remote(cache: nil))
        let serving = try await OfflineBundleChannelServer.start(
            handle: reloader.handle, routes: [BundleRoute(origin: "https://docs.example")], responseCacheSize: 0)
        let base = "http://127.0.0.1:\(serving.port)"
        let a = try MountedBundle(path: folder.path + "/a.zip")
        let b = try MountedBundle(path: folder.path + "/b.zip")
        let stop = Stopwatch()
        let failures = Counted()
        let root = folder.path
        // Identity answers (the shared client inflates gzip, and refuses these pages' ratio).
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(decompression: .disabled))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<8 {
                group.addTask {
                    var i = client
                    while !stop.stopped {
                        i = (i + 7) % 60
                        let key = "https://docs.example/p\(i).html"
                        var request = HTTPClientRequest(url: base + "/p\(i).html")
                        request.method = .GET
                        let response = try await http.execute(request, timeout: .seconds(30))
                        let body = Data(try await response.body.collect(upTo: 64 << 20).readableBytesView)
                        let good = try [a, b].contains { bundle in try bundle.body(of: bundle.entry(forKey: key)!) == body }
                        if response.status.code != 200 || !good {
                            failures.add("\(key): \(response.status.code), \(body.count) bytes, \(response.headers.first(name: "content-length") ?? "")")
                        }
                    }
                }
            }
            group.addTask {
                for swap in 0..<20 {
                    try await Task.sleep(for: .milliseconds(150))
                    let next = root + "/www/next.zip"
                    try? FileManager.default.removeItem(atPath: next)
                    try FileManager.default.copyItem(atPath: root + (swap % 2 == 0 ? "/b.zip" : "/a.zip"), toPath: next)
                    // nginx's ETag is the modification time and size: a second apart, so each version is told apart.
                    try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000 + Double(swap))], ofItemAtPath: next)
                    let reloads = reloader.counts.reloaded
                    #expect(rename(next, root + "/www/release.zip") == 0)
                    _ = await offPoolCheck(reloader)
                    // As a pipeline swaps releases: the next swap after this one is mounted (or 2 s).
                    for _ in 0..<200 where reloader.counts.reloaded == reloads { try await Task.sleep(for: .milliseconds(10)) }
                }
                stop.stop()
            }
            try await group.waitForAll()
        }
        await serving.stop()
        try await http.shutdown()
        #expect(failures.items.isEmpty, "\(failures.items.prefix(5))")
        #expect(reloader.counts.reloaded >= 10, "\(reloader.counts)")
    }

    @Test("the shared request table with the release mounted from nginx, through AsyncHTTPClient and serve's channel server (curl)")
    func sharedTable() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        let server = try await RealServer.start("nginx", root: folder.path + "/www", state: folder.path + "/state")
        defer { server.stop() }
        let origin = "https://docs.example.com"
        let remote = try Self.remote(cache: folder.path + "/cache")
        let www = folder.path + "/www"
        let loader = try runtimeLoader(origin: origin, folder: folder, policy: .bundleOnly) { path in
            try FileManager.default.copyItem(atPath: path, toPath: www + "/release.zip")
            return try MountedBundle(url: server.base + "/release.zip", remote: remote)
        }
        #expect(loader.bundles.contains { $0.remoteURL == server.base + "/release.zip" })
        // AsyncHTTPClient, through the wrapper.
        let client = OfflineHTTPClient(loader: loader)
        for wanted in runtimeCases {
            var request = HTTPClientRequest(url: origin + wanted.path)
            request.method = .init(rawValue: wanted.method)
            if let body = wanted.requestBody { request.body = .bytes(ByteBuffer(bytes: body)) }
            for (name, value) in wanted.headers { request.headers.add(name: name, value: value) }
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = Data(buffer: try await response.body.collect(upTo: 1 << 20))
            let problem = mismatch(wanted, status: Int(response.status.code), header: { response.headers.first(name: $0) }, body: body)
            #expect(problem == nil, "AsyncHTTPClient: \(problem ?? "")")
        }
        // serve's channel server, asked by curl.
        let serving = try await OfflineBundleChannelServer.start(handle: LoaderHandle(loader), routes: [.init(origin: origin)])
        for wanted in runtimeCases {
            let got = try await curlExchange(
                "http://127.0.0.1:\(serving.port)\(wanted.path)", headers: wanted.headers, method: wanted.method, body: wanted.requestBody, in: folder)
            let problem = mismatch(wanted, status: got.status, header: got.header, body: got.body)
            #expect(problem == nil, "serve: \(problem ?? "")")
        }
        await serving.stop()
    }

    @Test("over HTTPS from nginx with a private CA: trusted with the CA file, refused without it")
    func httpsWithPrivateCA() async throws {
        let folder = try TemporaryFolder()
        try FileManager.default.createDirectory(atPath: folder.path + "/www", withIntermediateDirectories: true)
        try Self.writeRelease(to: folder.path + "/www/release.zip", count: 50)
        try await makeTestCertificates(in: folder)
        let port = try freePort()
        let conf = folder.path + "/nginx.conf"
        try """
        worker_processes 1; pid \(folder.path)/nginx.pid; error_log \(folder.path)/error.log; user root;
        events { worker_connections 64; }
        http { access_log off; server { listen 127.0.0.1:\(port) ssl; ssl_certificate \(folder.path)/server.pem;
            ssl_certificate_key \(folder.path)/server.key; root \(folder.path)/www; } }
        """.write(toFile: conf, atomically: true, encoding: .utf8)
        // In the foreground, as a child of the test (a daemon would hold the output pipe of `run` open).
        let nginx = try launch("/usr/sbin/nginx", ["-c", conf, "-g", "daemon off;"])
        defer {
            nginx.terminate()
            nginx.waitUntilExit()
        }
        let url = "https://127.0.0.1:\(port)/release.zip"
        var trusted = try Self.remote(cache: nil)
        trusted.transport = try HTTPClientRemoteTransport(caFile: folder.path + "/ca.pem")
        var bundle: MountedBundle?
        for _ in 0..<50 where bundle == nil {
            bundle = try? await MountedBundle.mount(.remote(url, trusted))
            if bundle == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let mounted = try #require(bundle)
        let local = try MountedBundle(path: folder.path + "/www/release.zip")
        try await offPool { try Self.expectSameBodies(mounted, local) }
        let error = await #expect(throws: BundleError.self) { _ = try await MountedBundle.mount(.remote(url, try Self.remote(cache: nil, retries: 0))) }
        #expect(error?.code == .remote && error?.message.contains(url) == true, "\(String(describing: error))")
    }

    @Test("an S3-compatible server (moto) by a presigned URL")
    func presignedS3() async throws {
        guard let moto = APIServer.find("moto_server") else {
            Issue.record("moto_server is not installed: \(APIServer.installHint)")
            return
        }
        let folder = try TemporaryFolder()
        try Self.writeRelease(to: folder.path + "/release.zip", count: 50)
        let server = try await APIServer.start(moto, ["-H", "127.0.0.1", "-p", "{port}"], probe: "/")
        defer { server.stop() }
        let script = """
            import boto3, sys
            s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test")
            s3.create_bucket(Bucket="releases")
            s3.upload_file(sys.argv[2], "releases", "docs/release.zip")
            print(s3.generate_presigned_url("get_object", Params={"Bucket": "releases", "Key": "docs/release.zip"}, ExpiresIn=3600))
            """
        let python = URL(fileURLWithPath: moto).deletingLastPathComponent().appendingPathComponent("python3").path
        let result = try await run(
            FileManager.default.isExecutableFile(atPath: python) ? python : "python3", ["-c", script, server.base, folder.path + "/release.zip"])
        try #require(result.status == 0, "\(result.output)")
        let presigned = try #require(result.output.split(separator: "\n").last.map(String.init))
        #expect(presigned.contains("Signature=") || presigned.contains("X-Amz-Signature="))
        let bundle = try await MountedBundle.mount(.remote(presigned, try Self.remote(cache: folder.path + "/cache")))
        #expect((1...2).contains(bundle.remoteTraffic?.requests ?? 0), "its metadata may fit in the first request's 64 KiB")
        #expect(bundle.remoteURL == server.base + "/releases/docs/release.zip", "the query (the signature) is never shown")
        let local = try MountedBundle(path: folder.path + "/release.zip")
        try await offPool { try Self.expectSameBodies(bundle, local) }
        // Without the signature the bucket refuses, and the error says so.
        let error = await #expect(throws: BundleError.self) {
            _ = try await MountedBundle.mount(.remote(server.base + "/releases/docs/release.zip", try Self.remote(cache: nil)))
        }
        #expect(error?.code == .remote && error?.message.contains("403") == true, "\(String(describing: error))")
    }
}

/// A server under the test's control, for what real servers do not do on request: ignore ranges, change the object
/// between two requests, send the wrong range, fail, hang.
@Suite("remote bundles: failing and hostile servers", .serialized)
struct RemoteBundleFaultTests {
    /// Serves `bytes` with ranges, a strong ETag and If-Match, changed as `fault` says for each request (numbered from 1).
    final class RangeServer: @unchecked Sendable {
        var bytes: [UInt8]
        var etag = "\"one\""
        var fault: (Int, inout Origin.Resource, inout [UInt8]) -> Void = { _, _, _ in }
        private var count = 0
        private let lock = NSLock()
        init(bytes: [UInt8]) { self.bytes = bytes }

        var requests: Int { lock.withLock { count } }

        func answer(_ request: Origin.Received) -> Origin.Resource {
            lock.withLock {
                count += 1
                var bytes = self.bytes
                var resource = Origin.Resource(status: 200, headers: [("ETag", etag), ("Accept-Ranges", "bytes")])
                fault(count, &resource, &bytes)
                let etag = resource.headers.first { $0.0 == "ETag" }?.1
                if let match = request.headers["if-match"], match != etag { return Origin.Resource(status: 412) }
                if request.method == "HEAD" {
                    resource.body = bytes
                    return resource
                }
                guard resource.status == 200, let range = request.headers["range"], range.hasPrefix("bytes=") else {
                    resource.body = bytes
                    return resource
                }
                let spec = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                var first: Int
                var last: Int
                if spec[0].isEmpty {
                    first = max(0, bytes.count - Int(spec[1])!)
                    last = bytes.count - 1
                } else {
                    first = Int(spec[0])!
                    last = min(bytes.count - 1, Int(spec[1])!)
                }
                if first > last { return Origin.Resource(status: 416) }
                resource.status = 206
                resource.headers.append(("Content-Range", "bytes \(first)-\(last)/\(bytes.count)"))
                resource.body = Array(bytes[first...last])
                return resource
            }
        }
    }

    func withRangeServer<T>(_ bytes: [UInt8], _ body: (Origin, RangeServer) async throws -> T) async throws -> T {
        let server = RangeServer(bytes: bytes)
        return try await withOrigin { origin in
            route(origin) { server.answer($0) }
            return try await body(origin, server)
        }
    }

    /// Answers the object's URL, with and without the query a presigned URL carries.
    func route(_ origin: Origin, _ handler: @escaping Origin.Handler) {
        origin.route("/release.zip", handler)
        origin.route("/release.zip?X-Signature=secret", handler)
    }

    func release() throws -> (TemporaryFolder, [UInt8]) {
        let folder = try TemporaryFolder()
        // Enough pages that index.bin lies outside the first request's 64 KiB.
        try RemoteBundleTests.writeRelease(to: folder.path + "/release.zip", count: 1200, large: false)
        return (folder, Array(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/release.zip"))))
    }

    func mount(_ origin: Origin, whole: RemoteOptions.WholeObjectAnswer = .download, timeout: Duration = .seconds(30), retries: Int = 1) async throws
        -> MountedBundle
    {
        try await MountedBundle.mount(
            .remote(origin.base + "/release.zip?X-Signature=secret", try RemoteBundleTests.remote(cache: nil, timeout: timeout, retries: retries, whole: whole))
        )
    }

    func mountError(_ origin: Origin, whole: RemoteOptions.WholeObjectAnswer = .download, timeout: Duration = .seconds(30), retries: Int = 1) async
        -> BundleError?
    {
        do {
            _ = try await mount(origin, whole: whole, timeout: timeout, retries: retries)
            return nil
        } catch {
            return error as? BundleError
        }
    }

    @Test("an empty object that a server answers whole (as nginx answers a range of an empty file) is no bundle, said so")
    func emptyObjectWhole() async throws {
        try await withRangeServer([]) { origin, server in
            route(origin) { request in
                var stripped = request
                stripped.headers["range"] = nil
                return server.answer(stripped)
            }
            let error = await mountError(origin)
            #expect(error?.code == .notABundle && error?.message.contains("is empty: it is not a bundle") == true, "\(String(describing: error))")
        }
    }

    @Test("a server that answers ranges with the whole object: kept whole once, with a warning; refused under the option, in words")
    func wholeObject() async throws {
        let (folder, bytes) = try release()
        try await withRangeServer(bytes) { origin, server in
            // Ignoring Range (and saying nothing of ranges): answered with status 200 and every byte.
            server.fault = { _, resource, _ in resource.headers = [("ETag", "\"one\"")] }
            route(origin) { request in
                var stripped = request
                stripped.headers["range"] = nil
                return server.answer(stripped)
            }
            let error = await mountError(origin, whole: .refuse)
            #expect(error?.code == .remote && error?.message.contains("does not serve ranges") == true, "\(String(describing: error))")
            #expect(error?.message.contains("secret") == false, "a presigned query is never printed")
            // A cache too small to keep it whole: refused, rather than every read downloading the whole object again.
            let small = RemoteOptions(
                transport: try HTTPClientRemoteTransport(connectTimeout: .seconds(5)), cacheBytes: UInt64(bytes.count / 2), retries: 0, wholeObject: .download)
            let tooSmall = await #expect(throws: BundleError.self) { try await MountedBundle.mount(.remote(origin.base + "/release.zip", small)) }
            #expect(tooSmall?.message.contains("the cache cannot keep the object") == true, "\(String(describing: tooSmall))")
            let bundle = try await mount(origin)
            #expect(bundle.remoteTraffic?.requests == 1)
            let local = try MountedBundle(path: folder.path + "/release.zip")
            try await offPool { try RemoteBundleTests.expectSameBodies(bundle, local) }
            #expect(bundle.remoteTraffic?.requests == 1, "every body came from the one download")
        }
    }

    @Test("a bundle URL whose port refuses connections is refused in words (the system's reason, the attempts), and at once: one refused dial is one attempt")
    func refusedConnectionInWords() async throws {
        let url = "http://127.0.0.1:\(try closedPort())/release.zip"
        // A connect timeout of a minute: AsyncHTTPClient's own redialling of a refused port had made each attempt
        // last that long. (The bound is loose: a loaded full run has taken 17 s to get a refusal through.)
        let remote = RemoteOptions(transport: try HTTPClientRemoteTransport(connectTimeout: .seconds(60)), retries: 0)
        let started = ContinuousClock.now
        let error = await #expect(throws: BundleError.self) { try await MountedBundle.mount(.remote(url, remote)) }
        #expect(error?.message == "cannot read \(url): connection failed: Connection refused (1 attempt)", "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(40))
    }

    @Test("a truncated object, a damaged index and a damaged body are refused, naming the URL; never a wrong byte")
    func damaged() async throws {
        let (_, bytes) = try release()
        try await withRangeServer(Array(bytes.dropLast(40))) { origin, _ in
            let error = await mountError(origin)
            #expect(error?.code == .notABundle && error?.message.contains(origin.base + "/release.zip") == true, "\(String(describing: error))")
        }
        let local = try TemporaryFolder()
        try Data(bytes).write(to: URL(fileURLWithPath: local.path + "/r.zip"))
        let mounted = try MountedBundle(path: local.path + "/r.zip")
        let indexAt = Int(
            try MountedBundle.metadataDataOffset(
                try #require(mounted.metadata["index.bin"]), in: mounted.file, bodyArea: mounted.directory.centralDirectoryOffset))
        var badIndex = bytes
        badIndex[indexAt + 200] ^= 0x40
        try await withRangeServer(badIndex) { origin, _ in
            let error = await mountError(origin)
            #expect([.corruptIndex, .corruptDirectory].contains(error?.code) && error?.message.contains(origin.base) == true, "\(String(describing: error))")
        }
        // An index altered where no check but its digest looks (a reserved header byte), its CRC-32 made to match.
        try forgeMetadataEntry("index.bin", in: local.path + "/r.zip") { $0[140] ^= 0x01 }
        try await withRangeServer(Array(try Data(contentsOf: URL(fileURLWithPath: local.path + "/r.zip")))) { origin, _ in
            let error = await mountError(origin)
            #expect(error?.code == .corruptIndex && error?.message.contains("does not hash") == true, "\(String(describing: error))")
        }
        let page = try #require(mounted.entry(forKey: "https://docs.example/p5.html"))
        let record = mounted.bodyRecord(at: try #require(page.body).index)
        var badBody = bytes
        badBody[Int(record.dataOffset) + 10] ^= 0x01
        try await withRangeServer(badBody) { origin, _ in
            let bundle = try await mount(origin)
            let error = try #require(throws: BundleError.self) { try bundle.body(of: try #require(bundle.entry(forKey: page.key))) }
            #expect(error.code == .corruptBody, "\(error)")
            let other = try #require(bundle.entry(forKey: "https://docs.example/p6.html"))
            #expect(try bundle.body(of: other) == mounted.body(of: try #require(mounted.entry(forKey: other.key))))
        }
    }

    @Test("an ETag that changes between the two mount requests: mounted again; one that never holds still is refused as changed")
    func etagChanges() async throws {
        let (_, bytes) = try release()
        try await withRangeServer(bytes) { origin, server in
            server.fault = { n, resource, _ in
                if n >= 2 { resource.headers = [("ETag", "\"two\"")] }
            }
            let bundle = try await mount(origin)
            #expect(bundle.entryCount == 1202)
            #expect(server.requests == 4, "tail, index refused (412), then tail and index again")
        }
        try await withRangeServer(bytes) { origin, server in
            server.fault = { n, resource, _ in resource.headers = [("ETag", "\"v\(n)\"")] }
            let error = await mountError(origin)
            #expect(error?.code == .changed && error?.message.contains(origin.base + "/release.zip") == true, "\(String(describing: error))")
        }
    }

    @Test(
        "each request to the server is a span (method, range, status, bytes, attempts) that carries its trace; each body read is one, saying whether the cache held it"
    )
    func traced() async throws {
        let (_, bytes) = try release()
        try await withRangeServer(bytes) { origin, server in
            let tracer = InMemoryTracer()
            var options = try RemoteBundleTests.remote(cache: nil, retries: 2)
            options.tracer = tracer
            // The first range request fails once with a 503: one span, two attempts.
            let calls = Mutex(0)
            route(origin) { request in
                calls.withLock {
                    $0 += 1
                    return $0
                } == 1 ? Origin.Resource(status: 503) : server.answer(request)
            }
            let bundle = try await MountedBundle.mount(.remote(origin.base + "/release.zip?X-Signature=secret", options))
            func spans(_ name: String) -> [FinishedInMemorySpan] { tracer.finishedSpans.filter { $0.operationName == name } }
            func text(_ span: FinishedInMemorySpan, _ name: String) -> String? {
                switch span.attributes[name]?.toSpanAttribute() {
                case .string(let value): value
                case .int64(let value): String(value)
                case .bool(let value): String(value)
                default: nil
                }
            }
            let mountFetches = spans(RemoteOptions.fetchSpanName)
            #expect(!mountFetches.isEmpty && mountFetches.allSatisfy { $0.kind == .client })
            let first = try #require(mountFetches.first)
            #expect(text(first, "offline_bundle.attempts") == "2" && text(first, "http.response.status_code") == "206", "\(first.attributes)")
            #expect(text(first, "offline_bundle.url") == origin.base + "/release.zip", "the signature in the query is not traced")
            #expect(text(first, "offline_bundle.range")?.hasPrefix("bytes=") == true && Int(text(first, "offline_bundle.bytes") ?? "") ?? 0 > 0)

            // A body the mount did not fetch (the first whose read asks the server): read from there, then from the cache.
            var fetchesBefore = 0
            var readsBefore = 0
            var firstReads: [FinishedInMemorySpan] = []
            var found: (entry: BundleEntry, body: Data)?
            for entry in bundle.entries.prefix(400) where found == nil {
                fetchesBefore = spans(RemoteOptions.fetchSpanName).count
                readsBefore = spans(RemoteOptions.readSpanName).count
                let body = try await offPool { try bundle.body(of: entry) }
                if spans(RemoteOptions.fetchSpanName).count > fetchesBefore {
                    found = (entry, body)
                    firstReads = Array(spans(RemoteOptions.readSpanName).dropFirst(readsBefore))
                }
            }
            let (entry, body) = try #require(found, "every body was fetched by the mount")
            _ = try await offPool { try bundle.body(of: entry) }
            let secondReads = Array(spans(RemoteOptions.readSpanName).dropFirst(readsBefore + firstReads.count))
            #expect((firstReads + secondReads).allSatisfy { text($0, "offline_bundle.url") == origin.base + "/release.zip" })
            // The first read missed (once), the second was the cache's.
            let misses = firstReads.filter { text($0, "offline_bundle.cache_hit") == "false" }
            #expect(misses.count == 1, "\(firstReads.map(\.attributes))")
            #expect(!secondReads.isEmpty && secondReads.allSatisfy { text($0, "offline_bundle.cache_hit") == "true" }, "\(secondReads.map(\.attributes))")
            #expect(
                secondReads.allSatisfy {
                    (text($0, "offline_bundle.bytes").flatMap(Int.init) ?? 0) > 0 && text($0, "offline_bundle.range")?.hasPrefix("bytes=") == true
                })
            // The read that missed fetched within its own trace, and the server was told it.
            let miss = try #require(misses.first)
            let fetches = Array(spans(RemoteOptions.fetchSpanName).dropFirst(fetchesBefore))
            #expect(fetches.count == 1 && fetches.first?.traceID == miss.traceID, "\(fetches.map(\.attributes))")
            #expect(text(fetches[0], "http.response.status_code") == "206" && !body.isEmpty)
            let traced = origin.requests.filter { $0.headers[InMemoryTracer.traceIDKey] == miss.traceID }
            #expect(traced.count == 1 && traced.first?.headers["range"] != nil, "\(origin.requests.suffix(3))")
        }
    }

    @Test("a wrong Content-Range, 5xx answers (retried), and a server that hangs (timed out, retried, then refused)")
    func misbehaving() async throws {
        let (_, bytes) = try release()
        try await withRangeServer(bytes) { origin, server in
            // The index's range answered with another range's Content-Range.
            route(origin) { request in
                var answer = server.answer(request)
                if server.requests > 1 && answer.status == 206 {
                    answer.headers = answer.headers.map { $0.0 == "Content-Range" ? ("Content-Range", "bytes 0-9/\(bytes.count)") : $0 }
                }
                return answer
            }
            let error = await mountError(origin)
            #expect(error?.code == .remote && error?.message.contains("Content-Range") == true, "\(String(describing: error))")
        }
        try await withRangeServer(bytes) { origin, server in
            route(origin) { request in
                let answer = server.answer(request)
                return server.requests <= 2 ? Origin.Resource(status: 503) : answer
            }
            let bundle = try await mount(origin, retries: 3)
            #expect(bundle.entryCount == 1202)
        }
        try await withOrigin { origin in
            var hanging = Origin.Resource(status: 200, body: bytes)
            hanging.delay = 6
            origin.set("/release.zip?X-Signature=secret", hanging)
            let started = Date()
            let error = await mountError(origin, timeout: .seconds(1), retries: 1)
            #expect(error?.code == .remote && error?.message.contains(origin.base + "/release.zip") == true, "\(String(describing: error))")
            #expect(Date().timeIntervalSince(started) < 15)
        }
    }
}

/// Stops the clients of a load test.
final class Stopwatch: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    var stopped: Bool { lock.withLock { done } }
    func stop() { lock.withLock { done = true } }
}

/// What went wrong, from many tasks.
final class Counted: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    var items: [String] { lock.withLock { list } }
    func add(_ item: String) { lock.withLock { list.append(item) } }
}

/// Asks the reloader's bundles whether they were replaced (off the pool: a HEAD), which reloads a replaced one.
func offPoolCheck(_ reloader: BundleReloader) async -> Bool {
    (try? await offPool { reloader.loader.bundles.contains { $0.remoteReplaced() } }) ?? false
}

/// What a remote bundle trusts: a body by the SHA-256 its checked index names (never by a CRC-32 a server can match),
/// a reply only as long as what was asked (security review 3, S4 and S5).
extension RemoteBundleFaultTests {
    /// The release, and a copy whose stored body of noise.bin has other bytes but the same length and CRC-32 (so the
    /// index, and the bundle digest, are the same): what a hostile server can make of any public bundle.
    func forgedRelease() throws -> (genuine: [UInt8], forged: [UInt8], key: String, body: Range<Int>) {
        let (folder, bytes) = try release()
        let local = try MountedBundle(path: folder.path + "/release.zip")
        let key = "https://docs.example/noise.bin"
        let record = local.bodyRecord(at: try #require(local.entry(forKey: key)?.body).index)
        #expect(record.compression == .stored)
        let body = Int(record.dataOffset)..<Int(record.dataOffset + record.storedSize)
        var forged = bytes
        let text = Array("<h1>POISONED!!</h1>".utf8)
        forged.replaceSubrange((body.lowerBound + 100)..<(body.lowerBound + 100 + text.count), with: text)
        Self.restoreCRC32(of: &forged, body: body, to: bytes, fixingAt: body.lowerBound + 200)
        #expect(forged != bytes)
        let crc = { (data: [UInt8]) in data[body].withUnsafeBytes { CRC32.checksum($0) } }
        #expect(crc(forged) == crc(bytes), "the forged body keeps its CRC-32")
        return (bytes, forged, key, body)
    }

    /// Sets the 4 bytes at `fix` so that the CRC-32 of `bytes[body]` is that of `original[body]` again (CRC-32 is linear:
    /// the register wanted after the 4 bytes is found by running the table backwards from the end).
    static func restoreCRC32(of bytes: inout [UInt8], body: Range<Int>, to original: [UInt8], fixingAt fix: Int) {
        var table = [UInt32](repeating: 0, count: 256)
        var byTopByte = [Int](repeating: 0, count: 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            table[i] = c
            byTopByte[Int(c >> 24)] = i
        }
        func step(_ register: UInt32, _ byte: UInt8) -> UInt32 { (register >> 8) ^ table[Int((register ^ UInt32(byte)) & 0xFF)] }
        var wanted: UInt32 = 0xFFFF_FFFF
        for byte in original[body] { wanted = step(wanted, byte) }
        // Backwards from the end to just after the 4 bytes.
        for byte in bytes[(fix + 4)..<body.upperBound].reversed() {
            let i = byTopByte[Int(wanted >> 24)]
            wanted = ((wanted ^ table[i]) << 8) | UInt32(UInt8(i) ^ byte)
        }
        // The table indexes the 4 bytes must pick, then the bytes that pick them from the register before them.
        var indexes = [Int](repeating: 0, count: 4)
        var register = wanted
        for k in (0..<4).reversed() {
            indexes[k] = byTopByte[Int(register >> 24)]
            register = (register ^ table[indexes[k]]) << 8
        }
        var before: UInt32 = 0xFFFF_FFFF
        for byte in bytes[body.lowerBound..<fix] { before = step(before, byte) }
        for k in 0..<4 {
            let byte = UInt8((before ^ UInt32(indexes[k])) & 0xFF)
            bytes[fix + k] = byte
            before = step(before, byte)
        }
    }

    @Test(
        "S4: a URL that claims a public bundle's digest and serves a body forged to its CRC-32 poisons no cache: refused, not kept; the genuine URL serves its own bytes"
    )
    func poisonedCacheAcrossURLs() async throws {
        let (genuine, forged, key, _) = try forgedRelease()
        let cache = try TemporaryFolder()
        let good = RangeServer(bytes: genuine)
        let evil = RangeServer(bytes: forged)
        try await withOrigin { origin in
            origin.route("/genuine.zip") { good.answer($0) }
            origin.route("/evil.zip") { evil.answer($0) }
            let remote = try RemoteBundleTests.remote(cache: cache.path, retries: 0)
            let hostile = try await MountedBundle.mount(.remote(origin.base + "/evil.zip", remote))
            let entry = try #require(hostile.entry(forKey: key))
            let error = await #expect(throws: BundleError.self) { try await offPool { try hostile.body(of: entry) } }
            #expect(error?.code == .corruptBody && error?.message.contains("do not match the index") == true, "\(String(describing: error))")
            #expect(!hostile.bodyIsLocal(try #require(entry.body).index), "the forged body was kept in the cache")
            // The genuine URL, mounted later on the same cache folder, fetches the body and serves it right.
            let bundle = try await MountedBundle.mount(.remote(origin.base + "/genuine.zip", try RemoteBundleTests.remote(cache: cache.path)))
            let read = try await offPool { try bundle.body(of: try #require(bundle.entry(forKey: key))) }
            let local = try TemporaryFolder()
            try Data(genuine).write(to: URL(fileURLWithPath: local.path + "/r.zip"))
            let file = try MountedBundle(path: local.path + "/r.zip")
            #expect(read == (try file.body(of: try #require(file.entry(forKey: key)))))
            #expect(!read.contains(Data("POISONED".utf8)))
        }
    }

    @Test("S4: an object swapped under the same size and ETag between two requests: the body fetched after is refused as not the index's, never served or kept")
    func swappedUnderTheSameETag() async throws {
        let (genuine, forged, key, _) = try forgedRelease()
        try await withRangeServer(genuine) { origin, server in
            let bundle = try await mount(origin)
            // From now on the server holds the forged object (same size, same ETag).
            server.bytes = forged
            let entry = try #require(bundle.entry(forKey: key))
            let error = await #expect(throws: BundleError.self) { try await offPool { try bundle.body(of: entry) } }
            #expect(error?.code == .corruptBody && error?.message.contains(origin.base + "/release.zip") == true, "\(String(describing: error))")
            #expect(error?.message.contains("secret") == false)
            #expect(!bundle.bodyIsLocal(try #require(entry.body).index))
            // A streamed read is refused too: before its reader is made, as the body is checked before it is sent.
            let response = try #require(OfflineLoader(bundles: [bundle]).response(for: BundleRequest(url: key)))
            await #expect(throws: BundleError.self) { try await offPool { try response.bodyReader()?.drain() } }
        }
    }

    @Test(
        "S5: a reply longer than asked is refused from its head, not read: the tail request answered with a whole 206, or a 200 under refusal or past the cache's bound"
    )
    func repliesBoundedByWhatWasAsked() async throws {
        let (_, bytes) = try release()
        // Each reply announces more than was asked (its Content-Length), sends 1,000 bytes and closes: a client that
        // reads on fails on the broken connection; one that looks at the head refuses at once, saying why.
        func stalling(_ status: Int, _ headers: [(String, String)]) -> Origin.Resource {
            var resource = Origin.Resource(status: status, headers: headers, body: bytes)
            resource.truncateAt = 1000
            return resource
        }
        let cases: [(Origin.Resource, RemoteOptions.WholeObjectAnswer, UInt64, String)] = [
            (stalling(206, [("Content-Range", "bytes 0-\(bytes.count - 1)/\(bytes.count)")]), .download, 1 << 30, "answered a request for its last"),
            (stalling(200, []), .refuse, 1 << 30, "does not serve ranges"),
            (stalling(200, []), .download, 64 << 10, "the cache cannot keep the object"),
        ]
        for (resource, whole, cacheBytes, words) in cases {
            try await withOrigin { origin in
                origin.set("/release.zip", resource)
                let remote = RemoteOptions(
                    transport: try HTTPClientRemoteTransport(connectTimeout: .seconds(5)), cacheBytes: cacheBytes, timeout: .seconds(10), retries: 0,
                    wholeObject: whole)
                let started = ContinuousClock.now
                let error = await #expect(throws: BundleError.self) { try await MountedBundle.mount(.remote(origin.base + "/release.zip", remote)) }
                #expect(error?.message.contains(words) == true, "\(String(describing: error))")
                #expect(ContinuousClock.now - started < .seconds(10), "\(ContinuousClock.now - started)")
            }
        }
    }

    @Test("S5: the transport stops reading a chunked body that runs past what the request takes, and says so")
    func transportStopsPastTheLimit() async throws {
        try await withOrigin { origin in
            var endless = Origin.Resource(status: 200)
            endless.endless = true
            origin.set("/endless", endless)
            let transport = try HTTPClientRemoteTransport(connectTimeout: .seconds(5))
            let request = RemoteRequest(
                method: "GET", url: origin.base + "/endless", headers: [:], timeout: .seconds(20), maxBodyBytes: 1 << 30, bodyLimit: { _, _ in 100_000 })
            let started = ContinuousClock.now
            let outcome = try await offPool { try transport.sendWaiting(request).get() }
            #expect(outcome.status == 200 && outcome.overLimit && outcome.body.isEmpty)
            #expect(ContinuousClock.now - started < .seconds(15))
            try await transport.shutdown()
        }
    }
}

/// Passes requests to AsyncHTTPClient's transport, and remembers the longest body a reply held in memory.
final class MemoryWatch: RemoteTransport {
    let inner: HTTPClientRemoteTransport
    private let longest = Mutex(0)
    init() throws { inner = try HTTPClientRemoteTransport(connectTimeout: .seconds(5)) }
    var largestBody: Int { longest.withLock { $0 } }
    func send(_ request: RemoteRequest, completion: @escaping @Sendable (Result<RemoteReply, any Error>) -> Void) {
        inner.send(request) { outcome in
            if case .success(let reply) = outcome { self.longest.withLock { $0 = max($0, reply.body.count) } }
            completion(outcome)
        }
    }
}

/// A reply's body is never held in memory past a range asked for: an object sent whole goes to a file as it comes
/// (security review 3, S5, re-run); `check` of a URL verifies what the URL serves now, not what a cache holds.
extension RemoteBundleFaultTests {
    @Test(
        "S5: an object sent whole (200) is streamed to a file, not held in memory, at the mount and after it, with a cache folder and without; every body reads right"
    )
    func wholeObjectStreamed() async throws {
        let (folder, bytes) = try release()
        let local = try MountedBundle(path: folder.path + "/release.zip")
        // Whole from the first request; or ranges for the mount's two requests, then the whole object.
        for rangesFirst in [0, 2] {
            for cache in [nil, folder.path + "/cache-\(rangesFirst)"] {
                try await withRangeServer(bytes) { origin, server in
                    route(origin) { request in
                        guard server.requests >= rangesFirst else { return server.answer(request) }
                        var stripped = request
                        stripped.headers["range"] = nil
                        return server.answer(stripped)
                    }
                    let watch = try MemoryWatch()
                    let remote = RemoteOptions(transport: watch, cacheDirectory: cache, timeout: .seconds(10), retries: 0)
                    let bundle = try await MountedBundle.mount(.remote(origin.base + "/release.zip", remote))
                    try await offPool { try RemoteBundleTests.expectSameBodies(bundle, local) }
                    // The replies held in memory are the ranges asked for (the tail, the index); never the whole object.
                    let index = try #require(local.metadata["index.bin"]).compressedSize
                    #expect(
                        watch.largestBody <= max(MountedBundle.remoteTailBytes, Int(index) + 256) && watch.largestBody < bytes.count / 2,
                        "a reply held \(watch.largestBody) bytes in memory (ranges first: \(rangesFirst), cache: \(cache != nil))")
                    try await watch.inner.shutdown()
                }
            }
        }
    }

    @Test(
        "check of a URL with a warm cache verifies what the URL serves now: a forged copy under the genuine ETag fails, and so does a URL that answers 404 (or 304 to a HEAD)"
    )
    func checkReadsTheURL() async throws {
        let (genuine, forged, key, _) = try forgedRelease()
        let cache = try TemporaryFolder()
        try await withRangeServer(genuine) { origin, server in
            let url = origin.base + "/release.zip"
            let remote = try RemoteBundleTests.remote(cache: cache.path, retries: 0)
            let first = try await offPool { Checker.check(path: url, remote: remote) }
            #expect(first.issues.isEmpty && first.bytesVerified > 0, "\(first.issues)")
            // The same URL, the same ETag, a body forged to its CRC-32: the cache is warm with the genuine bytes.
            server.bytes = forged
            let swapped = try await offPool { Checker.check(path: url, remote: remote) }
            #expect(swapped.issues.contains { $0.message.contains("do not match the index") }, "check of a URL that serves a forged \(key): \(swapped.issues)")
            // Nothing there now (a HEAD answered 304 as to the pinned ETag, every GET 404).
            route(origin) { request in request.method == "HEAD" ? Origin.Resource(status: 304) : Origin.Resource(status: 404) }
            let gone = try await offPool { Checker.check(path: url, remote: remote) }
            #expect(gone.issues.contains { $0.message.contains("404") }, "\(gone.issues)")
        }
    }
}

/// The cache folder: files made without following links, owner-only; a folder others may write to refused (security
/// review 3, S6; the pin of S11).
extension RemoteBundleFaultTests {
    static func mode(_ path: String) -> Int {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_mode & 0o7777) : -1
    }

    @Test(
        "S6: a link planted where a cache file goes is refused, its target untouched; the folder is made 0700, its files and the pin 0600, and the pin names no secret"
    )
    func cacheFolderLinksAndModes() async throws {
        let (folder, bytes) = try release()
        let local = try MountedBundle(path: folder.path + "/release.zip")
        let cache = folder.path + "/cache"
        try await withRangeServer(bytes) { origin, _ in
            let victim = folder.path + "/victim.conf"
            try Data("IMPORTANT CONFIG\n".utf8).write(to: URL(fileURLWithPath: victim))
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            let base = cache + "/\(local.digest)-\(bytes.count)"
            try FileManager.default.createSymbolicLink(atPath: base + ".data", withDestinationPath: victim)
            let remote = try RemoteBundleTests.remote(cache: cache, retries: 0)
            let url = origin.base.replacingOccurrences(of: "http://", with: "http://alice:PASSWORD-SECRET@") + "/release.zip?X-Signature=secret"
            let refused = await #expect(throws: BundleError.self) { try await MountedBundle.mount(.remote(url, remote)) }
            #expect(refused?.message.contains("symbolic link") == true, "\(String(describing: refused))")
            #expect(refused?.message.contains("PASSWORD-SECRET") == false && refused?.message.contains("secret") == false)
            #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("IMPORTANT CONFIG\n".utf8), "the link was followed")
            try FileManager.default.removeItem(atPath: base + ".data")
            // A link where the log goes, beside a data file of the bundle's size (so that the log is not made anew).
            #expect(FileManager.default.createFile(atPath: base + ".data", contents: nil, attributes: [.posixPermissions: 0o600]))
            #expect(truncate(base + ".data", off_t(bytes.count)) == 0)
            try FileManager.default.createSymbolicLink(atPath: base + ".ranges", withDestinationPath: victim)
            let log = await #expect(throws: BundleError.self) { try await MountedBundle.mount(.remote(url, remote)) }
            #expect(log?.message.contains("symbolic link") == true, "\(String(describing: log))")
            #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("IMPORTANT CONFIG\n".utf8), "the link was followed")
            try FileManager.default.removeItem(atPath: base + ".ranges")
            try FileManager.default.removeItem(atPath: base + ".data")
            // A link where the list of the bundle's bodies goes (what the next release borrows by): not written through.
            try FileManager.default.createSymbolicLink(atPath: base + ".bodies", withDestinationPath: victim)
            let listed = try await MountedBundle.mount(.remote(url, remote))
            #expect(listed.entryCount == local.entryCount)
            #expect(try Data(contentsOf: URL(fileURLWithPath: victim)) == Data("IMPORTANT CONFIG\n".utf8), "the link was followed")
            try FileManager.default.removeItem(atPath: base + ".bodies")

            // A folder the mount makes: 0700; what it writes there: 0600; the pin holds the URL without its secrets.
            let fresh = folder.path + "/fresh/remote"
            let bundle = try await MountedBundle.mount(.remote(url, try RemoteBundleTests.remote(cache: fresh, retries: 0)))
            #expect(bundle.entryCount == local.entryCount)
            #expect(Self.mode(fresh) == 0o700)
            let names = try FileManager.default.contentsOfDirectory(atPath: fresh)
            #expect(names.count == 4, "\(names)")
            for name in names { #expect(Self.mode(fresh + "/" + name) == 0o600, "\(name): \(String(Self.mode(fresh + "/" + name), radix: 8))") }
            let pin = try String(contentsOfFile: fresh + "/" + (try #require(names.first { $0.hasSuffix(".pin") })), encoding: .utf8)
            #expect(!pin.contains("PASSWORD-SECRET") && !pin.contains("secret") && pin.contains("127.0.0.1"), "\(pin)")
        }
    }

    @Test("S6: a cache folder that others may write to, or that another user owns, is refused in words")
    func cacheFolderOthersMayWrite() async throws {
        let (folder, bytes) = try release()
        try await withRangeServer(bytes) { origin, _ in
            let shared = folder.path + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
            chmod(shared, 0o777)
            let error = await #expect(throws: BundleError.self) {
                try await MountedBundle.mount(.remote(origin.base + "/release.zip", try RemoteBundleTests.remote(cache: shared, retries: 0)))
            }
            #expect(error?.message.contains("may be written by other users") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: shared).isEmpty, "files were made in it")
            // Another user's folder (only root can make one to test with).
            guard getuid() == 0 else { return }
            let theirs = folder.path + "/theirs"
            try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
            #expect(chown(theirs, 65534, 65534) == 0)
            let owned = await #expect(throws: BundleError.self) {
                try await MountedBundle.mount(.remote(origin.base + "/release.zip", try RemoteBundleTests.remote(cache: theirs, retries: 0)))
            }
            #expect(owned?.message.contains("belongs to another user") == true, "\(String(describing: owned))")
        }
    }
}
