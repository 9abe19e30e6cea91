import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

@Suite("pack: folders and archives into bundles")
struct PackTests {
    @Test("a packed bundle lists, tests and extracts with unzip, bsdtar and Python's zipfile")
    func standardTools() throws {
        let (_, out, bundle, summary) = try packedSampleSite()
        #expect(summary.files == 8)
        #expect(summary.write.deduplicated >= 1)

        let test = try run("unzip", ["-t", bundle])
        #expect(test.status == 0)
        #expect(test.output.contains("No errors detected"))

        let list = try run("bsdtar", ["-tf", bundle])
        #expect(list.status == 0)
        let names = list.output.split(separator: "\n").map(String.init)
        #expect(names.contains("index.bin"))
        #expect(names.contains("manifest.json"))
        #expect(names.filter { $0.hasPrefix("b/") }.count == summary.write.bodies)
        #expect(names == names.sorted())

        let extracted = out.path + "/bsdtar"
        try FileManager.default.createDirectory(atPath: extracted, withIntermediateDirectories: true)
        #expect(try run("bsdtar", ["-xf", bundle, "-C", extracted]).status == 0)
        let unzipped = out.path + "/unzip"
        #expect(try run("unzip", ["-q", bundle, "-d", unzipped]).status == 0)

        // Every body, extracted by each tool, hashes to a digest its name starts (16 hex digits, or more).
        let python = """
            import hashlib, json, sys, zipfile
            z = zipfile.ZipFile(sys.argv[1])
            assert z.testzip() is None
            m = json.loads(z.read("manifest.json"))
            # Version 3: index.bin deflated, and its SHA-256 (the bundle digest) taken of its inflated bytes; the
            # manifest's bodies without their digest, which the index holds.
            assert z.getinfo("index.bin").compress_type == zipfile.ZIP_DEFLATED
            assert z.comment.decode().endswith(hashlib.sha256(z.read("index.bin")).hexdigest())
            assert m["formatVersion"] == 3 and all("sha256" not in e["body"] for e in m["entries"] if "body" in e)
            for name in z.namelist():
                if name.startswith("b/"):
                    assert len(name) >= 18 and hashlib.sha256(z.read(name)).hexdigest().startswith(name[2:]), name
                    for folder in sys.argv[2:]:
                        assert open(folder + "/" + name, "rb").read() == z.read(name), name
            print(len(m["entries"]), z.comment.decode())
            """
        let result = try run("python3", ["-c", python, bundle, extracted, unzipped])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(BundleFormat.commentPrefix + "sha256:\(summary.write.digest)"))
    }

    @Test("inspect says a bundle cut short is a damaged bundle, not a plain archive of b/ files")
    func inspectTruncated() async throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        _ = try packSite(site, to: out.path + "/a.zip")
        let whole = try Data(contentsOf: URL(fileURLWithPath: out.path + "/a.zip"))
        // The end records gone: libarchive still reads the entries one after another.
        try whole.prefix(whole.count - 100).write(to: URL(fileURLWithPath: out.path + "/cut.zip"))
        let listed = try await run(packagerExecutable, ["inspect", out.path + "/cut.zip"])
        #expect(listed.status == 1 && listed.output.contains("holds a packager bundle's entries") && listed.output.contains("cut short"), "\(listed.output)")
        #expect(!listed.output.contains("not a packager bundle"), "\(listed.output)")
        // A plain ZIP is still listed as an archive.
        let plain = try await run("/usr/bin/env", ["bsdtar", "-a", "-cf", out.path + "/plain.zip", "-C", site.path, "."])
        #expect(plain.status == 0, "\(plain.output)")
        let archive = try await run(packagerExecutable, ["inspect", out.path + "/plain.zip"])
        #expect(archive.status == 0 && archive.output.contains("not a packager bundle"), "\(archive.output)")
        // A whole ZIP of a bundle's files (extracted, then zipped again) is an archive like any other, not a damaged bundle.
        #expect(try await run(packagerExecutable, ["extract", out.path + "/a.zip", out.path + "/files"]).status == 0)
        let rezipped = try await run(
            "/usr/bin/env", ["bsdtar", "-a", "-cf", out.path + "/again.zip", "-C", out.path + "/files", "index.bin", "manifest.json", "b"])
        #expect(rezipped.status == 0, "\(rezipped.output)")
        let again = try await run(packagerExecutable, ["inspect", out.path + "/again.zip"])
        #expect(again.status == 0 && again.output.contains("not a packager bundle") && again.output.contains("index.bin"), "\(again.output)")
    }

    @Test("packing the same folder twice gives byte-identical files")
    func reproducible() throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        _ = try packSite(site, to: out.path + "/a.zip")
        // Touch every file: timestamps must not leak into the bundle.
        let later = Date(timeIntervalSinceNow: 3600)
        for case let file as String in FileManager.default.enumerator(atPath: site.path)! {
            try? FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: site.path + "/" + file)
        }
        _ = try packSite(site, to: out.path + "/b.zip", options: .init(concurrency: 1))
        let a = try Data(contentsOf: URL(fileURLWithPath: out.path + "/a.zip"))
        let b = try Data(contentsOf: URL(fileURLWithPath: out.path + "/b.zip"))
        #expect(a == b)
    }

    @Test("keys, folder URLs, redirects, media types and compression by content")
    func entries() throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        let path = out.path + "/site.zip"
        _ = try packSite(site, to: path)
        let bundle = try MountedBundle(path: path)

        let home = try #require(bundle.entry(for: "https://EXAMPLE.com:443/site/"))
        #expect(home.status == 200)
        #expect(home.header("content-type") == "text/html; charset=utf-8")
        #expect(home.body?.compression == .deflate)
        #expect(String(decoding: try bundle.body(of: home), as: UTF8.self).hasPrefix("<!doctype html><title>Home"))
        #expect(bundle.entry(for: "https://example.com/site/index.html")?.body == home.body)

        let docs = try #require(bundle.entry(for: "https://example.com/site/docs"))
        #expect(docs.status == 301)
        #expect(docs.header("location") == "https://example.com/site/docs/")
        #expect(docs.body == nil)
        #expect(bundle.entry(for: "https://example.com/site/docs/")?.status == 200)

        let photo = try #require(bundle.entry(for: "https://example.com/site/img/photo.jpg"))
        #expect(photo.header("content-type") == "image/jpeg")
        #expect(photo.body?.compression == .stored)
        #expect(try bundle.body(of: photo) == noise(20_000, seed: 1))
        #expect(bundle.entry(for: "https://example.com/site/img/copy-of-photo.jpg")?.body?.sha256 == photo.body?.sha256)
        #expect(photo.header("etag") == "\"\(photo.body!.sha256.prefix(32))\"")

        #expect(bundle.entry(for: "https://example.com/site/files/report%202026%20(final).txt") != nil)
        #expect(bundle.entry(for: "https://example.com/site/files/report 2026 (final).txt") != nil)
        #expect(bundle.entry(for: "https://example.com/site/data/fixture.json")?.header("content-type") == "application/json; charset=utf-8")
        #expect(bundle.entry(for: "https://example.com/site/.git/config") == nil)
        #expect(bundle.entry(for: "https://example.com/site/missing.html") == nil)
    }

    @Test("pack reads .tar.gz, .tar.zst and .zip archives of a site, with --strip-components", arguments: ["tar.gz", "tar.zst", "zip"])
    func archives(format: String) throws {
        let parent = try TemporaryFolder()
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let dist = parent.path + "/dist"
        try FileManager.default.copyItem(atPath: site.path, toPath: dist)
        let archive = parent.path + "/site.\(format)"
        #expect(try run("bsdtar", ["-a", "-cf", archive, "dist"], in: parent.path).status == 0)

        let out = try TemporaryFolder()
        let fromArchive = try Packer(options: .init(baseURL: "https://example.com/site/", stripComponents: 1)).pack(
            source: archive, output: out.path + "/a.zip")
        let fromFolder = try packSite(site, to: out.path + "/b.zip")
        #expect(fromArchive.write.digest == fromFolder.write.digest)
        // Nothing staged is left next to the output.
        #expect(try out.contents() == ["a.zip", "b.zip"])
    }

    @Test("a failed write leaves the previous bundle in place and no temporary files")
    func atomicWrite() throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        let path = out.path + "/site.zip"
        _ = try packSite(site, to: path)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        var writer = BundleWriter()
        writer.add(.init(url: "https://example.com/a", headers: [("content-type", "text/plain")], body: .data(Data("a".utf8))))
        writer.add(.init(url: "https://example.com/b", headers: [("content-type", "text/plain")], body: .file(site.path + "/does-not-exist")))
        #expect(throws: PackagerError.self) { try writer.write(to: path) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try out.contents() == ["site.zip"])
    }

    @Test("two entries for one request key are refused, naming the key")
    func duplicateKeys() throws {
        let out = try TemporaryFolder()
        var writer = BundleWriter(options: .init(dropQueryParameters: ["utm_*"]))
        writer.add(.init(url: "https://example.com/a?utm_source=x", body: .data(Data("1".utf8))))
        writer.add(.init(url: "https://EXAMPLE.com/a", body: .data(Data("2".utf8))))
        let error = try #require(throws: PackagerError.self) { try writer.write(to: out.path + "/x.zip") }
        #expect(error.code == .duplicate)
        #expect(error.message.contains("https://example.com/a"))
    }

    @Test("credentials and hop-by-hop headers are never stored")
    func droppedHeaders() throws {
        let out = try TemporaryFolder()
        let path = out.path + "/x.zip"
        var writer = BundleWriter()
        writer.add(
            .init(
                url: "https://example.com/",
                headers: [
                    ("Content-Type", "text/plain"), ("Set-Cookie", "session=SECRET-COOKIE"), ("Authorization", "Bearer SECRET-TOKEN"),
                    ("Transfer-Encoding", "chunked"), ("ETag", "\"v1\""),
                ], body: .data(Data("hello".utf8))))
        try writer.write(to: path)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(bytes.range(of: Data("SECRET".utf8)) == nil)
        let bundle = try MountedBundle(path: path)
        let entry = try #require(bundle.entry(for: "https://example.com/"))
        #expect(entry.headers.map(\.name) == ["content-type", "etag"])
    }
}

