import Foundation
import Logging
import OfflineBundle
import Synchronization
import TestSupport
import Testing
import UnixSignals

@Suite("BundleReloader: the service that mounts the next release and swaps it in")
struct ReloaderTests {
    /// A bundle at `path` whose `/page.txt` says `text`.
    func release(_ text: String, at path: String) throws {
        try writeBundle(["https://docs.example.com/page.txt": Data(text.utf8)], to: path)
    }

    /// The page as the loader answering now gives it; nil when its bundle refuses the body (a file written in place
    /// under a mounted bundle: the old loader's checks refuse what changed).
    func page(_ reloader: BundleReloader) throws -> String? {
        guard let response = reloader.loader.response(for: BundleRequest(url: "https://docs.example.com/page.txt")),
            let body = try? response.bodyData()
        else { return nil }
        return String(decoding: body, as: UTF8.self)
    }

    /// A logger that says nothing: the tests read the reloader's events and counts.
    static let quiet: Logger = {
        var logger = Logger(label: "reloader")
        logger.logLevel = .critical
        return logger
    }()

    /// Waits up to 10 s for `done`.
    func waitFor(_ done: () throws -> Bool) async throws {
        for _ in 0..<200 where try !done() { try await Task.sleep(for: .milliseconds(50)) }
    }

    @Test("while it runs: a release renamed over the file is mounted; a broken one is refused, said why, kept out, and not retried until it changes")
    func watchesFiles() async throws {
        let folder = try TemporaryFolder()
        let served = folder.path + "/served.zip"
        try release("one", at: served)
        let events = Mutex<[String]>([])
        let reloader = try BundleReloader(paths: [served], interval: .seconds(0.05), signals: [], logger: Self.quiet) { event in
            events.withLock { $0.append("\(event)") }
        }
        #expect(try page(reloader) == "one")
        let running = Task { try await reloader.run() }
        defer { running.cancel() }
        // Written beside, renamed over: a new inode.
        try release("two", at: folder.path + "/next.zip")
        #expect(rename(folder.path + "/next.zip", served) == 0)
        try await waitFor { try page(reloader) == "two" }
        #expect(try page(reloader) == "two")
        #expect(reloader.counts == .init(reloaded: 1, failed: 0))
        // Not a bundle: refused, the loader answering stays, and the same file is not tried again and again.
        try folder.file("junk.zip", "not a bundle")
        #expect(rename(folder.path + "/junk.zip", served) == 0)
        try await waitFor { reloader.counts.failed == 1 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(reloader.counts == .init(reloaded: 1, failed: 1))
        #expect(try page(reloader) == "two")
        #expect(events.withLock { $0.last ?? "" }.hasPrefix("not reloaded (a bundle file changed): "))
        // Written in place with the same size and its modification time set back: the status-change time still tells.
        try release("six", at: folder.path + "/three.zip")
        #expect(rename(folder.path + "/three.zip", served) == 0)
        try await waitFor { try page(reloader) == "six" }
        let before = try FileManager.default.attributesOfItem(atPath: served)[.modificationDate] as! Date
        let size = try Data(contentsOf: URL(fileURLWithPath: served)).count
        // A release of the same size (index.bin is deflated, so a three-letter page does not always make one).
        var word = ""
        var replacement = Data()
        for candidate in ["ten", "tea", "tan", "toe", "zen", "abc", "xyz", "one", "sun", "fig"] {
            try release(candidate, at: folder.path + "/ten.zip")
            replacement = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/ten.zip"))
            if replacement.count == size {
                word = candidate
                break
            }
        }
        #expect(replacement.count == size)
        let handle = try #require(FileHandle(forWritingAtPath: served))
        handle.write(replacement)
        try handle.close()
        try FileManager.default.setAttributes([.modificationDate: before], ofItemAtPath: served)
        try await waitFor { try page(reloader) == word }
        #expect(try page(reloader) == word)
        #expect(reloader.counts == .init(reloaded: 3, failed: 1))
    }

    @Test("SIGHUP asks for a reload while it runs; the first mount failing throws, naming the file")
    func signals() async throws {
        let folder = try TemporaryFolder()
        let served = folder.path + "/served.zip"
        #expect(throws: BundleError.self) { _ = try BundleReloader(paths: [served], signals: [], logger: Self.quiet) }
        try release("one", at: served)
        // Until the reloader's signal source is up, SIGHUP must not end the test process.
        signal(SIGHUP, SIG_IGN)
        let reloader = try BundleReloader(paths: [served], interval: .zero, signals: [.sighup], logger: Self.quiet)
        let running = Task { try await reloader.run() }
        defer { running.cancel() }
        try release("two", at: folder.path + "/next.zip")
        #expect(rename(folder.path + "/next.zip", served) == 0)
        // Polling is off: only the signal can bring the new release in.
        try await Task.sleep(for: .milliseconds(200))
        #expect(try page(reloader) == "one")
        // Sent again until the signal source is up (it starts with run()), then no more.
        for _ in 0..<50 where try page(reloader) != "two" {
            kill(getpid(), SIGHUP)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(try page(reloader) == "two")
        #expect(reloader.counts.reloaded >= 1 && reloader.counts.failed == 0)
    }

    @Test("requests that started on the old loader finish on it: its bundle stays open after the file is replaced and the swap")
    func inFlight() async throws {
        let folder = try TemporaryFolder()
        let served = folder.path + "/served.zip"
        let big = noise(2 << 20, seed: 51)
        try writeBundle(["https://docs.example.com/big.bin": big], to: served)
        let reloader = try BundleReloader(paths: [served], interval: .zero, signals: [], logger: Self.quiet)
        let old = try #require(reloader.loader.response(for: BundleRequest(url: "https://docs.example.com/big.bin")))
        let reader = try #require(try old.bodyReader(chunkSize: 64 << 10))
        var read = Data(try #require(try reader.next()))
        try writeBundle(["https://docs.example.com/big.bin": Data("new".utf8)], to: folder.path + "/next.zip")
        #expect(rename(folder.path + "/next.zip", served) == 0)
        reloader.reload(because: "test")
        #expect(try reloader.loader.response(for: BundleRequest(url: "https://docs.example.com/big.bin"))?.bodyData() == Data("new".utf8))
        while let chunk = try reader.next() { read.append(chunk) }
        #expect(read == big)
    }
}
