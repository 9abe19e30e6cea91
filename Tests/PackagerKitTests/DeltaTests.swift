import Crypto
import Foundation
import HTTPTypes
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("delta bundles: the next release as what changed, mounted over the last or rebuilt byte for byte")
struct DeltaTests {
    static let origin = "https://docs.example.com"

    /// Writes a release: `pages` by path (HTML), a shared image, a redirect and a blocked script, signed by `key`.
    static func release(_ pages: [String: String], to path: String, key: Curve25519.Signing.PrivateKey? = nil, indexStreamSize: Int? = nil) throws {
        var options = BundleWriter.Options(signingKey: key)
        if let indexStreamSize { options.indexStreamSize = indexStreamSize }
        var writer = BundleWriter(options: options)
        for (page, text) in pages.sorted(by: { $0.key < $1.key }) {
            writer.add(
                .init(
                    url: origin + page, headers: [("content-type", "text/html; charset=utf-8"), ("etag", "\"\(text.count)-\(page.count)\"")],
                    body: .data(Data(text.utf8))))
        }
        writer.add(.init(url: origin + "/logo.png", headers: [("content-type", "image/png")], body: .data(sampleImage)))
        writer.add(.init(url: origin + "/old", status: 301, headers: [("location", "/")]))
        writer.add(.init(url: origin + "/ads.js", status: 204, kind: .blocked))
        try writer.write(to: path)
    }

    /// Forty pages of a few KiB each, of text that deflates about as real prose does (each line names a token of its own).
    static let pages: [String: String] = Dictionary(
        uniqueKeysWithValues: (0..<40).map { page in
            let lines = (0..<(60 + page)).map { line in
                "<p>Page \(page), line \(line): token \(noise(6, seed: UInt64(page * 1000 + line)).map { String($0, radix: 16) }.joined())</p>\n"
            }
            return ("/p/\(page).html", lines.joined())
        })

    /// The next release: two pages edited, one removed, one added.
    static var nextPages: [String: String] {
        var next = pages
        next["/p/3.html"]! += "<p>edited</p>\n"
        next["/p/17.html"] = "<p>rewritten</p>\n" + next["/p/17.html"]!
        next["/p/30.html"] = nil
        next["/p/new.html"] = "<p>a new page</p>"
        return next
    }

    /// Every answer of `a` and `b` to `request`, compared: status, headers, body. With `exactGzip` false, a gzip
    /// answer may differ in its stream (and so its Content-Length), not in what it inflates to.
    static func sameAnswer(_ a: OfflineLoader, _ b: OfflineLoader, _ request: BundleRequest, exactGzip: Bool = true) throws -> String? {
        let x = a.response(for: request)
        let y = b.response(for: request)
        guard let x, let y else { return x == nil && y == nil ? nil : "\(request.url): one answers, the other does not" }
        if x.status != y.status { return "\(request.url): status \(x.status) vs \(y.status)" }
        let gzip = x.headers[.contentEncoding] == "gzip"
        var ignored: Set<HTTPField.Name> = [.age]
        if gzip && !exactGzip { ignored.insert(.contentLength) }
        let xs = x.headers.filter { !ignored.contains($0.name) }.map { "\($0.name): \($0.value)" }
        let ys = y.headers.filter { !ignored.contains($0.name) }.map { "\($0.name): \($0.value)" }
        if xs != ys { return "\(request.url): headers \(xs) vs \(ys)" }
        let (xb, yb) = (try x.bodyData(), try y.bodyData())
        // Whatever the stream, the length said is the length sent.
        if [200, 206].contains(y.status), let length = y.headers[.contentLength], Int(length) != yb.count {
            return "\(request.url): Content-Length \(length) for \(yb.count) bytes"
        }
        if gzip && !exactGzip {
            if try gunzip(xb) != gunzip(yb) { return "\(request.url): gzip answers inflate to different bytes" }
        } else if xb != yb {
            return "\(request.url): bodies differ"
        }
        return nil
    }

    @Test(
        "over the old release, the delta answers every key as the new one does (identity, gzip, ranges, 304), removed keys miss; apply rebuilds the new file byte for byte, its signature holding"
    )
    func answersAsNew() throws {
        let folder = try TemporaryFolder()
        let key = Curve25519.Signing.PrivateKey()
        let publicKey = Array(key.publicKey.rawRepresentation)
        try Self.release(Self.pages, to: folder.path + "/old.zip", key: key)
        try Self.release(Self.nextPages, to: folder.path + "/new.zip", key: key)
        let summary = try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/delta.zip")
        // The new page is carried; the two edited ones are patches of their old bodies.
        #expect(summary.info.carried == 1 && summary.info.patched == 2 && summary.info.added == 1 && summary.info.changed == 2)
        #expect(summary.info.removed == [Self.origin + "/p/30.html"])
        let newSize = try FileManager.default.attributesOfItem(atPath: folder.path + "/new.zip")[.size] as! UInt64
        #expect(summary.size < newSize / 10, "\(summary.size) of \(newSize)")

        // With --whole-bodies: every answer is the new bundle's, byte for byte, gzip streams included.
        let whole = try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/whole.zip", wholeBodies: true)
        #expect(whole.info.carried == 3 && whole.info.patched == 0 && whole.size > summary.size)

        let new = try OfflineLoader(path: folder.path + "/new.zip", publicKey: publicKey)
        let mounted = try MountedBundle.mount(paths: [folder.path + "/delta.zip", folder.path + "/old.zip"], options: .init(requiredPublicKey: publicKey))
        #expect(mounted.count == 1 && mounted[0].delta != nil && mounted[0].digest == new.bundles[0].digest && mounted[0].deltaDepth == 1)
        let delta = OfflineLoader(bundles: mounted)
        let wholeDelta = OfflineLoader(
            bundles: try MountedBundle.mount(paths: [folder.path + "/whole.zip", folder.path + "/old.zip"], options: .init(requiredPublicKey: publicKey)))
        var asked = 0
        for entry in new.bundles[0].entries {
            for headers in [[:], [HTTPField.Name.acceptEncoding: "gzip"], [.range: "bytes=5-99"], [.ifNoneMatch: entry.header("etag") ?? "\"x\""]]
                as [HTTPFields]
            {
                let request = BundleRequest(url: entry.key, headers: headers)
                let problem = try Self.sameAnswer(new, delta, request, exactGzip: false)
                #expect(problem == nil, "\(problem ?? "")")
                let exact = try Self.sameAnswer(new, wholeDelta, request)
                #expect(exact == nil, "whole bodies: \(exact ?? "")")
                asked += 1
            }
        }
        #expect(asked == new.bundles[0].entryCount * 4)
        // Misses: the removed page, and keys neither release has.
        for url in [Self.origin + "/p/30.html", Self.origin + "/nowhere", "https://other.example/p/1.html"] {
            #expect(delta.response(for: BundleRequest(url: url)) == nil, "\(url)")
        }
        // The carried pages come from the delta's file, the rest from the old release's.
        let changed = try #require(mounted[0].entry(for: Self.origin + "/p/3.html")?.body)
        let kept = try #require(mounted[0].entry(for: Self.origin + "/p/5.html")?.body)
        let added = try #require(mounted[0].entry(for: Self.origin + "/p/new.html")?.body)
        #expect(mounted[0].bodyFile(added.index).path.hasSuffix("delta.zip") && mounted[0].bodyFile(kept.index).path.hasSuffix("old.zip"))
        #expect(mounted[0].bodyFile(changed.index).inMemory && mounted[0].rebuiltLevel(changed.index) != nil)

        let applied = try DeltaBundles.apply([folder.path + "/delta.zip", folder.path + "/old.zip"], to: folder.path + "/rebuilt.zip")
        #expect(applied.target.digest == new.bundles[0].digest)
        #expect(try run("cmp", [folder.path + "/new.zip", folder.path + "/rebuilt.zip"]).status == 0)
        _ = try MountedBundle(path: folder.path + "/rebuilt.zip", options: .init(requiredPublicKey: publicKey))
        // Standard tools read the delta as the ZIP file it is.
        #expect(try run("unzip", ["-l", folder.path + "/delta.zip"]).output.contains("delta.json"))
        #expect(try run("bsdtar", ["-tf", folder.path + "/delta.zip"]).output.contains("delta.json"))
    }

