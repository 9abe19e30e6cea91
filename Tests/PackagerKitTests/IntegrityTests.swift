import Crypto
import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

@Suite("check and the reader refuse damaged bundles")
struct IntegrityTests {
    /// A bundle with a stored body whose bytes are easy to find in the file.
    func makeBundle(in folder: TemporaryFolder) throws -> (path: String, marker: Data) {
        let marker = noise(4096, seed: 42)
        var writer = BundleWriter()
        writer.add(.init(url: "https://example.com/photo.jpg", headers: [("content-type", "image/jpeg")], body: .data(marker)))
        writer.add(
            .init(url: "https://example.com/", headers: [("content-type", "text/html")], body: .data(Data(String(repeating: "<p>hello</p>", count: 200).utf8))))
        writer.add(.init(url: "https://example.com/blocked.js", status: 204, kind: .blocked))
        let path = folder.path + "/b.zip"
        try writer.write(to: path)
        return (path, marker)
    }

    @Test("an intact bundle checks clean")
    func intact() throws {
        let folder = try TemporaryFolder()
        let (path, _) = try makeBundle(in: folder)
        let report = Checker.check(path: path)
        #expect(report.isValid, "\(report.issues)")
        #expect(report.entries == 3)
        #expect(report.bodies == 2)
    }

    @Test("one flipped byte in a body: check names the body, the reader refuses it")
    func flippedBodyByte() throws {
        let folder = try TemporaryFolder()
        let (path, marker) = try makeBundle(in: folder)
        let at = try #require(try offset(of: marker, in: path))
        try flipByte(at: at + 1000, in: path)
        let digest = hexString(Array(SHA256.hash(data: marker)))

        let report = Checker.check(path: path)
        #expect(!report.isValid)
        #expect(report.issues.contains { $0.entry == "b/" + digest.prefix(16) && $0.message.contains("CRC-32") })

        let bundle = try MountedBundle(path: path)  // mounting does not read bodies
        let entry = try #require(bundle.entry(for: "https://example.com/photo.jpg"))
        let error = try #require(throws: BundleError.self) { try bundle.body(of: entry) }
        #expect(error.code == .corruptBody)
        #expect(error.entry == "b/" + digest.prefix(16))
        // The other body is still served.
        #expect(try bundle.body(of: try #require(bundle.entry(for: "https://example.com/"))).count == 2400)
    }

    @Test("a flipped byte in a deflated body is refused too, also when handed out raw")
    func flippedDeflatedByte() throws {
        let folder = try TemporaryFolder()
        let (path, _) = try makeBundle(in: folder)
        let bundle0 = try MountedBundle(path: path)
        let html = try #require(bundle0.entry(for: "https://example.com/"))
        let record = bundle0.index.body(at: html.body!.index)
        try flipByte(at: Int(record.dataOffset) + 5, in: path)
        let bundle = try MountedBundle(path: path)
        let entry = try #require(bundle.entry(for: "https://example.com/"))
        #expect(throws: BundleError.self) { try bundle.body(of: entry) }
        #expect(throws: BundleError.self) { try bundle.deflatedBody(of: entry) }
        #expect(!Checker.check(path: path).isValid)
    }

