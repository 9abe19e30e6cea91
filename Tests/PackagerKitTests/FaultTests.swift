import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Servers that misbehave while a crawl or a verify runs: every stored body must be whole and correct,
/// and every fault that outlasts the retries must be reported, never stored as if it were whole.
@Suite("faults while crawling and verifying")
struct FaultTests {
    /// 20 KiB of text whose every byte matters (a digest catches any cut).
    static func page(_ name: String) -> [UInt8] {
        Array((0..<400).map { "\(name) line \($0) ........................................\n" }.joined().utf8)
    }

    static func resource(_ name: String, _ configure: (inout Origin.Resource) -> Void = { _ in }) -> Origin.Resource {
        var resource = Origin.Resource(status: 200, headers: [("Content-Type", "text/plain")], body: page(name))
        configure(&resource)
        return resource
    }

    /// Paths whose fault lasts for one request only (a retry gets the whole body), and paths whose fault never ends.
    static let transient = ["/cut-once", "/drop-once", "/stall-once", "/busy"]
    static let permanent = ["/cut-always", "/drop-always", "/stall-always", "/endless", "/down"]

    static func serveFaults(_ origin: Origin) {
        let links = (transient + permanent + ["/loop-a"]).map { "<a href=\"\($0)\">\($0)</a>" }.joined()
        origin.set("/", .text("<!doctype html><title>faults</title>\(links)", type: "text/html"))
        origin.set(
            "/cut-once",
            resource("cut-once") {
                $0.truncateAt = 5000
                $0.faultyRequests = 1
            })
        origin.set("/cut-always", resource("cut-always") { $0.truncateAt = 5000 })
        origin.set(
            "/drop-once",
            resource("drop-once") {
                $0.dropAfter = 7000
                $0.faultyRequests = 1
            })
        origin.set("/drop-always", resource("drop-always") { $0.dropAfter = 7000 })
        origin.set(
            "/stall-once",
            resource("stall-once") {
                $0.stallAfter = 3000
                $0.stallSeconds = 8
                $0.faultyRequests = 1
            })
        origin.set(
            "/stall-always",
            resource("stall-always") {
                $0.stallAfter = 3000
                $0.stallSeconds = 8
            })
        origin.set("/endless", resource("endless") { $0.endless = true })
        origin.set(
            "/busy",
            resource("busy") {
                $0.failures = 2
                $0.retryAfter = "0"
            })
        origin.set("/down", resource("down") { $0.failures = 1000 })
        origin.set("/loop-a", .redirect("/loop-b"))
        origin.set("/loop-b", .redirect("/loop-a"))
    }

