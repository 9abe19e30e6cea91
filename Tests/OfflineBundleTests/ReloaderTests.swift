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

    @Test(
        "one configuration value: two bundles in order and a rules file make the loader, mounted off the pool; its reloader watches every file it reads and takes a replaced one; a bundle mounted already is refused; a missing file is named"
    )
    func configuration() async throws {
        let folder = try TemporaryFolder()
        try writeBundle(
            ["https://docs.example.com/page.txt": Data("hotfix".utf8), "https://docs.example.com/blocked.txt": Data("x".utf8)], to: folder.path + "/hotfix.zip")
        try writeBundle(
            ["https://docs.example.com/page.txt": Data("release".utf8), "https://docs.example.com/other.txt": Data("other".utf8)],
            to: folder.path + "/release.zip")
        try folder.file("rules.yml", "block: [\"*/blocked.txt\"]\n")
        let configuration = OfflineLoader.Configuration(
            [.file(folder.path + "/hotfix.zip"), .file(folder.path + "/release.zip")], rulesFile: folder.path + "/rules.yml")
        #expect(configuration.sources == [folder.path + "/hotfix.zip", folder.path + "/release.zip"])
        let loader = try await OfflineLoader.mount(configuration)
        func text(_ loader: OfflineLoader, _ path: String) throws -> String? {
            try loader.response(for: BundleRequest(url: "https://docs.example.com" + path)).map { String(decoding: try $0.bodyData(), as: UTF8.self) }
        }
        #expect(try text(loader, "/page.txt") == "hotfix" && text(loader, "/other.txt") == "other")
        #expect(loader.response(for: BundleRequest(url: "https://docs.example.com/blocked.txt"))?.source == .rule)

        // The reloader mounts the same and takes the second file replaced.
        let reloader = try BundleReloader(configuration, interval: .seconds(0.05), signals: [], logger: Self.quiet)
        #expect(try text(reloader.loader, "/other.txt") == "other")
        let running = Task { try await reloader.run() }
        try writeBundle(["https://docs.example.com/other.txt": Data("next".utf8)], to: folder.path + "/next.zip")
        #expect(rename(folder.path + "/next.zip", folder.path + "/release.zip") == 0)
        try await waitFor { try text(reloader.loader, "/other.txt") == "next" }
        running.cancel()
        _ = try? await running.value
        #expect(try text(reloader.loader, "/other.txt") == "next" && text(reloader.loader, "/page.txt") == "hotfix")
        #expect(reloader.loader.response(for: BundleRequest(url: "https://docs.example.com/blocked.txt"))?.source == .rule)

        // A bundle mounted already cannot be mounted again by a reload: refused, not reloaded as it is forever.
        let held = try await MountedBundle.mount(.file(folder.path + "/hotfix.zip"))
        #expect { _ = try BundleReloader(OfflineLoader.Configuration([.mounted(held)])) } throws: { ($0 as? BundleError)?.code == .invalidArgument }
        // A missing file fails the mount, naming it.
        let missing = OfflineLoader.Configuration([.file(folder.path + "/absent.zip")])
        await #expect { _ = try await OfflineLoader.mount(missing) } throws: { "\($0)".contains("absent.zip") }
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
