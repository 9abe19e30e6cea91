import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

@Suite("extract, export and inspect through libarchive")
struct ArchiveTests {
    @Test(
        "extract refuses '..', absolute names and links before writing anything",
        arguments: [
            ("zip", "../escape.txt", "'..' component"),
            ("zip", "/tmp/absolute.txt", "absolute path"),
            ("tar", "link", "link"),
            ("tar", "hardlink", "link"),
        ])
    func refusesUnsafeEntries(format: String, name: String, expected: String) throws {
        let folder = try TemporaryFolder()
        let archive = folder.path + "/evil.\(format)"
        let python = """
            import io, sys, tarfile, zipfile
            fmt, name, path = sys.argv[1], sys.argv[2], sys.argv[3]
            if fmt == "zip":
                with zipfile.ZipFile(path, "w") as z:
                    z.writestr("ok.txt", "fine")
                    z.writestr(name, "gotcha")
            else:
                with tarfile.open(path, "w") as t:
                    data = b"fine"
                    info = tarfile.TarInfo("ok.txt"); info.size = len(data); t.addfile(info, io.BytesIO(data))
                    info = tarfile.TarInfo(name)
                    info.type = tarfile.SYMTYPE if name == "link" else tarfile.LNKTYPE
                    info.linkname = "/etc/passwd" if name == "link" else "ok.txt"
                    t.addfile(info)
            """
        #expect(try run("python3", ["-c", python, format, name, archive]).status == 0)
        let destination = folder.path + "/out"
        let error = try #require(throws: PackagerError.self) { try Extractor.extract(archive: archive, to: destination) }
        #expect(error.code == .unsafeEntry)
        #expect(error.message.contains(expected))
        #expect(!FileManager.default.fileExists(atPath: destination + "/ok.txt"))
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/escape.txt"))
    }