    @Test("a truncated file is refused at mount and by check, at every cut")
    func truncated() throws {
        let folder = try TemporaryFolder()
        let (path, _) = try makeBundle(in: folder)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let cut = folder.path + "/cut.zip"
        for length in Array(stride(from: 0, to: whole.count, by: 97)) + [whole.count - 1, whole.count - 22, whole.count - 100] {
            try whole.prefix(length).write(to: URL(fileURLWithPath: cut))
            #expect(throws: BundleError.self, "cut at \(length)") { try MountedBundle(path: cut) }
            let report = Checker.check(path: cut)
            #expect(!report.isValid)
        }
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: cut))
        let message = try #require(Checker.check(path: cut).issues.first).message
        #expect(message.contains("truncated"))
    }

    @Test("a damaged central directory is refused with a message that says so")
    func damagedCentralDirectory() throws {
        let folder = try TemporaryFolder()
        let (path, _) = try makeBundle(in: folder)
        let directory = try ZipDirectory.locate(in: try BundleFile(path: path))
        // Break the signature of the second central directory record.
        var second = 0
        try directory.forEachEntry(from: try BundleFile(path: path)) { entry in
            if entry.recordOffset > 0 {
                second = entry.recordOffset
                return false
            }
            return true
        }
        try flipByte(at: Int(directory.centralDirectoryOffset) + second, in: path)
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .corruptDirectory)
        #expect(error.message.contains("central directory record 1 has a bad signature"))
        let report = Checker.check(path: path)
        #expect(report.issues.contains { $0.message.contains("central directory") })
    }

    @Test("a damaged index is refused at mount")
    func damagedIndex() throws {
        let folder = try TemporaryFolder()
        let (path, _) = try makeBundle(in: folder)
        let bundle = try MountedBundle(path: path)
        let indexEntry = try #require(bundle.metadata["index.bin"])
        try flipByte(at: Int(indexEntry.localHeaderOffset) + 30 + 9 + 200, in: path)
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .corruptIndex)
        #expect(error.message.contains("index.bin"))
    }

    @Test("a file that is not a ZIP, or a ZIP that is not a bundle, says so")
    func notABundle() throws {
        let folder = try TemporaryFolder()
        try folder.file("plain.txt", String(repeating: "just text\n", count: 10))
        let e1 = try #require(throws: BundleError.self) { try MountedBundle(path: folder.path + "/plain.txt") }
        #expect(e1.code == .notABundle)
        try folder.file("a/x.txt", "x")
        #expect(try run("bsdtar", ["-a", "-cf", "plain.zip", "a"], in: folder.path).status == 0)
        let e2 = try #require(throws: BundleError.self) { try MountedBundle(path: folder.path + "/plain.zip") }
        #expect(e2.code == .notABundle)
        #expect(e2.message.contains("not a packager bundle"))
        let e3 = try #require(throws: BundleError.self) { try MountedBundle(path: folder.path + "/missing.zip") }
        #expect(e3.code == .io)
    }
}

