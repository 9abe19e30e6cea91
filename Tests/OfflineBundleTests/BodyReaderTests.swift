import Crypto
import Foundation
import TestSupport
import Testing

@testable import OfflineBundle
@testable import PackagerKit

@Suite("bodies streamed from the bundle, checked once")
struct BodyReaderTests {
    /// A bundle with a deflated text body of several chunks and a stored 1 MiB body.
    func bundle(in folder: TemporaryFolder) throws -> (path: String, text: Data, noise: Data) {
        let text = Data((0..<12_000).map { "line \($0): the quick brown fox jumps over the lazy dog\n" }.joined().utf8)
        let bytes = noise(1 << 20, seed: 11)
        var writer = BundleWriter()
        writer.add(.init(url: "https://example.com/text.txt", headers: [("content-type", "text/plain")], body: .data(text)))
        writer.add(.init(url: "https://example.com/noise.bin", headers: [("content-type", "application/octet-stream")], body: .data(bytes)))
        try writer.write(to: folder.path + "/b.zip")
        return (folder.path + "/b.zip", text, bytes)
    }

    func read(_ reader: BodyReader?) throws -> (data: Data, chunks: Int) {
        var data = Data()
        var chunks = 0
        while let chunk = try reader?.next() {
            data += chunk
            chunks += 1
        }
        return (data, chunks)
    }

    func response(_ bundle: MountedBundle, _ url: String, _ headers: [(String, String)] = []) throws -> BundleResponse {
        try #require(BundleResponder(bundle: bundle).respond(to: BundleRequest(url: url, headers: fields(headers))))
    }

    @Test("identity, gzip and Range answers stream in chunks the same bytes the whole reads give")
    func sameBytes() throws {
        let folder = try TemporaryFolder()
        let (path, text, bytes) = try bundle(in: folder)
        for verification in [MountedBundle.Options.Verification.crc32, .sha256] {
            let mounted = try MountedBundle(path: path, options: .init(verification: verification))
            let identity = try read(response(mounted, "https://example.com/text.txt").bodyReader(chunkSize: 16 << 10))
            #expect(identity.data == text && identity.chunks > 10)
            let gzip = try read(response(mounted, "https://example.com/text.txt", [("Accept-Encoding", "gzip")]).bodyReader(chunkSize: 16 << 10))
            let entry = try #require(mounted.entry(for: "https://example.com/text.txt"))
            #expect(gzip.data == (try mounted.deflatedBody(of: entry)?.gzip))
            try gzip.data.write(to: URL(fileURLWithPath: folder.path + "/t.gz"))
            #expect(try run("gzip", ["-t", folder.path + "/t.gz"]).status == 0)
            let range = try read(response(mounted, "https://example.com/text.txt", [("Range", "bytes=100000-100099")]).bodyReader())
            #expect(range.data == text[100_000..<100_100])
            let stored = try read(response(mounted, "https://example.com/noise.bin").bodyReader())
            #expect(stored.data == bytes)
        }
    }

    @Test("a Range of a checked stored body reads only that range")
    func rangeReadsOnlyTheRange() throws {
        let folder = try TemporaryFolder()
        let (path, _, bytes) = try bundle(in: folder)
        let mounted = try MountedBundle(path: path)
        let url = "https://example.com/noise.bin"
        // Not yet checked: the whole body is read once (and not kept) before the range goes out.
        let first = try response(mounted, url, [("Range", "bytes=700000-700009")])
        let firstReader = try #require(try first.bodyReader())
        #expect(try read(firstReader).data == bytes[700_000..<700_010])
        // Checked: ten bytes of a 1 MiB body read ten bytes.
        let reader = try #require(try response(mounted, url, [("Range", "bytes=500000-500009")]).bodyReader())
        #expect(try read(reader).data == bytes[500_000..<500_010])
        #expect(reader.bytesRead == 10)
        let whole = try #require(try response(mounted, url).bodyReader())
        _ = try read(whole)
        #expect(whole.bytesRead == UInt64(bytes.count))
    }