    @Test("a crawl through dropped connections, short bodies, stalls, 503 bursts, a redirect loop and an endless page stores only whole bodies")
    func crawlThroughFaults() async throws {
        try await withOrigin { origin in
            Self.serveFaults(origin)
            let folder = try TemporaryFolder()
            var declaration = Declaration()
            declaration.seeds = [origin.base + "/"]
            declaration.respectRobots = false
            declaration.retries.attempts = 2
            declaration.retries.backoff = 0.05
            // 4 s: the whole suite runs in parallel on two cores, where a request that takes milliseconds alone was
            // seen to take over 2 s (a stall-once retried three times into timeouts); the stalls last 8 s.
            declaration.timeouts.request = 4
            declaration.scope.maxBytes = 8 << 20
            let output = folder.path + "/faults.zip"
            let report = try await Builder(declaration: declaration, options: .init(output: output, maxErrors: 100)).run()
            #expect(report.succeeded)

            let failures = Dictionary(uniqueKeysWithValues: report.failures.map { ($0.url.replacingOccurrences(of: origin.base, with: ""), $0) })
            #expect(Set(failures.keys) == Set(Self.permanent + ["/loop-a"]), "\(failures.mapValues(\.reason).sorted { $0.key < $1.key })")
            for path in ["/cut-always", "/drop-always", "/stall-always", "/down"] {
                #expect(failures[path]?.attempts == 3, "\(path): \(failures[path]?.reason ?? "-")")
            }
            #expect(failures["/stall-always"]?.reason.contains("timed out") == true, "\(failures["/stall-always"]?.reason ?? "-")")
            // Endless: stopped by the byte limit, or on a starved machine by the 4 s request timeout first; either way it is
            // not stored (checked below). The byte limit alone is tested in endlessBodyHitsByteLimit.
            let endless = failures["/endless"]?.reason ?? "-"
            #expect(endless.contains("byte limit") || endless.contains("timed out"), "\(endless)")
            #expect(failures["/down"]?.reason == "HTTP 503")
            #expect(failures["/loop-a"]?.reason.contains("redirect loop") == true)

            // Every transient fault was retried into a whole body; nothing permanent was stored.
            let bundle = try MountedBundle(path: output, options: .init(verification: .sha256))
            for path in Self.transient {
                let entry = try #require(bundle.entry(for: origin.base + path), "\(path) missing")
                #expect(try Array(bundle.body(of: entry)) == Self.page(String(path.dropFirst())), "\(path) differs from what the origin serves")
            }
            for path in Self.permanent { #expect(bundle.entry(for: origin.base + path) == nil, "\(path) was stored") }
            // Cut or dropped once, then whole: two requests, or three where a loaded machine (a full parallel run took
            // 156 s here) let the second outlast the 4 s request timeout. Their bodies are whole either way (above).
            #expect((2...3).contains(origin.count("/cut-once")), "\(origin.count("/cut-once")) requests")
            #expect((2...3).contains(origin.count("/drop-once")), "\(origin.count("/drop-once")) requests")
            // The stall outlasts the 4 s request timeout once; on a loaded machine the retry can time out too, so it is
            // retried at least once and within the 3 attempts (its whole body was stored: checked above).
            #expect((2...3).contains(origin.count("/stall-once")), "\(origin.count("/stall-once")) requests")
            #expect(origin.count("/busy") == 3)
            #expect(Checker.check(path: output).issues.isEmpty)
            #expect(try folder.contents() == ["faults.zip"])
        }
    }

    @Test("an endless body ends at the crawl's byte limit, is reported as such, and is not stored")
    func endlessBodyHitsByteLimit() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("<a href=\"/endless\">endless</a>", type: "text/html"))
            origin.set("/endless", Self.resource("endless") { $0.endless = true })
            let folder = try TemporaryFolder()
            var declaration = Declaration()
            declaration.seeds = [origin.base + "/"]
            declaration.respectRobots = false
            declaration.retries.attempts = 0
            declaration.timeouts.request = 30
            declaration.scope.maxBytes = 1 << 20
            let output = folder.path + "/endless.zip"
            let report = try await Builder(declaration: declaration, options: .init(output: output, maxErrors: 10)).run()
            #expect(report.succeeded)
            #expect(report.failures.map(\.url) == [origin.base + "/endless"])
            #expect(report.failures.first?.reason.contains("byte limit") == true, "\(report.failures.first?.reason ?? "-")")
            #expect(try MountedBundle(path: output).entry(for: origin.base + "/endless") == nil)
        }
    }

    @Test("verify --deep: bodies cut short or stalled are unreachable, never stale; transient faults end fresh")
    func verifyThroughFaults() async throws {
        try await withOrigin { origin in
            // A bundle recorded from a healthy origin...
            let folder = try TemporaryFolder()
            var writer = BundleWriter()
            let paths = Self.transient + ["/cut-always", "/drop-always", "/stall-always", "/down"]
            for path in paths {
                writer.add(.init(url: origin.base + path, headers: [("content-type", "text/plain")], body: .data(Data(Self.page(String(path.dropFirst()))))))
            }
            try writer.write(to: folder.path + "/b.zip")
            // ...checked against the same content served with faults.
            Self.serveFaults(origin)
            var options = Verifier.Options()
            options.allowPrivateAddresses = true
            options.deep = true
            options.retries.attempts = 2
            options.retries.backoff = 0.05
            options.timeouts.request = 4
            let report = try await Verifier(options: options).verify(bundleAt: folder.path + "/b.zip")
            let verdicts = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.url.replacingOccurrences(of: origin.base, with: ""), $0) })
            for path in Self.transient { #expect(verdicts[path]?.verdict == .fresh, "\(path): \(String(describing: verdicts[path]))") }
            for path in ["/cut-always", "/drop-always", "/stall-always", "/down"] {
                #expect(verdicts[path]?.verdict == .unreachable, "\(path): \(String(describing: verdicts[path]))")
            }
            #expect(report.exitCode == 2)

            // One at a time, a connection dropped mid-answer does not make the host count as unreachable: the next entry is still asked.
            var serial = options
            serial.concurrency = 1
            serial.perHost = 1
            let ordered = try TemporaryFolder()
            var one = BundleWriter()
            for path in ["/drop-always", "/stall-once"] {
                one.add(.init(url: origin.base + path, headers: [("content-type", "text/plain")], body: .data(Data(Self.page(String(path.dropFirst()))))))
            }
            try one.write(to: ordered.path + "/b.zip")
            let serialReport = try await Verifier(options: serial).verify(bundleAt: ordered.path + "/b.zip")
            let byPath = Dictionary(uniqueKeysWithValues: serialReport.entries.map { ($0.url.replacingOccurrences(of: origin.base, with: ""), $0) })
            #expect(byPath["/drop-always"]?.verdict == .unreachable)
            #expect(byPath["/stall-once"]?.verdict == .fresh, "\(String(describing: byPath["/stall-once"]))")
        }
    }
}