@Suite("manifest.json serialization")
struct ManifestWriterTests {
    @Test("strings with quotes, backslashes, control characters and non-ASCII text read back unchanged, with sorted keys")
    func roundTrip() throws {
        let tricky = "a \"quoted\" \\path\\ with\ttab, new\nline, bell \u{7}, \u{1F} and caf\u{E9} \u{1F600} /slash"
        let entries = [
            ManifestEntry(
                key: "https://example.com/a?q=\(tricky)", kind: .substituted, status: 200, headers: [["x-odd", tricky], ["content-type", "text/plain"]],
                mediaType: "text/plain", charset: "utf-8",
                body: ManifestBody(size: 12, storedSize: 10, compression: .deflate),
                etag: "W/\"x\"", lastModified: "Tue, 01 Jan 2030 00:00:00 GMT", cacheControl: "max-age=60", expires: "0", fetchedAt: "2030-01-01T00:00:00Z",
                date: "2030-01-01T00:00:01Z", source: "files/\(tricky)", contentEncoding: "identity", synthesized: ["last-modified"]),
            ManifestEntry(key: "https://example.com/r", kind: .recorded, status: 301, headers: [], redirectTo: "https://example.com/"),
        ]
        let manifest = Manifest(
            generator: "packager test", createdAt: "2030-01-01T00:00:00Z",
            rules: BundleRules(dropQueryParameters: ["utm_*", tricky], block: ["*/ads/*"], substitutions: ["https://cdn.example/x.js"]), entries: entries,
            totals: ManifestTotals(entries: 2, bodies: 1, bodyBytes: 12, storedBytes: 10))
        let bytes = ManifestWriter.encode(manifest)
        #expect(try JSONDecoder().decode(Manifest.self, from: Data(bytes)) == manifest)
        // Python's json module agrees, and finds every object's keys sorted and each entry on its own line.
        let file = try TemporaryFolder()
        try Data(bytes).write(to: URL(fileURLWithPath: file.path + "/manifest.json"))
        let check = try run(
            "python3",
            [
                "-c",
                """
                import json, sys
                text = open(sys.argv[1], encoding="utf-8").read()
                def sorted_keys(pairs):
                    keys = [k for k, _ in pairs]
                    assert keys == sorted(keys, key=lambda k: k.encode()), keys
                    return dict(pairs)
                doc = json.loads(text, object_pairs_hook=sorted_keys)
                lines = [l for l in text.splitlines() if l.startswith('    {')]
                assert len(lines) == len(doc["entries"]) == 2, lines
                print(doc["entries"][0]["headers"][0][1])
                """,
                file.path + "/manifest.json",
            ])
        #expect(check.status == 0)
        #expect(check.output.trimmingCharacters(in: .newlines) == tricky)
    }
}