    @Test("a damaged body up to the check-before-send size fails before its first byte, whatever its chunks; gzip too")
    func damagedBeforeFirstByte() throws {
        let folder = try TemporaryFolder()
        let (path, _, bytes) = try bundle(in: folder)
        let at = try #require(try offset(of: bytes.suffix(64), in: path))
        try flipByte(at: at + 10, in: path)
        for verification in [MountedBundle.Options.Verification.crc32, .sha256] {
            // 1 MiB in 64 KiB chunks, under the default 16 MiB: the reader is never made, so no byte can go out.
            let mounted = try MountedBundle(path: path, options: .init(verification: verification))
            let error = #expect(throws: BundleError.self) { _ = try response(mounted, "https://example.com/noise.bin").bodyReader(chunkSize: 64 << 10) }
            #expect(error?.code == .corruptBody)
            #expect(throws: BundleError.self) { _ = try response(mounted, "https://example.com/noise.bin").openBody() }
        }
        // A deflate stream damaged near its end, asked for as gzip (its stored CRC-32 is what is checked first).
        let mounted = try MountedBundle(path: path)
        let textEntry = try #require(mounted.entry(for: "https://example.com/text.txt"))
        let stream = try #require(try mounted.deflatedBody(of: textEntry, verify: false)).data
        #expect(stream.count > 4 << 10)
        let textAt = try #require(try offset(of: Data(stream.suffix(40)), in: path))
        try flipByte(at: textAt + 5, in: path)
        let damaged = try MountedBundle(path: path)
        #expect(throws: BundleError.self) {
            _ = try response(damaged, "https://example.com/text.txt", [("Accept-Encoding", "gzip")]).bodyReader(chunkSize: 4 << 10)
        }
    }

    @Test("a body over the check-before-send size damaged near its end fails mid-stream: the chunks before go out, the last never does")
    func damagedMidStream() throws {
        let folder = try TemporaryFolder()
        let (path, text, bytes) = try bundle(in: folder)
        let at = try #require(try offset(of: bytes.suffix(64), in: path))
        try flipByte(at: at + 10, in: path)
        let mounted = try MountedBundle(path: path, options: .init(checkBeforeSend: 16 << 10))
        let reader = try #require(try response(mounted, "https://example.com/noise.bin").bodyReader(chunkSize: 64 << 10))
        var sent = 0
        let error = #expect(throws: BundleError.self) {
            while let chunk = try reader.next() { sent += chunk.count }
        }
        #expect(error?.code == .corruptBody)
        #expect(sent > 0 && sent < bytes.count, "\(sent) of \(bytes.count) bytes went out")
        // Still untrusted: the next read checks again, and fails again.
        #expect(throws: BundleError.self) { _ = try read(response(mounted, "https://example.com/noise.bin").bodyReader()) }

        // A damaged deflate stream sent as gzip: its trailer (the last chunk) never goes out.
        let textEntry = try #require(mounted.entry(for: "https://example.com/text.txt"))
        let stream = try #require(try mounted.deflatedBody(of: textEntry, verify: false)).data
        let textAt = try #require(try offset(of: Data(stream.suffix(40)), in: path))
        try flipByte(at: textAt + 5, in: path)
        let damaged = try MountedBundle(path: path, options: .init(checkBeforeSend: 16 << 10))
        let gzip = try #require(try response(damaged, "https://example.com/text.txt", [("Accept-Encoding", "gzip")]).bodyReader())
        var gzipSent = 0
        #expect(throws: BundleError.self) { while let chunk = try gzip.next() { gzipSent += chunk.count } }
        #expect(gzipSent > 0 && gzipSent < text.count)
    }

    @Test("a checked body is trusted only once checked as the mount checks, and while the file is unchanged: a write in place, its times set back, revokes it")
    func checkedOnceThenTrusted() throws {
        let folder = try TemporaryFolder()
        let (path, _, bytes) = try bundle(in: folder)
        let url = "https://example.com/noise.bin"
        // Under SHA-256 checks (a required key's), a body is trusted once it passed them in full, and only then.
        let strictMount = try MountedBundle(path: path, options: .init(verification: .sha256))
        let strictBody = try #require(strictMount.entry(for: url)?.body)
        #expect(try strictMount.bodyBytes(at: strictBody.index, verification: .crc32).count > 0)
        #expect(!strictMount.isVerified(strictBody.index), "a CRC-32 read does not make a SHA-256 mount trust a body")
        _ = try read(response(strictMount, url).bodyReader())
        #expect(strictMount.isVerified(strictBody.index))
        if let span = try response(strictMount, url).fileSpan() { close(span.descriptor) } else { Issue.record("no span once checked") }

        let mounted = try MountedBundle(path: path)
        let body = try #require(mounted.entry(for: url)?.body)
        #expect(!mounted.isVerified(body.index))
        #expect(try response(mounted, url).fileSpan() == nil)
        _ = try read(response(mounted, url).bodyReader())
        #expect(mounted.isVerified(body.index))
        let span = try #require(try response(mounted, url).fileSpan())
        close(span.descriptor)

        // Bytes changed in place under the mount, with the modification time set back: the check is no longer
        // trusted, no span is given, and the next read checks again and fails.
        let at = try #require(try offset(of: bytes.suffix(64), in: path))
        try overwriteInPlace(path, at: at, with: Array("TAMPERED".utf8))
        #expect(!mounted.fileUnchanged)
        #expect(!mounted.isVerified(body.index))
        #expect(try response(mounted, url).fileSpan() == nil)
        let failed = #expect(throws: BundleError.self) { _ = try read(response(mounted, url).bodyReader()) }
        #expect(failed?.code == .corruptBody)

        // A body claiming more than the mount allows is refused as hostile, streamed or not.
        let strict = try MountedBundle(path: path, options: .init(maxBodySize: 1000))
        let refused = #expect(throws: BundleError.self) { _ = try read(response(strict, url).bodyReader()) }
        #expect(refused?.code == .hostile)
        // Cut the file short: the read fails, and is not padded.
        #expect(truncate(path, off_t(at)) == 0)
        #expect(throws: BundleError.self) { _ = try read(response(mounted, url).bodyReader()) }
    }

    @Test("identity answers of a deflated body come from the bounded cache once it is checked: no file read, same bytes")
    func inflatedCache() throws {
        let folder = try TemporaryFolder()
        let (path, text, _) = try bundle(in: folder)
        let mounted = try MountedBundle(path: path, options: .init(inflatedCacheBytes: 8 << 20))
        let url = "https://example.com/text.txt"
        // Not in the cache yet: a server must read it off its event loop.
        #expect(try response(mounted, url).bodyReaderIfInMemory() == nil)
        // Read whole through its checks before a byte goes out, which fills the cache: the reader then reads no file.
        let first = try #require(try response(mounted, url).bodyReader())
        #expect(try read(first).data == text && first.inMemory)
        #expect(try response(mounted, url).bodyReaderIfInMemory()?.inMemory == true)
        #expect(try response(mounted, url, [("Accept-Encoding", "gzip")]).bodyReaderIfInMemory() == nil)
        let second = try #require(try response(mounted, url).bodyReader(chunkSize: 16 << 10))
        let again = try read(second)
        #expect(again.data == text && second.bytesRead == 0 && again.chunks > 10)
        let range = try #require(try response(mounted, url, [("Range", "bytes=5000-5099")]).bodyReader())
        #expect(try read(range).data == text[5000..<5100] && range.bytesRead == 0)
        // gzip answers send the stored stream, from the file.
        let gzip = try #require(try response(mounted, url, [("Accept-Encoding", "gzip")]).bodyReader())
        _ = try read(gzip)
        #expect(gzip.bytesRead > 0)
        #expect(mounted.inflatedCache?.bytes == text.count)

        // Bounded, least recently used out first; a body over an eighth of the capacity is never kept.
        let cache = try #require(try MountedBundle(path: path, options: .init(inflatedCacheBytes: 800)).inflatedCache)
        for n in 0..<8 { cache.put(n, Data(repeating: UInt8(n), count: 100)) }
        #expect(cache.get(0) != nil)
        cache.put(8, Data(repeating: 8, count: 100))
        #expect(cache.bytes == 800 && cache.get(0) != nil && cache.get(1) == nil && cache.get(8) != nil)
        cache.put(9, Data(repeating: 9, count: 101))
        #expect(cache.get(9) == nil)
    }

    @Test("a scrub checks every body once: a damaged one too large to check before sending is refused from its first read, the rest go out by sendfile")
    func scrubRefusesLargeDamagedBodies() throws {
        let folder = try TemporaryFolder()
        let (path, text, bytes) = try bundle(in: folder)
        let at = try #require(try offset(of: bytes.suffix(64), in: path))
        try flipByte(at: at + 10, in: path)
        for verification in [MountedBundle.Options.Verification.crc32, .sha256] {
            // Nothing is checked before sending here: without the scrub, the damaged body would start to go out.
            let mounted = try MountedBundle(path: path, options: .init(verification: verification, checkBeforeSend: 0))
            #expect(try response(mounted, "https://example.com/noise.bin").fileSpan() == nil)
            let report = mounted.scrub()
            #expect(report.checked == 1 && report.alreadyChecked == 0 && !report.stopped)
            #expect(report.damaged.count == 1 && report.damaged.first?.error.code == .corruptBody)
            #expect(report.bytesRead > UInt64(bytes.count))
            let error = #expect(throws: BundleError.self) { _ = try response(mounted, "https://example.com/noise.bin").bodyReader() }
            #expect(error?.code == .corruptBody)
            #expect(throws: BundleError.self) { _ = try response(mounted, "https://example.com/noise.bin", [("Range", "bytes=0-9")]).bodyReader() }
            // The good body is trusted: read without its checks, and (under CRC-32) a span of the file.
            #expect(try read(response(mounted, "https://example.com/text.txt").bodyReader()).data == text)
            #expect(mounted.scrub().alreadyChecked == 1)
            // A scrub asked to stop stops before the next body.
            let fresh = try MountedBundle(path: path)
            let stopped = fresh.scrub { true }
            #expect(stopped.stopped && stopped.checked == 0)
        }
    }
}
