import Crypto
import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Tools that go through a whole bundle (exports, check) keep its index in a mapped scratch file and let go of the
/// pages they read, so their memory does not grow with the entries.
@Suite("index.bin in a mapped scratch file")
struct MappedIndexTests {
    /// A bundle of `count` entries: shared and distinct bodies, a few without one, POST entries keyed by their body.
    static func writeBundle(_ path: String, count: Int) throws {
        var writer = BundleWriter(options: .init(createdAt: Date(timeIntervalSince1970: 1_767_323_045), timeClamp: nil))
        for i in 0..<count {
            var entry = RecordedExchange(
                url: "https://docs.example/s\(i % 17)/page-\(i).html?v=\(i * 7919 % 1000)", status: i % 41 == 0 ? 204 : 200,
                headers: [("content-type", i % 3 == 0 ? "text/html" : "application/json"), ("etag", "\"\(i % 5)-\(i)\""), ("x-shard", "\(i % 9)")],
                body: i % 41 == 0 ? nil : .data(Data("<p>body \(i % 250) \(String(repeating: "x", count: i % 300))</p>".utf8)),
                fetchedAt: Date(timeIntervalSince1970: 1_767_323_045 + Double(i)))
            if i % 11 == 0 {
                entry.request = try Recorder.request(
                    method: "POST", body: Data(#"{"n": \#(i)}"#.utf8), sent: [("content-type", "application/json")], vary: [],
                    responseHeaders: [], secret: { _ in false }, scan: SecretScan([])
                ).get()
            }
            writer.add(entry)
        }
        try writer.write(to: path)
    }

    /// A folder holding `b.zip` (``writeBundle(_:count:)``) and an empty `scratch` folder beside it.
    static func bundleWithScratch(count: Int) throws -> (folder: TemporaryFolder, scratch: String, path: String) {
        let folder = try TemporaryFolder()
        let scratch = folder.path + "/scratch"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let path = folder.path + "/b.zip"
        try writeBundle(path, count: count)
        return (folder, scratch, path)
    }

    static func mappedOptions(_ folder: String) -> MountedBundle.Options {
        var options = MountedBundle.Options(verification: .sha256)
        options.indexScratch = (folder, 0)
        return options
    }

    @Test("every key, header, field, body record and lookup of a mapped index is the one in memory; the scratch file is unlinked at once")
    func sameAnswers() throws {
        let (folder, scratch, path) = try Self.bundleWithScratch(count: 4000)
        defer { withExtendedLifetime(folder) {} }
        let memory = try MountedBundle(path: path)
        let mapped = try MountedBundle(path: path, options: Self.mappedOptions(scratch))
        #expect(memory.index.mapped == nil)
        let mapping = try #require(mapped.index.mapped)
        // Checked, then let go: nothing of it is left in the folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
        #expect(mapping.count == memory.index.byteCount && mapped.index.byteCount == memory.index.byteCount)
        #expect(mapped.index.bytes == memory.index.bytes)
        let (a, b) = (memory.index, mapped.index)
        #expect(a.entryCount == 4000 && b.entryCount == a.entryCount && b.bodyCount == a.bodyCount && b.blockCount == a.blockCount)
        #expect(b.manifestSHA256 == a.manifestSHA256 && b.rules == a.rules && b.hasRequestQualifiers && a.hasRequestQualifiers)
        #expect(b.qualifiedKeys().map { "\($0.entry) \($0.urlLength)" } == a.qualifiedKeys().map { "\($0.entry) \($0.urlLength)" })
        for i in 0..<a.entryCount {
            if i == 1234 { mapping.release() }
            let key = a.entryKey(i)
            #expect(b.entryKey(i) == key)
            #expect(b.entryHeaders(i).map { "\($0.name): \($0.value)" } == a.entryHeaders(i).map { "\($0.name): \($0.value)" })
            let (fa, fb) = (a.entryFields(i), b.entryFields(i))
            #expect(fa.status == fb.status && fa.kind == fb.kind && fa.flags == fb.flags && fa.body == fb.body && fa.fetchedAt == fb.fetchedAt)
            #expect(b.headerBlock(ofEntry: i) == a.headerBlock(ofEntry: i))
            let found = Array(key.utf8).withUnsafeBytes { b.find(canonicalKey: $0) }
            #expect(found == i, "\(key)")
        }
        for j in 0..<a.bodyCount { #expect(b.body(at: j) == a.body(at: j)) }
        #expect(Array("https://docs.example/absent".utf8).withUnsafeBytes { b.find(canonicalKey: $0) } == nil)
        // The bundle digest is the SHA-256 of the mapped bytes, and a body read through it checks out.
        #expect(hexString(Array(try mapped.withIndexFileBytes { SHA256.hash(data: $0) })) == mapped.digest)
        #expect(try hexString(mapped.indexSHA256()) == mapped.digest)
        #expect(try hexString(memory.indexSHA256()) == memory.digest)
        for j in stride(from: 0, to: a.bodyCount, by: 97) {
            #expect(try mapped.bodyBytes(at: j, verification: .sha256) == memory.bodyBytes(at: j, verification: .sha256))
        }
    }

    @Test("a WARC export through a mapped index writes the same bytes as through one in memory, and check passes the bundle")
    func sameExport() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        try Self.writeBundle(path, count: 1500)
        func export(_ bundle: MountedBundle, _ name: String) throws -> Data {
            let output = folder.path + "/" + name
            let atomic = try AtomicOutput(destination: output)
            // The same name in both warcinfo records.
            _ = try WARCExporter.write(bundle, to: atomic, filename: "b.warc.gz") { _ in }
            try atomic.commit()
            return try Data(contentsOf: URL(fileURLWithPath: output))
        }
        let mapped = try MountedBundle(path: path, options: Self.mappedOptions(folder.path))
        #expect(mapped.index.mapped != nil)
        let fromMemory = try export(try MountedBundle(path: path, options: .init(verification: .sha256)), "memory.warc.gz")
        #expect(try export(mapped, "mapped.warc.gz") == fromMemory)
        #expect(fromMemory.count > 100_000)
        let report = Checker.check(path: path)
        #expect(report.issues.isEmpty, "\(report.issues)")
    }

    @Test("a damaged index.bin is refused as damaged through a mapped index, deflated or stored, and leaves nothing in the folder")
    func damaged() throws {
        let (folder, scratch, path) = try Self.bundleWithScratch(count: 800)
        let entry = try #require(try MountedBundle(path: path).metadata[BundleFormat.indexEntryName])
        #expect(entry.method == 8)
        // A byte of the deflated stream flipped (its CRC-32 left as it was): a damaged stream or a CRC that fails.
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let local = Int(entry.localHeaderOffset)
        let dataStart = local + 30 + (Int(file[local + 26]) | Int(file[local + 27]) << 8) + (Int(file[local + 28]) | Int(file[local + 29]) << 8)
        let damaged = folder.path + "/damaged.zip"
        file[dataStart + Int(entry.compressedSize) / 2] ^= 0x5A
        try file.write(to: URL(fileURLWithPath: damaged))
        // (This flip makes the stream longer than recorded: hostile, as any such stream; a shorter one is corrupt.)
        var codes: [BundleError.Code?] = []
        for options in [Self.mappedOptions(scratch), MountedBundle.Options()] {
            #expect {
                _ = try MountedBundle(path: damaged, options: options)
            } throws: { error in
                codes.append((error as? BundleError)?.code)
                return [.corruptIndex, .hostile].contains((error as? BundleError)?.code)
            }
        }
        #expect(codes.count == 2 && codes[0] == codes[1])
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)