extension PackTests {
    @Test("an archive holding a file and a folder of one name is refused as a key collision, before extraction (§5.3)")
    func fileAndFolderOfOneName() throws {
        let folder = try TemporaryFolder()
        try folder.file(
            "make.py",
            #"""
            import io, sys, tarfile
            with tarfile.open(sys.argv[1], "w:gz") as t:
                for name, data in [("site/about", b"file"), ("site/about/index.html", b"<p>folder</p>")]:
                    info = tarfile.TarInfo(name); info.size = len(data); t.addfile(info, io.BytesIO(data))
            """#)
        _ = try run("python3", [folder.path + "/make.py", folder.path + "/clash.tar.gz"])
        let error = #expect(throws: PackagerError.self) {
            try Packer(options: .init(baseURL: "https://example.com/", stripComponents: 1)).pack(
                source: folder.path + "/clash.tar.gz", output: folder.path + "/out.zip")
        }
        #expect(error?.message.contains("holds both a file about and about/index.html") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"))
    }

    @Test("a file or folder name that is not UTF-8 is keyed with U+FFFD and its bytes read all the same (§5.3)")
    func nonUTF8Names() throws {
        let folder = try TemporaryFolder()
        try folder.file(
            "make.py",
            #"""
            import os, sys
            root = sys.argv[1].encode()
            os.makedirs(root + b"/site/caf\xe9", exist_ok=True)
            open(root + b"/site/r\xe9sum\xe9.txt", "wb").write(b"latin-1 name")
            open(root + b"/site/caf\xe9/menu.txt", "wb").write(b"in a latin-1 folder")
            """#)
        _ = try run("python3", [folder.path + "/make.py", folder.path])
        _ = try Packer(options: .init(baseURL: "https://example.com/")).pack(source: folder.path + "/site", output: folder.path + "/out.zip")
        let bundle = try MountedBundle(path: folder.path + "/out.zip")
        let file = try #require(bundle.entry(forKey: "https://example.com/r%EF%BF%BDsum%EF%BF%BD.txt"), "\(bundle.entries.map(\.key))")
        #expect(try bundle.body(of: file) == Data("latin-1 name".utf8))
        let nested = try #require(bundle.entry(forKey: "https://example.com/caf%EF%BF%BD/menu.txt"), "\(bundle.entries.map(\.key))")
        #expect(try bundle.body(of: nested) == Data("in a latin-1 folder".utf8))
    }
}