@Suite("hostile bundles: lying sizes, overlaps, bombs")
struct HostileTests {
    /// Writes a bundle whose index was altered by `transform`, with CRCs fixed so only the lie remains.
    func forged(_ folder: TemporaryFolder, entries: [RecordedExchange]? = nil, transform: (inout [UInt8], BundleIndex) -> Void) throws -> String {
        var writer = BundleWriter()
        let entries =
            entries ?? [
                .init(url: "https://example.com/a.txt", headers: [("content-type", "text/plain")], body: .data(Data(String(repeating: "a", count: 5000).utf8))),
                .init(
                    url: "https://example.com/b.txt", headers: [("content-type", "text/plain")], body: .data(Data(String(repeating: "bc", count: 3000).utf8))),
            ]
        for entry in entries { writer.add(entry) }
        let path = folder.path + "/h.zip"
        try writer.write(to: path)
        let index = try MountedBundle(path: path).index
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: path) { bytes in transform(&bytes, index) }
        return path
    }

    func setU64(_ bytes: inout [UInt8], _ at: Int, _ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(at..<(at + 8), with: $0) }
    }

    func setU16(_ bytes: inout [UInt8], _ at: Int, _ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(at..<(at + 2), with: $0) }
    }

    @Test(
        "an entry with a status outside 100...599, a 1xx, or a body on a status that has none, is refused at mount, naming the entry",
        arguments: [
            (1000, "outside 100...599"), (99, "outside 100...599"), (65535, "outside 100...599"), (204, "which has none"),
            (304, "which has none"), (101, "not a final response"), (103, "not a final response"), (100, "not a final response"),
        ])
    func impossibleStatuses(status: Int, message: String) throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { bytes, index in setU16(&bytes, index.entriesOffset + 12, UInt16(status)) }
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile && error.message.contains(message), "\(error)")
        #expect(error.entry == "https://example.com/a.txt")
    }

    @Test("a key that is not a canonical http or https URL is refused at mount (no unix sockets, quotes or line breaks reach verify)")
    func malformedKeys() throws {
        for replacement in ["file:///", "http+uni", "https://\"", "https://\r", "https:/x", "https://E"] {
            let folder = try TemporaryFolder()
            let path = try forged(folder) { bytes, index in
                let keyOffset = index.stringsOffset + Int(bytes.u32(index.entriesOffset))
                bytes.replaceSubrange(keyOffset..<(keyOffset + 8), with: Array(replacement.utf8))
            }
            let error = try #require(throws: BundleError.self, "\(replacement)") { try MountedBundle(path: path) }
            #expect(error.code == .hostile || error.code == .corruptIndex, "\(replacement): \(error)")
        }
    }

    @Test("a metadata entry that claims 2 GiB over a few bytes is refused with memory growing by what was inflated, not what was claimed")
    func claimedSizeIsNotAllocated() throws {
        // 64 KiB of zeros deflate to about 100 bytes; the claim is 2 GiB, within no ratio a reader should believe, but
        // the inflater is asked directly, as it would be after the ratio check, to see what it allocates.
        var zeros = [UInt8](repeating: 0, count: 64 << 10)
        let stream = try #require(try deflateRaw(&zeros))
        let before = peakResidentBytes()
        let error = try #require(throws: BundleError.self) {
            try stream.withUnsafeBytes { try RawInflate.inflate($0, expectedSize: 2 << 30, entry: "index.bin") }
        }
        #expect(error.code == .corruptBody)
        let grown = peakResidentBytes() - before
        #expect(grown < 64 << 20, "peak memory grew by \(grown) bytes")
    }

    @Test("stored headers in any case are held to the never-replayed list (Set-Cookie, Transfer-Encoding), and check reports them")
    func headerNamesInAnyCase() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        try writeSampleBundle(origin: "https://docs.example.com", to: path)
        // Same length as the line replaced, so only the header block changes.
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: path) { bytes in
            let line = Array("cache-control: max-age=300".utf8)
            let forged = Array("Transfer-Encoding: chunked".utf8)
            precondition(line.count == forged.count)
            let at = bytes.firstRange(of: line)!
            bytes.replaceSubrange(at, with: forged)
            let etag = Array("etag: \"page-v1\"".utf8)
            let cookie = Array("Set-Cookie: a=b".utf8)
            precondition(etag.count == cookie.count)
            bytes.replaceSubrange(bytes.firstRange(of: etag)!, with: cookie)
        }
        let loader = try OfflineLoader(path: path)
        let answer = try #require(loader.response(for: BundleRequest(url: "https://docs.example.com/")))
        #expect(answer.status == 200)
        #expect(answer.headers[HTTPField.Name("set-cookie")!] == nil)
        #expect(answer.headers[.transferEncoding] == nil)
        #expect(answer.headers[.contentType] == "text/html; charset=utf-8")
        let entry = try #require(try MountedBundle(path: path).entry(for: "https://docs.example.com/"))
        #expect(entry.header("SET-COOKIE") == "a=b", "names are lowercased as read, so every rule sees them")
        let report = Checker.check(path: path)
        #expect(!report.isValid)
        let said = report.issues.map(\.message)
        #expect(said.contains { $0.contains("Set-Cookie") && $0.contains("not lowercase") }, "\(said)")
        #expect(said.contains { $0.contains("set-cookie") && $0.contains("never replayed") }, "\(said)")
        #expect(said.contains { $0.contains("transfer-encoding") && $0.contains("never replayed") }, "\(said)")
    }

    @Test("index.bin stored with deflate (a bomb of 256 MiB in a few hundred KB) is refused before it is inflated")
    func deflatedIndexIsRefusedUnread() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/bomb.zip"
        try folder.file(
            "bomb.py",
            #"""
            import sys, zipfile
            info = zipfile.ZipInfo("index.bin")
            info.compress_type = zipfile.ZIP_DEFLATED
            with zipfile.ZipFile(sys.argv[1], "w", compresslevel=9) as z:
                z.comment = b"packager-bundle/2 sha256:" + b"0" * 64
                with z.open(info, "w") as f:
                    for _ in range(256):
                        f.write(b"\0" * (1 << 20))
            """#)
        _ = try run("python3", [folder.path + "/bomb.py", path])
        let before = peakResidentBytes()
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile && error.message.contains("method 8"), "\(error)")
        #expect(peakResidentBytes() - before < 64 << 20)
        let report = Checker.check(path: path)
        #expect(report.issues.contains { $0.message.contains("method 8") })
        // Version 3 may deflate index.bin, by at most 64 to 1: the bomb is still refused before it is inflated.
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let at = try #require(file.range(of: Data("packager-bundle/2 ".utf8), options: .backwards))
        file.replaceSubrange(at, with: Data("packager-bundle/3 ".utf8))
        try file.write(to: URL(fileURLWithPath: path))
        let v3 = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(v3.code == .hostile && v3.message.contains("more than 64 to 1"), "\(v3)")
        #expect(peakResidentBytes() - before < 64 << 20)
    }

    @Test("a manifest.json swapped for a deflate bomb is refused by its size bound and its digest, never inflated into memory")
    func manifestBomb() throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        // Appends a deflated manifest of SIZE spaces and points the central directory's manifest record at it.
        try folder.file(
            "bomb.py",
            #"""
            import struct, sys, zlib
            src, dst, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
            b = bytearray(open(src, "rb").read())
            end = b.rfind(b"PK\x05\x06")
            cd_off, = struct.unpack("<I", b[end + 16:end + 20]); n, = struct.unpack("<H", b[end + 10:end + 12])
            co, chunk, comp, crc = zlib.compressobj(9, zlib.DEFLATED, -15), b" " * (1 << 20), bytearray(), 0
            for _ in range(size >> 20):
                comp += co.compress(chunk); crc = zlib.crc32(chunk, crc)
            comp += co.flush()
            name = b"manifest.json"
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(comp), size, len(name), 0) + name + comp
            cd, p = bytearray(), cd_off
            for _ in range(n):
                nl, el, cl = struct.unpack("<HHH", b[p + 28:p + 34]); rec = bytearray(b[p:p + 46 + nl + el + cl])
                if bytes(b[p + 46:p + 46 + nl]) == name:
                    rec[10:12] = struct.pack("<H", 8); rec[16:28] = struct.pack("<III", crc, len(comp), size); rec[42:46] = struct.pack("<I", cd_off)
                cd += rec; p += 46 + nl + el + cl
            tail = bytearray(b[end:]); tail[12:20] = struct.pack("<II", len(cd), cd_off + len(local))
            open(dst, "wb").write(bytes(b[:cd_off]) + local + bytes(cd) + bytes(tail))
            """#)
        for (name, size) in [("big.zip", 256 << 20), ("small.zip", 1 << 20)] {
            _ = try run("python3", [folder.path + "/bomb.py", folder.path + "/b.zip", folder.path + "/" + name, String(size)])
            let bundle = try MountedBundle(path: folder.path + "/" + name)
            let before = peakResidentBytes()
            let error = #expect(throws: BundleError.self) { _ = try bundle.manifest() }
            // 256 MiB is past what 5 entries can describe; 1 MiB is within it, and its digest is not the index's.
            #expect(error?.code == (size > 64 << 20 ? .hostile : .corruptIndex), "\(String(describing: error))")
            #expect(!Checker.check(path: folder.path + "/" + name).isValid)
            #expect(peakResidentBytes() - before < 32 << 20)
        }
    }

    @Test("a body claiming an absurd compression ratio is refused at mount")
    func zipBomb() throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { bytes, index in
            setU64(&bytes, index.bodiesOffset + 48, 1 << 40)  // size of body 0
        }
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile)
        #expect(error.message.contains("ratio"))
    }

    @Test("a real deflate bomb (64 MiB of zeros in 64 KiB) is refused by the size limit, and by its recorded size when the index lies, before it is inflated")
    func realDeflateBomb() throws {
        let folder = try TemporaryFolder()
        let bomb = RecordedExchange(url: "https://example.com/bomb.txt", headers: [("content-type", "text/plain")], body: .data(Data(count: 64 << 20)))
        // Honest sizes: a service that caps bodies at 16 MiB refuses it before inflating a byte.
        var writer = BundleWriter()
        writer.add(bomb)
        try writer.write(to: folder.path + "/honest.zip")
        let honest = try MountedBundle(path: folder.path + "/honest.zip", options: .init(maxBodySize: 16 << 20))
        let entry = try #require(honest.entry(for: "https://example.com/bomb.txt"))
        #expect(try #require(entry.body).storedSize < 128 << 10)
        var error = try #require(throws: BundleError.self) { try honest.body(of: entry) }
        #expect(error.code == .hostile && error.message.contains("over the limit"))
        error = try #require(throws: BundleError.self) { try honest.deflatedBody(of: entry) }
        #expect(error.code == .hostile)
        // An index that claims 1 MiB: the local header disagrees, so the read is refused before inflating.
        let lying = try forged(folder, entries: [bomb]) { bytes, index in setU64(&bytes, index.bodiesOffset + 48, 1 << 20) }
        let bundle = try MountedBundle(path: lying)
        error = try #require(throws: BundleError.self) { try bundle.body(of: bundle.entries[0]) }
        #expect(error.code == .corruptDirectory, "\(error)")
        #expect(!Checker.check(path: lying).issues.isEmpty)
        // Were every record to tell the same lie, inflating stops one byte past the claim: the output never grows past it.
        let stream = try #require(try Data(count: 64 << 20).withUnsafeBytes { try RawDeflate.deflate($0) })
        error = try #require(throws: BundleError.self) {
            try stream.withUnsafeBytes { try RawInflate.inflate($0, expectedSize: 1 << 20, entry: "bodies/bomb") }
        }
        #expect(error.code == .hostile && error.message.contains("inflates past its recorded size of 1048576 bytes"))
    }

    @Test("a manifest that names bodies the bundle does not hold fails check, naming them")
    func manifestPointsAtMissingBodies() throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { _, _ in }
        // Rewrite manifest.json so one entry names a body that is not there, keeping the ZIP consistent.
        let python = """
            import hashlib, json, sys, zipfile
            src, dst = sys.argv[1], sys.argv[2]
            with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
                for info in z.infolist():
                    data = z.read(info)
                    if info.filename == "manifest.json":
                        doc = json.loads(data)
                        body = next(e["body"] for e in doc["entries"] if "body" in e)
                        body["sha256"] = "0" * 64
                        body["entry"] = "bodies/" + "0" * 64
                        data = json.dumps(doc).encode()
                    out.writestr(info, data)
                out.comment = z.comment
            """
        let damaged = folder.path + "/missing.zip"
        #expect(try run("python3", ["-c", python, path, damaged]).status == 0)
        let issues = Checker.check(path: damaged).issues
        #expect(!issues.isEmpty)
        // Caught twice: the manifest's digest no longer matches the index, and its entry names another body than the index does.
        #expect(issues.contains { $0.description.contains("manifest.json") && $0.description.contains("SHA-256 differs") }, "\(issues)")
        #expect(issues.contains { $0.description.contains("https://example.com/") && $0.description.contains("name different bodies") }, "\(issues)")
    }

    @Test(
        "a manifest that differs from the index in its count, a key or an entry's headers fails check, naming what differs",
        arguments: [
            ("drop", "lists 1 entries; index.bin has 2"), ("key", "disagree on the key at position 0"),
            ("header", "the manifest and the index store different headers"),
        ])
    func manifestDiffersFromTheIndex(change: String, expected: String) throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { _, _ in }
        // Rewrite manifest.json, keeping the ZIP consistent: the last entry dropped, the first key changed, or a header
        // value of the first entry changed.
        let python = """
            import json, sys, zipfile
            src, dst, change = sys.argv[1], sys.argv[2], sys.argv[3]
            with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
                for info in z.infolist():
                    data = z.read(info)
                    if info.filename == "manifest.json":
                        doc = json.loads(data)
                        if change == "drop":
                            doc["entries"].pop()
                        elif change == "key":
                            doc["entries"][0]["key"] = "https://example.com/0.txt"
                        else:
                            doc["entries"][0]["headers"] = [["content-type", "text/html"]]
                        data = json.dumps(doc).encode()
                    out.writestr(info, data)
                out.comment = z.comment
            """
        let damaged = folder.path + "/differs.zip"
        #expect(try run("python3", ["-c", python, path, damaged, change]).status == 0)
        let issues = Checker.check(path: damaged).issues
        #expect(issues.contains { $0.description.contains("manifest.json") && $0.description.contains("SHA-256 differs") }, "\(issues)")
        #expect(issues.contains { $0.description.contains(expected) }, "\(issues)")
    }

    @Test("overlapping bodies are refused at mount")
    func overlap() throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { bytes, index in
            let first = index.body(at: 0)
            let r = index.bodiesOffset + IndexLayout.bodyRecordSize
            setU64(&bytes, r + 32, first.localHeaderOffset)
            setU16(&bytes, r + 64, UInt16(first.dataOffset - first.localHeaderOffset))
        }
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile)
        #expect(error.message.contains("overlaps"))
    }

    @Test("a body pointing outside the file is refused at mount")
    func outside() throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { bytes, index in
            let r = index.bodiesOffset + IndexLayout.bodyRecordSize
            setU64(&bytes, r + 40, 1 << 50)
            setU64(&bytes, r + 48, 1 << 50)
        }
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: path) }
        #expect(error.code == .hostile)
        #expect(error.message.contains("outside the body area"))
    }

    @Test("a gzip answer checks the stored stream it sends, by the CRC-32 version 2 records for it, without inflating it")
    func gzipChecksStoredBytes() throws {
        func deflatedRecord(_ index: BundleIndex) -> Int {
            (0..<index.bodyCount).first { index.body(at: $0).compression == .deflate }!
        }
        func answers(_ path: String) throws -> (gzip: Result<Data, BundleError>, identity: Result<Data, BundleError>) {
            let bundle = try MountedBundle(path: path)
            let responder = BundleResponder(bundle: bundle)
            // The entry whose body is the forged record.
            let key = try #require(bundle.entries.first { $0.body?.index == deflatedRecord(bundle.index) }).key
            func ask(_ headers: [(String, String)]) -> Result<Data, BundleError> {
                let response = responder.respond(to: BundleRequest(url: key, headers: fields(headers)))!
                return Result { try response.bodyData() }.mapError { $0 as! BundleError }
            }
            return (ask([("Accept-Encoding", "gzip")]), ask([]))
        }
        let folder = try TemporaryFolder()
        // The index's CRC-32 of the stored stream is wrong; the stream itself is intact and inflates to the right bytes.
        let wrongStored = try forged(folder) { bytes, index in
            bytes[index.bodiesOffset + deflatedRecord(index) * IndexLayout.bodyRecordSize + 60] ^= 0x01
        }
        var (gzip, identity) = try answers(wrongStored)
        #expect(throws: BundleError.self) { try gzip.get() }
        #expect((try? gzip.get()) == nil && (try? identity.get()) != nil)
        if case .failure(let error) = gzip { #expect(error.code == .corruptBody && error.message.contains("stored stream")) }
        // The stored stream was altered and the index's CRC-32 of it updated to match, as a forger without the signing key
        // could: the gzip answer goes out as stored, so it was not inflated (the inflated bytes' CRC-32 would have
        // refused it), and the identity answer, which inflates, is refused.
        let other = try TemporaryFolder()
        let altered = try forged(other) { _, _ in }
        let record = try MountedBundle(path: altered).index.body(at: deflatedRecord(try MountedBundle(path: altered).index))
        try flipByte(at: Int(record.dataOffset) + Int(record.storedSize) / 2, in: altered)
        let file = try Data(contentsOf: URL(fileURLWithPath: altered))
        let storedCRC = CRC32.checksum(Array(file[Int(record.dataOffset)..<Int(record.dataOffset + record.storedSize)]))
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: altered) { bytes in
            let index = Int(bytes.u64(IndexLayout.bodiesOffsetOffset))
            let r = (0..<Int(bytes.u32(IndexLayout.bodyCountOffset))).map { index + $0 * IndexLayout.bodyRecordSize }.first { bytes[$0 + 66] == 8 }!
            withUnsafeBytes(of: storedCRC.littleEndian) { bytes.replaceSubrange((r + 60)..<(r + 64), with: $0) }
        }
        let wrongInflated = altered
        (gzip, identity) = try answers(wrongInflated)
        #expect((try? gzip.get()) != nil)
        if case .failure(let error) = identity { #expect(error.code == .corruptBody) } else { Issue.record("the identity answer was not refused") }
        // A signed bundle's reader checks SHA-256: there the gzip answer inflates once and checks the digest.
        let bundle = try MountedBundle(path: wrongInflated, options: .init(verification: .sha256))
        let entry = try #require(bundle.entries.first { $0.body?.index == deflatedRecord(bundle.index) })
        #expect(throws: BundleError.self) { try bundle.deflatedBody(of: entry) }
    }

    @Test("a size that lies by one byte is refused when the body is read")
    func lyingSize() throws {
        let folder = try TemporaryFolder()
        let path = try forged(folder) { bytes, index in
            setU64(&bytes, index.bodiesOffset + 48, index.body(at: 0).size + 1)
        }
        let bundle = try MountedBundle(path: path)
        let body = bundle.index.body(at: 0)
        let entry = try #require(bundle.entries.first { $0.body?.sha256 == hexString(body.sha256) })
        let error = try #require(throws: BundleError.self) { try bundle.body(of: entry) }
        #expect(error.code == .corruptDirectory || error.code == .corruptBody)
        #expect(!Checker.check(path: path).isValid)
    }
}

/// The process's peak resident set, in bytes.
func peakResidentBytes() -> Int {
    var usage = rusage()
    getrusage(0, &usage)  // RUSAGE_SELF
    return usage.ru_maxrss * 1024
}

/// A raw deflate stream of `bytes`, through the tool side's deflater.
func deflateRaw(_ bytes: inout [UInt8]) throws -> [UInt8]? {
    try bytes.withUnsafeBytes { try RawDeflate.deflate($0, level: 6) }
}
