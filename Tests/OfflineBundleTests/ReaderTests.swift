import Crypto
import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

@Suite("mounting and reading")
struct ReaderTests {
    @Test("a deflated body is handed out raw and framed as gzip that gzip itself accepts")
    func gzipHandout() throws {
        let folder = try TemporaryFolder()
        let text = String(repeating: "The quick brown fox jumps over the lazy dog.\n", count: 400)
        var writer = BundleWriter()
        writer.add(.init(url: "https://example.com/fox.txt", headers: [("content-type", "text/plain")], body: .data(Data(text.utf8))))
        writer.add(.init(url: "https://example.com/noise.bin", headers: [("content-type", "application/octet-stream")], body: .data(noise(1000, seed: 3))))
        try writer.write(to: folder.path + "/b.zip")
        let bundle = try MountedBundle(path: folder.path + "/b.zip")
        let entry = try #require(bundle.entry(for: "https://example.com/fox.txt"))
        let deflated = try #require(try bundle.deflatedBody(of: entry))
        #expect(deflated.size == UInt64(text.utf8.count))
        #expect(deflated.data.count < text.utf8.count / 10)
        try deflated.gzip.write(to: URL(fileURLWithPath: folder.path + "/fox.txt.gz"))
        let result = try run("gzip", ["-dc", folder.path + "/fox.txt.gz"])
        #expect(result.status == 0)
        #expect(result.output == text)
        // Stored bodies have no raw deflate stream.
        #expect(try bundle.deflatedBody(of: try #require(bundle.entry(for: "https://example.com/noise.bin"))) == nil)
    }

    @Test("many tasks read from one mounted bundle at once, every body matching its digest")
    func concurrentReads() async throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        var expected = [String: Data]()
        for i in 0..<64 {
            let body = i % 2 == 0 ? Data(String(repeating: "page \(i) ", count: 300 + i).utf8) : noise(5000 + i, seed: UInt64(i))
            let url = "https://example.com/item/\(i)"
            expected[url] = body
            writer.add(.init(url: url, headers: [("content-type", i % 2 == 0 ? "text/plain" : "image/png")], body: .data(body)))
        }
        try writer.write(to: folder.path + "/b.zip")
        let bundle = try MountedBundle(path: folder.path + "/b.zip", options: .init(verification: .sha256))
        let snapshot = expected
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<16 {
                group.addTask {
                    var bad = 0
                    for round in 0..<40 {
                        let url = "https://example.com/item/\((task * 7 + round) % 64)"
                        let entry = try #require(bundle.entry(for: url))
                        let body = try bundle.body(of: entry)
                        if body != snapshot[url] || hexString(Array(SHA256.hash(data: body))) != entry.body?.sha256 { bad += 1 }
                    }
                    return bad
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }

    @Test("ZIP64: more than 65,535 entries write, mount, and pass unzip -t and zipfile")
    func zip64() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        for i in 0..<70_000 {
            writer.add(.init(url: "https://example.com/n/\(i)", headers: [("content-type", "text/plain")], body: .data(Data("body \(i)".utf8))))
        }
        let path = folder.path + "/big.zip"
        let summary = try writer.write(to: path)
        #expect(summary.bodies == 70_000)
        let bundle = try MountedBundle(path: path)
        #expect(bundle.entryCount == 70_000)
        #expect(try bundle.body(of: try #require(bundle.entry(for: "https://example.com/n/69999"))) == Data("body 69999".utf8))
        let unzip = try run("unzip", ["-tq", path])
        #expect(unzip.status == 0, "\(unzip.output.suffix(300))")
        let python = try run("python3", ["-c", "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); print(len(z.namelist()))", path])
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "70002")
    }

    @Test("a required signature: valid mounts; unsigned, other key and tampered are refused")
    func signatures() throws {
        let folder = try TemporaryFolder()
        let key = Curve25519.Signing.PrivateKey()
        let other = Curve25519.Signing.PrivateKey()
        func write(_ name: String, signingKey: Curve25519.Signing.PrivateKey?, text: String = "signed content") throws -> String {
            var writer = BundleWriter(options: .init(signingKey: signingKey))
            writer.add(.init(url: "https://example.com/", headers: [("content-type", "text/plain")], body: .data(Data(text.utf8))))
            try writer.write(to: folder.path + "/" + name)
            return folder.path + "/" + name
        }
        let publicKey = Array(key.publicKey.rawRepresentation)
        let signed = try write("signed.zip", signingKey: key)
        let bundle = try MountedBundle(path: signed, options: .init(requiredPublicKey: publicKey))
        #expect(bundle.isSigned)
        #expect(Checker.check(path: signed, publicKey: publicKey).signatureValid == true)

        let unsigned = try write("unsigned.zip", signingKey: nil)
        let e1 = try #require(throws: BundleError.self) { try MountedBundle(path: unsigned, options: .init(requiredPublicKey: publicKey)) }
        #expect(e1.code == .signature)
        #expect(e1.message.contains("not signed"))

        let resigned = try write("other.zip", signingKey: other)
        let e2 = try #require(throws: BundleError.self) { try MountedBundle(path: resigned, options: .init(requiredPublicKey: publicKey)) }
        #expect(e2.message.contains("another key"))

        // Swap in the signature block of a different bundle signed by the right key.
        let donor = try write("donor.zip", signingKey: key, text: "other content")
        let donorBundle = try MountedBundle(path: donor)
        let donorBlock = try MountedBundle.readMetadataEntry(
            donorBundle.metadata["signature.json"]!, from: donorBundle.file, limit: 1 << 16, bodyArea: donorBundle.directory.centralDirectoryOffset)
        // Its CRC is fixed, so only the signature's own check can refuse it.
        try forgeMetadataEntry("signature.json", in: signed) { bytes in
            #expect(donorBlock.count == bytes.count)
            bytes = donorBlock
        }
        var e3 = try #require(throws: BundleError.self) { try MountedBundle(path: signed, options: .init(requiredPublicKey: publicKey)) }
        #expect(e3.code == .signature && e3.message.contains("made over another bundle digest"), "\(e3)")
        // With the digest it names rewritten too, the donor's signature does not verify for this bundle.
        try forgeSignedDigest(in: signed)
        e3 = try #require(throws: BundleError.self) { try MountedBundle(path: signed, options: .init(requiredPublicKey: publicKey)) }
        #expect(e3.code == .signature && e3.message.contains("does not verify"), "\(e3)")
    }
}

extension ReaderTests {
    @Test("a bundle that cannot be opened keeps the system call's error as its cause, and says its reason")
    func openFailureKeepsItsCause() throws {
        let folder = try TemporaryFolder()
        let error = try #require(throws: BundleError.self) { try MountedBundle(path: folder.path + "/missing.zip") }
        #expect(error.code == .io && (error.underlying as? SystemCallError)?.code == ENOENT)
        #expect("\(error)" == "cannot open \(folder.path)/missing.zip: no such file or directory")
    }
}