    @Test(
        "one way to mount: a file, a delta over a file, over a bundle held, a chain of two, each answering as its release; a signature required of the delta; a delta given as a base or as a delta's delta refused before its base is read; a damaged base in a chain named; a URL without remote options refused"
    )
    func oneMountEntryPoint() async throws {
        let folder = try TemporaryFolder()
        let key = Curve25519.Signing.PrivateKey()
        let publicKey = Array(key.publicKey.rawRepresentation)
        var third = Self.nextPages
        third["/p/5.html"] = "<p>third</p>"
        try Self.release(Self.pages, to: folder.path + "/r1.zip", key: key)
        try Self.release(Self.nextPages, to: folder.path + "/r2.zip", key: key)
        try Self.release(third, to: folder.path + "/r3.zip", key: key)
        _ = try DeltaBundles.make(old: folder.path + "/r1.zip", new: folder.path + "/r2.zip", to: folder.path + "/d2.zip")
        _ = try DeltaBundles.make(old: folder.path + "/r2.zip", new: folder.path + "/r3.zip", to: folder.path + "/d3.zip")
        let signed = MountedBundle.Options(requiredPublicKey: publicKey)

        let r1 = try await MountedBundle.mount(.file(folder.path + "/r1.zip"), options: signed)
        let r2 = try await MountedBundle.mount(.file(folder.path + "/r2.zip"))
        let r3 = try await MountedBundle.mount(.file(folder.path + "/r3.zip"))
        let overFile = try await MountedBundle.mount(.delta(.file(folder.path + "/d2.zip"), over: .file(folder.path + "/r1.zip")), options: signed)
        let overHeld = try await MountedBundle.mount(.delta(.file(folder.path + "/d2.zip"), over: .mounted(r1)))
        let chain = try await MountedBundle.mount(
            .delta(.file(folder.path + "/d3.zip"), over: .delta(.file(folder.path + "/d2.zip"), over: .file(folder.path + "/r1.zip"))), options: signed)
        #expect(overFile.digest == r2.digest && overHeld.digest == r2.digest && overFile.deltaDepth == 1)
        #expect(chain.digest == r3.digest && chain.deltaDepth == 2)
        // The bundle held is the base itself, not mounted again.
        #expect(overHeld.base === r1)
        for (mounted, release) in [(overFile, r2), (overHeld, r2), (chain, r3)] {
            for entry in release.entries {
                let problem = try Self.sameAnswer(OfflineLoader(bundles: [release]), OfflineLoader(bundles: [mounted]), BundleRequest(url: entry.key))
                #expect(problem == nil, "\(problem ?? "")")
            }
        }
        #expect(try chain.entry(for: Self.origin + "/p/5.html").map { try chain.body(of: $0) } == Data("<p>third</p>".utf8))

        // Refusals, each with its code: a delta is no base of its own, a delta's delta part must be a file or URL,
        // the wrong key fails the delta's signature, a URL needs remote options.
        await #expect(throws: BundleError.self) { _ = try await MountedBundle.mount(.file(folder.path + "/d2.zip")) }
        let wrongKey = MountedBundle.Options(requiredPublicKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation))
        await #expect { _ = try await MountedBundle.mount(.delta(.file(folder.path + "/d2.zip"), over: .mounted(r1)), options: wrongKey) } throws: {
            ($0 as? BundleError)?.code == .signature
        }
        await #expect { _ = try await MountedBundle.mount(.delta(.mounted(r2), over: .mounted(r1))) } throws: {
            ($0 as? BundleError)?.code == .invalidArgument
        }
        #expect { _ = try BundleLocation("https://cdn.example.com/r.zip") } throws: { ($0 as? BundleError)?.code == .invalidArgument }
        // What stands as the delta is refused before its base is read (here, a base that does not exist).
        await #expect { _ = try await MountedBundle.mount(.delta(.mounted(r2), over: .file(folder.path + "/absent.zip"))) } throws: {
            ($0 as? BundleError)?.code == .invalidArgument
        }
        // A damaged base in a chain is named: its index's bytes changed, the error says which file.
        var damaged = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/r1.zip"))
        let index = try #require(damaged.range(of: Data("index.bin".utf8)))
        damaged[index.upperBound + 40] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: folder.path + "/damaged-r1.zip"))
        await #expect { _ = try await MountedBundle.mount(.delta(.file(folder.path + "/d2.zip"), over: .file(folder.path + "/damaged-r1.zip"))) } throws: {
            "\($0)".contains("damaged-r1.zip")
        }
        guard case .file(let path) = try BundleLocation(folder.path + "/r1.zip") else {
            Issue.record("a path is a file location")
            return
        }
        #expect(path == folder.path + "/r1.zip")
    }

    @Test(
        "a version-3 target's index.bin, deflated: held as a patch and rebuilt at its level (libdeflate's, or zlib's as the first version-3 bundles were); deflated by another encoder, carried whole; stored, held as a patch and rebuilt stored"
    )
    func deflatedIndexes() throws {
        let folder = try TemporaryFolder()
        let old = folder.path + "/old.zip"
        let new = folder.path + "/new.zip"
        try Self.release(Self.pages, to: old)
        try Self.release(Self.nextPages, to: new)
        func index(of path: String) throws -> ZipCentralEntry { try #require(try MountedBundle(path: path).metadata[BundleFormat.indexEntryName]) }
        func roundTrip(_ what: String) throws -> (DeltaInfo, [String]) {
            let delta = folder.path + "/\(what).delta.zip"
            let summary = try DeltaBundles.make(old: old, new: new, to: delta)
            let names =
                try MountedBundle.deltaInfo(atPath: delta) != nil ? try run("unzip", ["-Z1", delta]).output.split(separator: "\n").map(String.init) : []
            let rebuilt = folder.path + "/\(what).rebuilt.zip"
            try DeltaBundles.apply([delta, old], to: rebuilt)
            #expect(try Data(contentsOf: URL(fileURLWithPath: rebuilt)) == Data(contentsOf: URL(fileURLWithPath: new)), "\(what)")
            return (summary.info, names)
        }
        // As packager writes it: deflated at libdeflate's level 6, which the delta says; the index travels as a patch or
        // an edit.
        #expect(try index(of: new).method == 8)
        let (written, writtenNames) = try roundTrip("written")
        #expect(written.target.formatVersion == 3 && written.target.indexLevel == BundleWriter.indexLevel && BundleWriter.indexLevel == 6)
        #expect(!writtenNames.contains(BundleFormat.indexEntryName), "\(writtenNames)")
        let inflated = try MountedBundle(path: new).index.bytes
        let digest = try MountedBundle(path: new).digest
        let input = folder.path + "/index.bin"
        try Data(inflated).write(to: URL(fileURLWithPath: input))
        /// index.bin deflated again by Python's zlib with `memoryLevel`.
        /// With `check`: only compares the stream in the bundle with Python's, changing nothing.
        func redeflate(memoryLevel: Int, check: Bool = false) throws {
            let script =
                "import sys, zlib; d = sys.stdin.buffer.read(); c = zlib.compressobj(6, zlib.DEFLATED, -15, \(memoryLevel)); sys.stdout.buffer.write(c.compress(d) + c.flush())"
            let other = try run("sh", ["-c", "python3 -c '\(script)' < \(input) > \(input).deflated"])
            #expect(other.status == 0, "\(other.output)")
            let stream = [UInt8](try Data(contentsOf: URL(fileURLWithPath: input + ".deflated")))
            if check {
                let bundle = try MountedBundle(path: new)
                let entry = try index(of: new)
                let offset = try MountedBundle.metadataDataOffset(entry, in: bundle.file, bodyArea: bundle.directory.centralDirectoryOffset)
                #expect(try bundle.file.read(at: offset, count: Int(entry.compressedSize), what: "index.bin") == stream, "the streamed index differs")
                return
            }
            try replaceMetadataEntry(BundleFormat.indexEntryName, in: new, data: stream, method: 8, crc32: CRC32.checksum(inflated), size: inflated.count)
            // The digest is the inflated index's: the same bundle, whichever stream holds it.
            #expect(try MountedBundle(path: new).digest == digest)
        }
        // As the first version-3 bundles were written (zlib's level 6, memory level 8): level byte 0x86, still a patch.
        try redeflate(memoryLevel: 8)
        let (zlib, zlibNames) = try roundTrip("zlib")
        #expect(zlib.target.indexLevel == 0x86 && !zlibNames.contains(BundleFormat.indexEntryName), "\(zlibNames)")
        // Deflated by another encoder (zlib with another memory level): no level byte makes it again, so it goes whole.
        try redeflate(memoryLevel: 9)
        let (foreign, foreignNames) = try roundTrip("foreign")
        #expect(foreign.target.indexLevel == nil && foreignNames.contains(BundleFormat.indexEntryName), "\(foreignNames)")
        // A large index, deflated by zlib as a stream piece by piece (the threshold lowered to 1 byte here): the same
        // stream as zlib's in one call, so level byte 0x86 rebuilds it; standard tools read it.
        try Self.release(Self.nextPages, to: new, indexStreamSize: 1)
        #expect(try index(of: new).method == 8 && (try MountedBundle(path: new).index.bytes) == inflated)
        try redeflate(memoryLevel: 8, check: true)
        try Self.release(Self.nextPages, to: new, indexStreamSize: 1)
        let (streamed, streamedNames) = try roundTrip("streamed")
        #expect(streamed.target.indexLevel == 0x86 && !streamedNames.contains(BundleFormat.indexEntryName), "\(streamedNames)")
        #expect(try run("unzip", ["-tq", new]).status == 0)
        // Stored, as version 3 also allows: level 0, said by no field, and rebuilt stored.
        try replaceMetadataEntry(BundleFormat.indexEntryName, in: new, storing: inflated)
        #expect(try index(of: new).method == 0)
        let (stored, storedNames) = try roundTrip("stored")
        #expect(stored.target.indexLevel == nil && !storedNames.contains(BundleFormat.indexEntryName), "\(storedNames)")
    }

    @Test("a delta over the wrong base, or exported, and a negative port are the wrong input: exit 2, with the reason, in every form")
    func wrongInputExits2() async throws {
        let folder = try TemporaryFolder()
        let old = folder.path + "/old.zip"
        let new = folder.path + "/new.zip"
        let other = folder.path + "/other.zip"
        let delta = folder.path + "/delta.zip"
        try Self.release(Self.pages, to: old)
        try Self.release(Self.nextPages, to: new)
        try Self.release(["/only.html": "<p>another site</p>"], to: other)
        try DeltaBundles.make(old: old, new: new, to: delta)
        // Under a time limit: a regression would serve, not exit.
        let serve = try await run("timeout", ["30", packagerExecutable, "serve", delta, other, "--port", "0"])
        #expect(serve.status == 2 && serve.output.contains("not over"), "\(serve.output)")
        // A negative port is a port out of range, not a missing value.
        let port = try await run(packagerExecutable, ["serve", old, "--port", "-1"])
        #expect(port.status == 2 && port.output.contains("--port must be 0 to 65535"), "\(port.output)")
        for format in ["zip", "tar.zst", "har"] {
            let exported = try await run(packagerExecutable, ["export", delta, "--format", format, "-o", folder.path + "/out." + format])
            #expect(exported.status == 2 && exported.output.contains("and export that"), "\(format): \(exported.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out." + format))
        }
    }

    @Test("a delta forged to name another base (its comment and delta.json) is refused over it as damaged, exit 1, not as the wrong base")
    func forgedBase() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        try Self.release(Self.pages, to: path + "/old.zip")
        try Self.release(Self.nextPages, to: path + "/new.zip")
        try Self.release(["/only.html": "<p>another site</p>"], to: path + "/other.zip")
        // index.bin whole: an edit or a patch of old's index would not apply to other's, and be refused before the bodies.
        _ = try DeltaBundles.make(
            old: try MountedBundle(path: path + "/old.zip"), new: path + "/new.zip", to: path + "/delta.zip", wholeBodies: false, indexForm: .whole)
        // Every mention of old's digest (delta.json's base, the comment's base:) made other's, delta.json's CRC-32 set right.
        let oldDigest = Array(try MountedBundle(path: path + "/old.zip").digest.utf8)
        let otherDigest = Array(try MountedBundle(path: path + "/other.zip").digest.utf8)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/delta.zip")))
        var mentions = 0
        var at = 0
        while let found = bytes[at...].firstRange(of: oldDigest) {
            bytes.replaceSubrange(found, with: otherDigest)
            mentions += 1
            at = found.upperBound
        }
        #expect(mentions == 2)
        let name = Array(BundleFormat.deltaEntryName.utf8)
        let headers = (0...(bytes.count - name.count)).filter { bytes[$0..<($0 + name.count)].elementsEqual(name) }
        #expect(headers.count == 2)
        let local = headers[0] - 30
        let start = headers[0] + name.count + Int(bytes.u16(local + 28))
        let crc = CRC32.checksum(Array(bytes[start..<(start + Int(bytes.u32(local + 18)))]))
        for offset in [local + 14, headers[1] - 46 + 16] { withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(offset..<(offset + 4), with: $0) } }
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/forged.zip"))
        // The digests match, so other is the base the delta names; what the delta needs and other lacks says the delta lies.
        let error = #expect(throws: BundleError.self) {
            _ = try MountedBundle(deltaPath: path + "/forged.zip", base: try MountedBundle(path: path + "/other.zip"))
        }
        #expect(error?.code == .corruptIndex && error?.message.contains("damaged") == true, "\(error?.message ?? "")")
        let serve = try await run("timeout", ["30", packagerExecutable, "serve", path + "/forged.zip", path + "/other.zip", "--port", "0"])
        #expect(serve.status == 1 && serve.output.contains("damaged"), "\(serve.output)")
    }

    @Test(
        "check refuses a delta whose delta.json lies (each count, the removed keys, body area, size, index level) or is no description; apply refuses the lies it would rebuild wrong; the true one, written again, passes"
    )
    func checkHoldsDeltaJSON() throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        try Self.release(Self.pages, to: path + "/old.zip")
        try Self.release(Self.nextPages, to: path + "/new.zip")
        // index.bin as an edit, so that the target's index is deflated again by target.indexLevel when it is rebuilt.
        _ = try DeltaBundles.make(
            old: try MountedBundle(path: path + "/old.zip"), new: path + "/new.zip", to: path + "/delta.zip", wholeBodies: false, indexForm: .edit)
        #expect(try run("unzip", ["-Z1", path + "/delta.zip"]).output.contains(MountedBundle.indexEditName))
        let original = try #require(try MountedBundle.deltaInfo(atPath: path + "/delta.zip"))
        #expect(original.target.indexLevel != nil && !original.removed.isEmpty)
        let lies: [(what: String, change: (inout [String: Any]) -> Void, said: String)] = [
            ("unchanged", { _ in }, ""),
            ("removed", { $0["removed"] = [String]() }, "it removes but does not list"),
            ("added", { $0["added"] = 1_000_000 }, "added is 1000000, but the delta adds \(original.added)"),
            ("changed", { $0["changed"] = original.changed + 1 }, "changed is \(original.changed + 1), but the delta changes \(original.changed)"),
            ("carried", { $0["carried"] = original.carried + 1 }, "carried is \(original.carried + 1)"),
            ("patched", { $0["patched"] = original.patched + 1 }, "patched is \(original.patched + 1)"),
            ("reused", { $0["reused"] = original.reused + 1 }, "reused is \(original.reused + 1)"),
            ("bodyArea", { Self.setTarget(&$0, "bodyArea", original.target.bodyArea + 1) }, "target.bodyArea"),
            ("size", { Self.setTarget(&$0, "size", UInt64(1) << 50) }, "not the one the delta stands for"),
            ("indexLevel 1", { Self.setTarget(&$0, "indexLevel", 1) }, "not the one the delta stands for"),
            ("indexLevel 255", { Self.setTarget(&$0, "indexLevel", 255) }, "which is no level byte"),
            // Not a description at all: said in words, where (not Swift's rendering of a DecodingError).
            ("added text", { $0["added"] = "many" }, "is not a delta description: added: expected a whole number"),
            ("size -1", { Self.setTarget(&$0, "size", -1) }, "is not a delta description"),
        ]
        for lie in lies {
            let forged = path + "/forged-\(lie.what.replacingOccurrences(of: " ", with: "-")).zip"
            try FileManager.default.copyItem(atPath: path + "/delta.zip", toPath: forged)
            var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(original)) as? [String: Any])
            lie.change(&object)
            try replaceMetadataEntry(
                BundleFormat.deltaEntryName, in: forged, storing: Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
            let report = Checker.check(path: forged, bases: [path + "/old.zip"])
            if lie.said.isEmpty {
                #expect(report.isValid, "\(lie.what): \(report.issues)")
                continue
            }
            #expect(!report.isValid && report.issues.contains { $0.message.contains(lie.said) }, "\(lie.what): \(report.issues)")
            #expect(!report.issues.contains { $0.message.contains("DecodingError") }, "\(report.issues)")
            // The lies a rebuild would get wrong, apply refuses too (the counts only describe; a rebuild does not use them).
            if ["size", "indexLevel 1", "indexLevel 255", "bodyArea"].contains(lie.what) {
                #expect(throws: (any Error).self, "\(lie.what)") { try DeltaBundles.apply([forged, path + "/old.zip"], to: path + "/x.zip") }
                #expect(!FileManager.default.fileExists(atPath: path + "/x.zip"))
            }
        }
    }

    @Test("check of a chain holds every delta's delta.json to what it does, the inner ones too")
    func checkHoldsEveryDelta() throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        var third = Self.nextPages
        third["/third.html"] = "<p>a third release</p>"
        try Self.release(Self.pages, to: path + "/r0.zip")
        try Self.release(Self.nextPages, to: path + "/r1.zip")
        try Self.release(third, to: path + "/r2.zip")
        try DeltaBundles.make(old: path + "/r0.zip", new: path + "/r1.zip", to: path + "/d1.zip")
        try DeltaBundles.make(old: path + "/r1.zip", new: path + "/r2.zip", to: path + "/d2.zip")
        #expect(Checker.check(path: path + "/d2.zip", bases: [path + "/d1.zip", path + "/r0.zip"]).isValid)
        // The inner delta says it adds keys it does not.
        let info = try #require(try MountedBundle.deltaInfo(atPath: path + "/d1.zip"))
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(info)) as? [String: Any])
        object["added"] = info.added + 7
        try replaceMetadataEntry(BundleFormat.deltaEntryName, in: path + "/d1.zip", storing: Array(try JSONSerialization.data(withJSONObject: object)))
        let report = Checker.check(path: path + "/d2.zip", bases: [path + "/d1.zip", path + "/r0.zip"])
        #expect(report.issues.contains { $0.message.hasPrefix(path + "/d1.zip: added is \(info.added + 7)") }, "\(report.issues)")
    }

    private static func setTarget(_ object: inout [String: Any], _ key: String, _ value: Any) {
        var target = object["target"] as? [String: Any] ?? [:]
        target[key] = value
        object["target"] = target
    }

    @Test("refused, with the reason: a delta alone, a delta over another bundle, a delta cut short, a chain past the depth limit; a chain within it answers")
    func refusals() throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        try Self.release(Self.pages, to: path + "/old.zip")
        try Self.release(Self.nextPages, to: path + "/new.zip")
        try DeltaBundles.make(old: path + "/old.zip", new: path + "/new.zip", to: path + "/delta.zip")
        // Alone: the reader says what it is, and what to mount it over.
        let alone = #expect(throws: BundleError.self) { _ = try MountedBundle(path: path + "/delta.zip") }
        #expect(alone?.code == .unsupported && alone?.message.contains("delta") == true)
        // Over the wrong base: named.
        let wrong = #expect(throws: BundleError.self) {
            _ = try MountedBundle(deltaPath: path + "/delta.zip", base: try MountedBundle(path: path + "/new.zip"))
        }
        #expect(wrong?.code == .wrongBase && wrong?.message.contains("new.zip") == true, "\(wrong?.message ?? "")")
        let applied = #expect(throws: BundleError.self) { try DeltaBundles.apply([path + "/delta.zip", path + "/new.zip"], to: path + "/x.zip") }
        #expect(applied?.code == .wrongBase, "\(applied?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: path + "/x.zip"))
        // Cut short: refused at mount (the end records are gone) or at the first read, never a wrong byte.
        let whole = try Data(contentsOf: URL(fileURLWithPath: path + "/delta.zip"))
        try whole.prefix(whole.count - 40).write(to: URL(fileURLWithPath: path + "/cut.zip"))
        #expect(throws: BundleError.self) { _ = try MountedBundle(deltaPath: path + "/cut.zip", base: try MountedBundle(path: path + "/old.zip")) }

        // A chain: each release a delta over the one before; nine deep is refused, eight answer as the last release.
        var releases = Self.pages
        try Self.release(releases, to: path + "/r0.zip")
        for n in 1...9 {
            releases["/p/\(n).html"]! += "<p>release \(n)</p>"
            try Self.release(releases, to: path + "/r\(n).zip")
            try DeltaBundles.make(old: path + "/r\(n - 1).zip", new: path + "/r\(n).zip", to: path + "/d\(n).zip")
        }
        let eight = try MountedBundle.mount(paths: (1...8).reversed().map { path + "/d\($0).zip" } + [path + "/r0.zip"])
        let r8 = try MountedBundle(path: path + "/r8.zip")
        #expect(eight.count == 1 && eight[0].deltaDepth == 8 && eight[0].digest == r8.digest)
        let page = try #require(eight[0].entry(for: Self.origin + "/p/8.html"))
        #expect(String(decoding: try eight[0].body(of: page), as: UTF8.self).hasSuffix("<p>release 8</p>"))
        let nine = #expect(throws: BundleError.self) {
            _ = try MountedBundle.mount(paths: (1...9).reversed().map { path + "/d\($0).zip" } + [path + "/r0.zip"])
        }
        #expect(nine?.message.contains("at most 8") == true)
        try DeltaBundles.apply((1...8).reversed().map { path + "/d\($0).zip" } + [path + "/r0.zip"], to: path + "/r8-rebuilt.zip")
        #expect(try run("cmp", [path + "/r8.zip", path + "/r8-rebuilt.zip"]).status == 0)
    }

    @Test("packager serve DELTA OLD answers as packager serve NEW, byte for byte, through curl; inspect shows the delta's base and counts")
    func serveAndInspect() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        try Self.release(Self.pages, to: path + "/old.zip")
        try Self.release(Self.nextPages, to: path + "/new.zip")
        let made = try await run(packagerExecutable, ["delta", path + "/old.zip", path + "/new.zip", "-o", path + "/delta.zip"])
        #expect(made.status == 0 && made.output.contains("1 body carried, 2 as patches"), "\(made.output)")
        let inspected = try await run(packagerExecutable, ["inspect", path + "/delta.zip"])
        let oldDigest = try MountedBundle(path: path + "/old.zip").digest
        #expect(inspected.output.contains("mounts over the bundle sha256:\(oldDigest)"), "\(inspected.output)")
        #expect(inspected.output.contains("removed \(Self.origin)/p/30.html"))
        let alone = try await run(packagerExecutable, ["serve", path + "/delta.zip", "--port", "0"])
        #expect(alone.status == 2 && alone.output.contains("give the bundle it was made over after it"), "\(alone.output)")
        #expect(inspected.output.contains("(packager diff BASE \(path)/delta.zip names every key added, changed and removed)"), "\(inspected.output)")
        try await withServe(path + "/new.zip") { newBase, _ in
            try await withServe(path + "/delta.zip", [path + "/old.zip"]) { deltaBase, _ in
                for page in Self.nextPages.keys.sorted() + ["/logo.png", "/old", "/ads.js", "/p/30.html"] {
                    for headers in [[], [("Accept-Encoding", "gzip")], [("Range", "bytes=3-40")]] as [[(String, String)]] {
                        let a = try await curlExchange(newBase + page, headers: headers, in: folder)
                        let b = try await curlExchange(deltaBase + page, headers: headers, in: folder)
                        // The two edited pages are rebuilt from patches: their gzip streams are the runtime's own.
                        let rebuilt = ["/p/3.html", "/p/17.html"].contains(page) && a.header("content-encoding") == "gzip"
                        #expect(a.status == b.status, "\(page) \(headers)")
                        #expect(rebuilt ? (try gunzip(a.body)) == (try gunzip(b.body)) : a.body == b.body, "\(page) \(headers)")
                        for name in ["content-type", "content-length", "content-encoding", "etag", "content-range", "location"]
                        where !(rebuilt && name == "content-length") {
                            #expect(a.header(name) == b.header(name), "\(page) \(headers) \(name)")
                        }
                    }
                }
            }
        }
        let applied = try await run(packagerExecutable, ["apply", path + "/old.zip", path + "/delta.zip", "-o", path + "/rebuilt.zip"])
        #expect(applied.status == 0, "\(applied.output)")
        #expect(try await run("cmp", [path + "/new.zip", path + "/rebuilt.zip"]).status == 0)
    }
}