    @Test(
        "a file that is no archive (JSON, plain text: libarchive would read it as an mtree listing) or an empty one is refused by pack, inspect and extract with exit 2, naming it; nothing is written"
    )
    func notAnArchiveIsRefused() async throws {
        let folder = try TemporaryFolder()
        try Data(#"{"a": 1}"#.utf8).write(to: URL(fileURLWithPath: folder.path + "/data.json"))
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: folder.path + "/text.txt"))
        try Data().write(to: URL(fileURLWithPath: folder.path + "/empty.zip"))
        for (name, says) in [
            ("data.json", "Unrecognized archive format"), ("text.txt", "Unrecognized archive format"), ("empty.zip", "it is empty"),
        ] {
            let file = folder.path + "/" + name
            let runs = [
                ["pack", file, "--base-url", "https://docs.example/", "-o", folder.path + "/out.zip"], ["inspect", file],
                ["extract", file, folder.path + "/out"],
            ]
            for arguments in runs {
                let result = try await run(packagerExecutable, arguments)
                #expect(
                    result.status == 2 && result.output.contains("\(file) is not an archive packager reads") && result.output.contains(says),
                    "\(arguments): \(result.status) \(result.output)")
            }
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip") && !FileManager.default.fileExists(atPath: folder.path + "/out"))
        }
    }

    @Test("a negative --strip-components is a usage error, in the CLI and the library, not a crash")
    func negativeStripComponents() async throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        _ = try packSite(site, to: out.path + "/site.zip")
        let result = try await run(packagerExecutable, ["extract", out.path + "/site.zip", out.path + "/x", "--strip-components=-1"])
        #expect(result.status == 2, "\(result.output)")  // a usage error, not a trap
        #expect(result.output.contains("cannot be negative"))
        #expect(throws: PackagerError.self) { try Extractor.extract(archive: out.path + "/site.zip", to: out.path + "/y", stripComponents: -1) }
    }

    @Test("extract refuses an archive past its entry or byte limit before writing anything")
    func extractLimits() throws {
        let (_, out, bundle, _) = try packedSampleSite()
        let many = #expect(throws: PackagerError.self) { try Extractor.extract(archive: bundle, to: out.path + "/a", limits: .init(entries: 2)) }
        #expect(many?.message.contains("more than 2 entries") == true)
        let big = #expect(throws: PackagerError.self) { try Extractor.extract(archive: bundle, to: out.path + "/b", limits: .init(bytes: 100)) }
        #expect(big?.message.contains("more than the limit of 100 bytes") == true, "\(String(describing: big))")
        #expect(!FileManager.default.fileExists(atPath: out.path + "/a"), "nothing is created for a refused archive")
        #expect(!FileManager.default.fileExists(atPath: out.path + "/b"))
        #expect(try Extractor.extract(archive: bundle, to: out.path + "/c").files > 2)
    }

    @Test("an entry whose data runs past its stated size fails the extraction with a message, not a trap")
    func entryLongerThanStated() async throws {
        let out = try TemporaryFolder()
        try out.file(
            "lie.py",
            #"""
            import struct, sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("a.txt", b"x" * (5 << 20))
            b = bytearray(open(sys.argv[1], "rb").read())
            b[22:26] = struct.pack("<I", 1000)                     # the local header's uncompressed size
            cd = b.rfind(b"PK\x01\x02"); b[cd + 24:cd + 28] = struct.pack("<I", 1000)
            open(sys.argv[1], "wb").write(b)
            """#)
        _ = try await run("python3", [out.path + "/lie.py", out.path + "/lie.zip"])
        let error = #expect(throws: PackagerError.self) { try Extractor.extract(archive: out.path + "/lie.zip", to: out.path + "/x") }
        #expect(error?.message.contains("disagrees with its headers") == true || error?.message.contains("cannot read") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: out.path + "/x"), "the folder it made is gone with what it wrote")
        let cli = try await run(packagerExecutable, ["pack", out.path + "/lie.zip", "--base-url", "https://example.com/", "-o", out.path + "/p.zip"])
        #expect(cli.status == 1, "\(cli.output)")
    }

    @Test("extract never overwrites: files already there are left and counted as skipped; one that fails midway removes what it wrote, not what was there")
    func extractLeavesWhatWasThere() async throws {
        let (_, out, bundle, summary) = try packedSampleSite()
        let first = try Extractor.extract(archive: bundle, to: out.path + "/d")
        #expect(first.files == summary.write.bodies + 2 && first.skipped == 0)
        try "edited".write(toFile: out.path + "/d/manifest.json", atomically: false, encoding: .utf8)
        let again = try await run(packagerExecutable, ["extract", bundle, out.path + "/d"])
        #expect(again.status == 0 && again.output.contains("extracted 0 files"), "\(again.output)")
        #expect(again.output.contains("\(first.files) files were there already and were left as they were"), "\(again.output)")
        #expect(try String(contentsOfFile: out.path + "/d/manifest.json", encoding: .utf8) == "edited")

        // A good entry, then one whose data runs past its stated size: the extraction fails on the second.
        try out.file(
            "half.py",
            #"""
            import struct, sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("sub/ok.txt", b"fine")
                z.writestr("sub/lie.txt", b"x" * (5 << 20))
            b = bytearray(open(sys.argv[1], "rb").read())
            local = b.find(b"PK\x03\x04", 4); b[local + 22:local + 26] = struct.pack("<I", 1000)
            cd = b.rfind(b"PK\x01\x02"); b[cd + 24:cd + 28] = struct.pack("<I", 1000)
            open(sys.argv[1], "wb").write(b)
            """#)
        _ = try await run("python3", [out.path + "/half.py", out.path + "/half.zip"])
        try out.file("e/mine.txt", "mine")
        let failed = #expect(throws: PackagerError.self) { try Extractor.extract(archive: out.path + "/half.zip", to: out.path + "/e") }
        #expect(failed?.message.contains("what the extraction had written was removed") == true, "\(String(describing: failed))")
        let left = try FileManager.default.subpathsOfDirectory(atPath: out.path + "/e")
        #expect(left == ["mine.txt"], "\(left)")

        // An archive that names one file twice: the first is kept, and the second is not counted as there already.
        _ = try await run(
            "python3",
            [
                "-c",
                "import sys, zipfile, warnings; warnings.simplefilter('ignore'); z = zipfile.ZipFile(sys.argv[1], 'w'); z.writestr('t.txt', 'first'); z.writestr('t.txt', 'second'); z.close()",
                out.path + "/twice.zip",
            ])
        let twice = try Extractor.extract(archive: out.path + "/twice.zip", to: out.path + "/t")
        #expect(twice.files == 1 && twice.repeated == 1 && twice.skipped == 0, "\(twice)")
        #expect(try String(contentsOfFile: out.path + "/t/t.txt", encoding: .utf8) == "first")
    }

    @Test("extract writes a bundle's entries, identical to unzip's")
    func extractBundle() throws {
        let (_, out, bundle, summary) = try packedSampleSite()
        let result = try Extractor.extract(archive: bundle, to: out.path + "/mine")
        #expect(result.files == summary.write.bodies + 2)
        #expect(try run("unzip", ["-q", bundle, "-d", out.path + "/theirs"]).status == 0)
        #expect(try run("diff", ["-r", out.path + "/mine", out.path + "/theirs"]).status == 0)
    }

    @Test("export writes a reproducible tar.zst that bsdtar reads, bodies inflated")
    func export() throws {
        let (site, out, bundle, summary) = try packedSampleSite()
        try Exporter.export(bundle: bundle, to: out.path + "/a.tar.zst", format: .tarZstd)
        try Exporter.export(bundle: bundle, to: out.path + "/b.tar.zst", format: .tarZstd)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out.path + "/a.tar.zst")) == Data(contentsOf: URL(fileURLWithPath: out.path + "/b.tar.zst")))
        let list = try run("bsdtar", ["-tf", out.path + "/a.tar.zst"])
        #expect(list.status == 0)
        #expect(list.output.split(separator: "\n").count == summary.write.bodies + 2)
        #expect(try run("bsdtar", ["-xf", out.path + "/a.tar.zst", "-C", site.path, "manifest.json"]).status == 0)
        let listing = try Inspector.inspect(path: out.path + "/a.tar.zst")
        guard case .archive(let archive) = listing else {
            Issue.record("a tarball is not a bundle")
            return
        }
        #expect(archive.filter == "zstd")
        #expect(archive.entries.contains { $0.path == "manifest.json" })
    }

    @Test("inspect lists a bundle by request key with media types and compression")
    func inspectBundle() throws {
        let site = try TemporaryFolder()
        try makeSite(in: site)
        let out = try TemporaryFolder()
        _ = try packSite(site, to: out.path + "/site.zip")
        guard case .bundle(let listing) = try Inspector.inspect(path: out.path + "/site.zip") else {
            Issue.record("a bundle was listed as a plain archive")
            return
        }
        let photo = try #require(listing.entries.first { $0.key.hasSuffix("/img/photo.jpg") })
        #expect(photo.mediaType == "image/jpeg")
        #expect(photo.compression == .stored)
        let css = try #require(listing.entries.first { $0.key.hasSuffix("/css/site.css") })
        #expect(css.compression == .deflate)
        #expect(css.storedSize! < css.size!)
        #expect(listing.totals.entries == listing.entries.count)
    }
}

extension ArchiveTests {
    @Test("an archive libarchive refuses keeps libarchive's error as the cause; a YAML error keeps Yams's")
    func causesAreKept() throws {
        let folder = try TemporaryFolder()
        try folder.file("broken.tar.gz", "not gzip at all, and not a tar either")
        let refused = try #require(throws: PackagerError.self) {
            try Packer(options: .init(baseURL: "https://example.com/")).pack(source: folder.path + "/broken.tar.gz", output: folder.path + "/o.zip")
        }
        // Not an archive at all: wrong input (exit 2), libarchive's reason kept.
        #expect(refused.code == .invalidInput && refused.cause is LibArchive.ArchiveError, "\(refused)")
        #expect("\(refused)".contains(": \((refused.cause as? LibArchive.ArchiveError)?.message ?? "-")"), "\(refused)")
        let yaml = try #require(throws: PackagerError.self) { try DeclarationParser().parse("seeds: [a\n", file: "d.yml") }
        #expect(yaml.cause != nil && yaml.message.hasPrefix("d.yml:"), "\(yaml)")
    }
}
