import Foundation
import HTTPTypes
import OfflineBundle
import OfflineBundleHummingbird
import TestSupport
import Testing

@Suite("OfflineBundleChannelServer: the middleware's answers from a SwiftNIO handler")
struct ChannelServerTests {
    @Test("answers from the loader, records what answered, and closes a connection that stays quiet past the idle timeout")
    func answersAndClosesIdleConnections() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let records = ServedLog()
        let server = try await OfflineBundleChannelServer.start(
            handle: LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip")), routes: [.init(origin: "https://docs.example.com")],
            idleTimeout: .milliseconds(500), served: { records.add($0) })
        let base = "http://127.0.0.1:\(server.port)"
        let page = try await run("curl", ["-s", base + "/"])
        #expect(page.output == samplePage)
        #expect(records.all.map { "\($0.method) \($0.target) \($0.status) \($0.source.map { "\($0)" } ?? "-")" } == ["GET / 200 b.zip"])
        // A connection that sends nothing is closed by the server: the client reads the end of the stream, well before
        // its own 10-second timeout.
        let script = """
            import socket, sys, time
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
            start = time.time()
            data = s.recv(1024)
            print(len(data), round(time.time() - start, 1))
            """
        try folder.file("idle.py", script)
        let idle = try await run("python3", [folder.path + "/idle.py", String(server.port)])
        let fields = idle.output.split(separator: " ").map { String($0) }
        #expect(fields.first == "0", "\(idle.output)")
        #expect(fields.count == 2 && (Double(fields[1].trimmingCharacters(in: .whitespacesAndNewlines)) ?? 99) < 5, "\(idle.output)")
        await server.stop()
    }
}

extension ChannelServerTests {
    @Test("with a last-seen cache in the loader, answers are not kept: what the network gave later takes the bundle's place")
    func lastSeenIsNotShadowedByKeptAnswers() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let seen = try LastSeenCache(directory: folder.path + "/seen", maxBytes: 1 << 20)
        let loader = try OfflineLoader(path: folder.path + "/b.zip", options: LoaderOptions(lastSeen: seen))
        let server = try await OfflineBundleChannelServer.start(handle: LoaderHandle(loader), routes: [.init(origin: "https://docs.example.com")])
        let base = "http://127.0.0.1:\(server.port)"
        for _ in 0..<2 { #expect(try await run("curl", ["-s", base + "/"]).output == samplePage) }
        #expect(loader.remember(BundleRequest(url: "https://docs.example.com/"), status: 200, headers: [.contentType: "text/plain"], body: Data("fresh".utf8)))
        #expect(try await run("curl", ["-s", base + "/"]).output == "fresh")
        await server.stop()
    }
}

/// What the server reported, from its event loop threads.
final class ServedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [ServedRequest] = []
    func add(_ record: ServedRequest) { lock.withLock { records.append(record) } }
    var all: [ServedRequest] { lock.withLock { records } }
}