extension DeltaTests {
    @Test("refresh --delta-out writes the delta from the bundle as it was to the one it wrote in its place; diff reads a delta over its base")
    func refreshAndDiff() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let path = folder.path
            let page = Self.pages["/p/7.html"]!
            origin.set("/p/7.html", .text(page + "<p>updated</p>", type: "text/html", headers: [("ETag", "\"v2\"")]))
            origin.set("/p/8.html", .text(Self.pages["/p/8.html"]!, type: "text/html", headers: [("ETag", "\"same\"")]))
            // Written with its index stored (--stored-index): refresh keeps it so.
            var options = BundleWriter.Options()
            options.storesIndex = true
            var writer = BundleWriter(options: options)
            writer.add(.init(url: origin.base + "/p/7.html", headers: [("content-type", "text/html"), ("etag", "\"v1\"")], body: .data(Data(page.utf8))))
            writer.add(
                .init(
                    url: origin.base + "/p/8.html", headers: [("content-type", "text/html"), ("etag", "\"same\"")],
                    body: .data(Data(Self.pages["/p/8.html"]!.utf8))))
            try writer.write(to: path + "/site.zip")
            try FileManager.default.copyItem(atPath: path + "/site.zip", toPath: path + "/as-it-was.zip")
            let refreshed = try await run(packagerExecutable, ["refresh", path + "/site.zip", "--allow-private-addresses", "--delta-out", path + "/d.zip"])
            #expect(refreshed.status == 0 && refreshed.output.contains("wrote \(path)/d.zip"), "\(refreshed.output)")
            let delta = try MountedBundle(deltaPath: path + "/d.zip", base: try MountedBundle(path: path + "/as-it-was.zip"))
            #expect(delta.digest == (try MountedBundle(path: path + "/site.zip")).digest && delta.delta?.patched == 1)
            #expect(try MountedBundle(path: path + "/site.zip").metadata[BundleFormat.indexEntryName]?.method == 0)
            let updated = try #require(delta.entry(forKey: origin.base + "/p/7.html"))
            #expect(String(decoding: try delta.body(of: updated), as: UTF8.self).hasSuffix("<p>updated</p>"))
            try DeltaBundles.apply([path + "/d.zip", path + "/as-it-was.zip"], to: path + "/rebuilt.zip")
            #expect(try await run("cmp", [path + "/site.zip", path + "/rebuilt.zip"]).status == 0)
            // diff OLD DELTA: the delta is read over the older bundle.
            let diff = try await run(packagerExecutable, ["diff", path + "/as-it-was.zip", path + "/d.zip"])
            #expect(diff.status == 1 && diff.output.contains("~ \(origin.base)/p/7.html") && diff.output.contains("1 changed, 1 unchanged"), "\(diff.output)")
        }
    }
}