        // Stored (as the format allows), then a record's key offset broken: the checks of the mapped bytes refuse it.
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: path) { _ in }
        #expect(try MountedBundle(path: path).metadata[BundleFormat.indexEntryName]?.method == 0)
        #expect(try MountedBundle(path: path, options: Self.mappedOptions(scratch)).index.mapped != nil)
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: path) { bytes in
            let entries = Int(bytes.u64(IndexLayout.entriesOffsetOffset))
            bytes[entries + IndexLayout.entryRecordSize * 5] ^= 0x40
        }
        #expect {
            _ = try MountedBundle(path: path, options: Self.mappedOptions(scratch))
        } throws: { ($0 as? BundleError)?.code == .corruptIndex }
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).isEmpty)
    }

    @Test("a scratch folder that cannot hold the index is an I/O error that names it")
    func noFolder() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        try Self.writeBundle(path, count: 50)
        #expect {
            _ = try MountedBundle(path: path, options: Self.mappedOptions(folder.path + "/missing"))
        } throws: { error in
            guard let error = error as? BundleError else { return false }
            return error.code == .io && error.message.contains(folder.path + "/missing")
        }
    }

    @Test("an index.bin stream that inflates past its recorded size is hostile, mapped or in memory")
    func overlong() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        try Self.writeBundle(path, count: 300)
        let bundle = try MountedBundle(path: path)
        let index = bundle.index.bytes
        // The stream holds the index and 1 MiB more; the entry records the index's size and CRC-32.
        let stream = try ZlibDeflate.deflate(pieces: [index, [UInt8](repeating: 0x41, count: 1 << 20)], level: 6)
        try replaceMetadataEntry(BundleFormat.indexEntryName, in: path, data: stream, method: 8, crc32: CRC32.checksum(index), size: index.count)
        for options in [Self.mappedOptions(folder.path), MountedBundle.Options()] {
            #expect {
                _ = try MountedBundle(path: path, options: options)
            } throws: { ($0 as? BundleError)?.code == .hostile }
        }
    }

    @Test("a version-1 index under a later version's comment is refused alike, mapped or in memory; a version-1 bundle keeps its index in memory")
    func versionOne() throws {
        let vectors = VectorTests.folder + "/v1-unsigned.zip"
        guard FileManager.default.fileExists(atPath: vectors) else {
            Issue.record("no version-1 vector at \(vectors)")
            return
        }
        let scratch = try TemporaryFolder()
        let v1 = try MountedBundle(path: vectors)
        let whole = try MountedBundle(path: vectors, options: Self.mappedOptions(scratch.path))
        #expect(v1.formatVersion == 1 && whole.formatVersion == 1 && whole.index.mapped == nil && whole.index.bytes == v1.index.bytes)

        // index.bin of that bundle in a version-3 bundle: both mounts refuse it with the same code.
        let path = scratch.path + "/b.zip"
        try Self.writeBundle(path, count: 20)
        let v1Index = try MountedBundle.readMetadataEntry(
            try #require(v1.metadata[BundleFormat.indexEntryName]), from: v1.file, limit: 1 << 32, bodyArea: v1.directory.centralDirectoryOffset)
        try replaceMetadataEntry(BundleFormat.indexEntryName, in: path, storing: v1Index)
        var codes: [BundleError.Code?] = []
        for options in [Self.mappedOptions(scratch.path), MountedBundle.Options()] {
            do {
                _ = try MountedBundle(path: path, options: options)
                codes.append(nil)
            } catch {
                codes.append((error as? BundleError)?.code)
            }
        }
        #expect(codes[0] != nil && codes[0] == codes[1], "\(codes)")
    }
}
