import Foundation
import TestSupport
import Testing

@testable import PackagerKit

/// The crawl's queue keeps a few jobs per host in memory and the rest in a scratch file.
@Suite("the crawl's queue, beyond memory")
struct FrontierTests {
    static func job(_ i: Int, host: String = "docs.example") -> Frontier.Job {
        Frontier.Job(
            url: "https://\(host)/päge/\(i).html?x=\(i)", key: "https://\(host)/p%C3%A4ge/\(i).html?x=\(i)", host: host,
            role: [CrawlScope.Role.seed, .declared, .requisite, .link, .sitemap][i % 5], depth: i % 7,
            referrer: i % 3 == 0 ? nil : "https://\(host)/from/\(i / 10)",
            redirectChain: (0..<(i % 4)).map { "https://\(host)/hop/\(i)/\($0)" }, declared: i % 2 == 0)
    }

    static func same(_ a: Frontier.Job, _ b: Frontier.Job) -> Bool {
        a.url == b.url && a.key == b.key && a.host == b.host && a.role == b.role && a.depth == b.depth && a.referrer == b.referrer
            && a.redirectChain == b.redirectChain && a.declared == b.declared
    }

    @Test("jobs beyond the few kept in memory come back from the file whole and in order, pushes and pops interleaved")
    func spillsInOrder() throws {
        let folder = try TemporaryFolder()
        var queue = JobQueue(path: folder.path + "/queue", memoryLimit: 3)
        var expected = [Frontier.Job]()
        var taken = [Frontier.Job]()
        var next = 0
        // 70,000 jobs: more than one read of the file (256 KiB) and more than one write (64 KiB), taken a few at a time.
        for round in 0..<7_000 {
            for _ in 0..<(round % 3 == 0 ? 14 : 9) where next < 70_000 {
                let job = Self.job(next)
                expected.append(job)
                queue.push(job)
                next += 1
            }
            for _ in 0..<(round % 2 == 0 ? 7 : 12) { if let job = queue.pop() { taken.append(job) } }
        }
        while let job = queue.pop() { taken.append(job) }
        #expect(taken.count == expected.count && queue.count == 0 && queue.lost == 0)
        let difference = taken.indices.first { !Self.same(taken[$0], expected[$0]) }
        #expect(difference == nil, "first difference at \(difference ?? -1)")
        // Drained, the queue let its file go.
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/queue"))
    }

    @Test("a job longer than one read of the file (a redirect chain of long URLs) comes back whole, between short ones")
    func longRecord() throws {
        let folder = try TemporaryFolder()
        var queue = JobQueue(path: folder.path + "/queue", memoryLimit: 1)
        var long = Self.job(1)
        long.redirectChain = (0..<10).map { "https://docs.example/" + String(repeating: "%5B", count: 12_000) + "/\($0)" }
        let jobs = [Self.job(0), long] + (2..<2_000).map { Self.job($0) }
        for job in jobs { queue.push(job) }
        var taken = [Frontier.Job]()
        while let job = queue.pop() { taken.append(job) }
        #expect(queue.lost == 0 && taken.count == jobs.count)
        #expect(taken.indices.allSatisfy { Self.same(taken[$0], jobs[$0]) })
    }

    @Test("a damaged queue file loses its jobs, counted, and never crashes or invents one")
    func damagedFile() throws {
        let folder = try TemporaryFolder()
        var queue = JobQueue(path: folder.path + "/queue", memoryLimit: 2)
        for i in 0..<20_000 { queue.push(Self.job(i)) }
        // Past what is kept in memory, the records are written 64 KiB at a time; spoil the first one in the file.
        let handle = try #require(FileHandle(forUpdatingAtPath: folder.path + "/queue"))
        try handle.write(contentsOf: Data([0xFF, 0xFF, 0xFF, 0x7F]))
        try handle.close()
        var taken = [Frontier.Job]()
        while let job = queue.pop() { taken.append(job) }
        #expect(taken.count == 2 && Self.same(taken[0], Self.job(0)) && Self.same(taken[1], Self.job(1)))
        #expect(queue.lost == 19_998 && queue.count == 0)
    }

    @Test("a frontier that keeps 2 jobs per host in memory hands out the same jobs, host by host in turn, as one that keeps all")
    func frontierSpills() async throws {
        let folder = try TemporaryFolder()
        let scratch = try ScratchFolder(in: folder.path)
        defer { scratch.remove() }
        func order(_ frontier: Frontier) async -> [String] {
            for i in 0..<3_000 {
                let job = Self.job(i, host: ["a.example", "b.example", "c.example"][i % 7 % 3])
                #expect(await frontier.claim(job.key))
                await frontier.enqueue(job)
            }
            #expect(await !frontier.claim(Self.job(5, host: "c.example").key))
            var keys = [String]()
            while let job = await frontier.next() {
                keys.append(job.key)
                await frontier.finish(job)
            }
            return keys
        }
        let kept = await order(Frontier(perHost: 1))
        let spilled = await order(Frontier(perHost: 1, spill: scratch, jobsInMemory: 2))
        #expect(kept.count == 3_000 && spilled == kept)
        // Each host's file is gone once the crawl is done.
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.hasPrefix("queue-") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("a frontier whose queue file is damaged still ends, and counts the jobs it lost")
    func frontierLoses() async throws {
        let folder = try TemporaryFolder()
        let scratch = try ScratchFolder(in: folder.path)
        defer { scratch.remove() }
        let frontier = Frontier(perHost: 1, spill: scratch, jobsInMemory: 2)
        for i in 0..<3_000 {
            let job = Self.job(i)
            _ = await frontier.claim(job.key)
            await frontier.enqueue(job)
        }
        let handle = try #require(FileHandle(forUpdatingAtPath: scratch.path(for: "queue-0")))
        try handle.write(contentsOf: Data([0xFF, 0xFF, 0xFF, 0x7F]))
        try handle.close()
        // Drained apart, so that a frontier that never ends fails the test instead of hanging it.
        let drain = Task {
            var handed = 0
            while let job = await frontier.next() {
                handed += 1
                await frontier.finish(job)
            }
            return handed
        }
        // 60 s: draining takes milliseconds, but a loaded full run once starved the drain past 20 s.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, await frontier.queued > 0 { try await Task.sleep(for: .milliseconds(20)) }
        guard await frontier.queued == 0 else {
            Issue.record("the frontier still counts \(await frontier.queued) jobs queued that it cannot hand out")
            return
        }
        let handed = await drain.value
        let lost = await frontier.lost
        #expect(handed == 2 && lost == 2_998)
    }
}