@Suite("byte patches (PKGDIFF1): made and applied, and hostile ones refused")
struct BinaryPatchTests {
    @Test("a patch rebuilds its target from its source: edits, moves, shifted records, empty and unrelated inputs")
    func roundTrips() throws {
        let base = Array(noise(40_000, seed: 7))
        var shifted = base
        // Records whose offsets all moved by the same amount, as index.bin's body records do.
        for r in stride(from: 0, to: shifted.count - 68, by: 68) { shifted[r + 33] &+= 3 }
        let cases: [([UInt8], [UInt8])] = [
            (base, base), (base, Array(base[100...]) + Array(base[..<100])), (base, shifted),
            (base, Array(base[..<20_000]) + Array("edit".utf8) + Array(base[20_000...])),
            ([], base), (base, []), ([], []), (base, Array(noise(5_000, seed: 8))), (Array("short".utf8), Array("shorter".utf8)),
        ]
        for (source, target) in cases {
            let patch = BinaryDiff.make(source: source, target: target)
            #expect(try BinaryPatch.apply(patch, to: source, limit: 1 << 20, what: "test") == target)
        }
        // What the patches cost: a shifted record costs a few bytes, an insertion about its own size.
        #expect(BinaryDiff.make(source: base, target: shifted).count < shifted.count / 8)
        #expect(BinaryDiff.make(source: base, target: cases[3].1).count < 200)
    }

    @Test("a damaged or hostile patch is refused with a reason, never a crash or a wrong target")
    func hostile() throws {
        let source = Array(noise(1000, seed: 9))
        let target = Array(source[10..<500]) + Array("new".utf8)
        let good = BinaryDiff.make(source: source, target: target)
        func patch(_ ops: [UInt8], sourceLength: Int = 1000, targetLength: Int) -> [UInt8] {
            var bytes = BinaryPatch.magic
            for value in [sourceLength, targetLength] {
                var v = value
                while v >= 0x80 {
                    bytes.append(UInt8(v & 0x7F) | 0x80)
                    v >>= 7
                }
                bytes.append(UInt8(v))
            }
            return bytes + ops
        }
        let hostile: [[UInt8]] = [
            [], Array("PKGDIFF2".utf8), Array(good.dropLast()), good + [0], patch([0, 0, 0x90, 0x4E], targetLength: 10_000),  // copies past the source
            patch([0, 0x7F, 5], targetLength: 5),  // a negative start
            patch([1, 50, 1, 2, 3], targetLength: 50),  // adds past the patch
            patch([2, 1, 0], targetLength: 1),  // unknown operation
            patch([0, 0, 0], targetLength: 1),  // an empty copy
            patch([], sourceLength: 999, targetLength: 0),  // made for another source
            patch([0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], targetLength: 2),  // an overflowing length
            patch([], targetLength: 1 << 30),  // over the limit
        ]
        for bytes in hostile {
            #expect(throws: BundleError.self) { _ = try BinaryPatch.apply(bytes, to: source, limit: 1 << 20, what: "test") }
        }
    }

    @Test("an index edit or patch that claims huge counts or lengths is refused before the reader allocates for them")
    func hugeClaims() throws {
        let folder = try TemporaryFolder()
        try DeltaTests.release(DeltaTests.pages, to: folder.path + "/old.zip")
        let base = try MountedBundle(path: folder.path + "/old.zip")
        func varint(_ value: UInt64) -> [UInt8] {
            var v = value
            var out: [UInt8] = []
            while v >= 0x80 {
                out.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            return out + [UInt8(v)]
        }
        // 2^27 bodies, then 2^27 entries after an empty body list: over what 8 bytes can make.
        for edit in [IndexEdit.magic + varint(1 << 27), IndexEdit.magic + varint(0) + varint(1 << 27)] {
            let error = #expect(throws: BundleError.self) { _ = try IndexEdit.apply(edit, to: base.index) }
            #expect(error?.message.contains("count") == true, "\(error?.message ?? "")")
        }
        // A patch that claims a target of 2^60 bytes: refused by its limit, nothing reserved for it.
        let patch = BinaryPatch.magic + varint(UInt64(base.index.bytes.count)) + varint(1 << 60)
        #expect(throws: BundleError.self) { _ = try BinaryPatch.apply(patch, to: base.index.bytes, limit: 1 << 32, what: "test") }
    }

    @Test("a delta that removes a key its base lacks is refused as damaged (corrupt-index); a chain that names one delta twice is wrong-base")
    func removalAndLoop() throws {
        let folder = try TemporaryFolder()
        try DeltaTests.release(DeltaTests.pages, to: folder.path + "/old.zip")
        try DeltaTests.release(DeltaTests.nextPages, to: folder.path + "/new.zip")
        try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/delta.zip")
        // delta.json's removed key, /p/30.html, made /p/99.html (which the base lacks), its CRC-32 set right in both headers.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder.path + "/delta.zip")))
        let name = Array(BundleFormat.deltaEntryName.utf8)
        let headers = (0...(bytes.count - name.count)).filter { bytes[$0..<($0 + name.count)].elementsEqual(name) }
        #expect(headers.count == 2)
        let local = headers[0] - 30
        let start = headers[0] + name.count + Int(bytes.u16(local + 28))
        let length = Int(bytes.u32(local + 18))
        var json = Array(bytes[start..<(start + length)])
        let from = Array("/p/30.html".utf8)
        let at = try #require((0...(json.count - from.count)).first { json[$0..<($0 + from.count)].elementsEqual(from) })
        json.replaceSubrange(at..<(at + from.count), with: Array("/p/99.html".utf8))
        bytes.replaceSubrange(start..<(start + length), with: json)
        let crc = CRC32.checksum(json)
        for offset in [local + 14, headers[1] - 46 + 16] { withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(offset..<(offset + 4), with: $0) } }
        try Data(bytes).write(to: URL(fileURLWithPath: folder.path + "/removes.zip"))
        let error = #expect(throws: BundleError.self) {
            _ = try MountedBundle(deltaPath: folder.path + "/removes.zip", base: try MountedBundle(path: folder.path + "/old.zip"))
        }
        #expect(error?.code == .corruptIndex && error?.message.contains("/p/99.html") == true, "\(error?.message ?? "")")
        // The same delta twice over the base: the outer one's base is the new release, not the old.
        let loop = #expect(throws: BundleError.self) {
            _ = try MountedBundle.mount(paths: [folder.path + "/delta.zip", folder.path + "/delta.zip", folder.path + "/old.zip"])
        }
        #expect(loop?.code == .wrongBase, "\(loop?.message ?? "")")
    }

    @Test("a carried body whose local header names a length of 65535 is refused at mount as hostile, not a crash")
    func hostileCarriedHeader() throws {
        let folder = try TemporaryFolder()
        try DeltaTests.release(DeltaTests.pages, to: folder.path + "/old.zip")
        try DeltaTests.release(DeltaTests.nextPages, to: folder.path + "/new.zip")
        try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/delta.zip")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder.path + "/delta.zip")))
        // The first local header is the carried body's (entries are written bodies first).
        #expect(bytes[0..<4] == [0x50, 0x4B, 0x03, 0x04] && bytes[30..<32] == Array("b/".utf8)[...])
        bytes[26] = 0xFF
        bytes[27] = 0xFF
        bytes[28] = 0xFF
        bytes[29] = 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: folder.path + "/hostile.zip"))
        let error = #expect(throws: BundleError.self) {
            _ = try MountedBundle(deltaPath: folder.path + "/hostile.zip", base: try MountedBundle(path: folder.path + "/old.zip"))
        }
        #expect(error?.code == .hostile, "\(error?.message ?? "")")
    }

    @Test(
        "check DELTA BASE checks the bundle the delta stands for, every body through its patches or its base; a damaged delta fails; a delta alone or over another bundle is refused with the reason"
    )
    func checkADelta() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path
        try DeltaTests.release(DeltaTests.pages, to: path + "/old.zip")
        try DeltaTests.release(DeltaTests.nextPages, to: path + "/new.zip")
        _ = try DeltaBundles.make(old: path + "/old.zip", new: path + "/new.zip", to: path + "/delta.zip")
        let new = try MountedBundle(path: path + "/new.zip")
        let checked = try await run(packagerExecutable, ["check", path + "/delta.zip", path + "/old.zip"])
        #expect(
            checked.status == 0 && checked.output.contains("ok: \(path)/delta.zip: \(new.entryCount) entries, \(new.bodyCount) bodies"), "\(checked.output)")
        let json = try await run(packagerExecutable, ["check", path + "/delta.zip", path + "/old.zip", "--json"])
        #expect(json.status == 0 && json.output.contains(new.digest), "\(json.output)")
        // Alone, over a bundle it does not stand over, or over a file that does not exist: not checked (the input is
        // wrong, exit 2), with what to give.
        let alone = try await run(packagerExecutable, ["check", path + "/delta.zip"])
        #expect(alone.status == 2 && alone.output.contains("packager check \(path)/delta.zip BASE"), "\(alone.output)")
        let wrong = try await run(packagerExecutable, ["check", path + "/delta.zip", path + "/new.zip"])
        #expect(wrong.status == 2 && wrong.output.contains("is a delta over the bundle sha256:"), "\(wrong.output)")
        let notDelta = try await run(packagerExecutable, ["check", path + "/new.zip", path + "/old.zip"])
        #expect(notDelta.status == 2 && notDelta.output.contains("give bases only after a delta"), "\(notDelta.output)")
        let missing = try await run(packagerExecutable, ["check", path + "/delta.zip", path + "/missing.zip"])
        #expect(missing.status == 2 && missing.output.contains("missing.zip: no such file or directory"), "\(missing.output)")
        // With several files, the damaged one is named: a byte of the delta's index edit or patch flipped (its message
        // names only the entry, which every delta has).
        var badBytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path + "/delta.zip")))
        let indexNames = [MountedBundle.indexEditName, MountedBundle.indexPatchName].map { Array($0.utf8) }
        let header = try #require(
            (30..<(badBytes.count - 16)).first { at in
                badBytes.u32(at - 30) == 0x0403_4b50 && indexNames.contains { badBytes[at..<min(at + $0.count, badBytes.count)].elementsEqual($0) }
            })
        badBytes[header + Int(badBytes.u16(header - 4)) + Int(badBytes.u16(header - 2))] ^= 0xFF
        try Data(badBytes).write(to: URL(fileURLWithPath: path + "/bad.zip"))
        let chained = try await run("timeout", ["30", packagerExecutable, "serve", path + "/bad.zip", path + "/old.zip", "--port", "0"])
        #expect(chained.status == 1 && chained.output.contains("packager: \(path)/bad.zip: index."), "\(chained.output)")
        let serveMissing = try await run("timeout", ["30", packagerExecutable, "serve", path + "/delta.zip", path + "/missing.zip", "--port", "0"])
        #expect(serveMissing.status == 2 && serveMissing.output.contains("no such file or directory"), "\(serveMissing.output)")
        // A byte of a carried body's data flipped: the delta still mounts; reading that body fails the check.
        let located = try await run(
            "/usr/bin/python3",
            [
                "-c",
                "import sys, zipfile; i = next(i for i in zipfile.ZipFile(sys.argv[1]).infolist() if i.filename.startswith('b/')); print(i.header_offset + 30 + len(i.filename) + len(i.extra) + i.compress_size // 2)",
                path + "/delta.zip",
            ])
        let offset = try #require(Int(located.output.trimmingCharacters(in: .whitespacesAndNewlines)), "\(located.output)")
        try FileManager.default.copyItem(atPath: path + "/delta.zip", toPath: path + "/damaged.zip")
        try flipByte(at: offset, in: path + "/damaged.zip")
        let damaged = try await run(packagerExecutable, ["check", path + "/damaged.zip", path + "/old.zip"])
        #expect(damaged.status == 1 && damaged.output.contains("FAILED"), "\(damaged.output)")
        // An entry no delta holds, added to its ZIP: it still mounts (nothing reads it); the check names it.
        try FileManager.default.copyItem(atPath: path + "/delta.zip", toPath: path + "/extra.zip")
        let added = try await run(
            "/usr/bin/python3",
            ["-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1], 'a'); z.writestr('evil.html', '<script></script>'); z.close()", path + "/extra.zip"])
        #expect(added.status == 0, "\(added.output)")
        let extra = try await run(packagerExecutable, ["check", path + "/extra.zip", path + "/old.zip"])
        #expect(extra.status == 1 && extra.output.contains("evil.html: unexpected entry in a delta bundle"), "\(extra.output)")
    }

    @Test("a delta whose patches were altered is refused at mount, or its body at read, never a wrong byte")
    func alteredDelta() throws {
        let folder = try TemporaryFolder()
        try DeltaTests.release(DeltaTests.pages, to: folder.path + "/old.zip")
        try DeltaTests.release(DeltaTests.nextPages, to: folder.path + "/new.zip")
        let summary = try DeltaBundles.make(old: folder.path + "/old.zip", new: folder.path + "/new.zip", to: folder.path + "/delta.zip")
        #expect(summary.info.patched == 2)
        let listing = try run("unzip", ["-Z", "-v", folder.path + "/delta.zip"]).output
        #expect(listing.contains("p/") && (listing.contains("index.patch") || listing.contains("index.edit")))
        // Every byte of the delta but its end records, flipped in turn (a sample): mount or read fails, or answers right.
        let size = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/delta.zip")).count
        let new = try MountedBundle(path: folder.path + "/new.zip")
        var refused = 0
        for offset in stride(from: 0, to: size - 200, by: 37) {
            let path = folder.path + "/altered.zip"
            try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: folder.path + "/delta.zip", toPath: path)
            try flipByte(at: offset, in: path)
            guard let mounted = try? MountedBundle(deltaPath: path, base: try MountedBundle(path: folder.path + "/old.zip")) else {
                refused += 1
                continue
            }
            for entry in new.entries {
                guard let mine = mounted.entry(forKey: entry.key) else {
                    Issue.record("offset \(offset): \(entry.key) is gone")
                    continue
                }
                if let body = try? mounted.body(of: mine) { #expect(body == (try new.body(of: entry)), "offset \(offset): \(entry.key)") }
            }
        }
        #expect(refused > 0)
    }
}
