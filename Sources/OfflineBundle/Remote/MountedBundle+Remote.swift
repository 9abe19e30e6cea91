import Crypto
import Foundation
import HTTPTypes
import Logging

extension MountedBundle {
    /// Bytes a cold mount's first request asks for from the end of the object: the end records, the comment and the
    /// metadata entries' central records with room to spare. 64 KiB less the most an `index.bin` local header and its
    /// ZIP64 extra take, so a cold mount fetches at most `index.bin` and 64 KiB.
    package static let remoteTailBytes = (64 << 10) - 128

    /// Mounts the bundle at `url` (`https://…`, or `http://`) by HTTP range reads, without downloading it: the end
    /// of the object, then `index.bin` (two requests, whatever the entry count; one when the object is small). Each
    /// body is fetched by one range request when first read and kept in `remote`'s cache. The object is pinned by its
    /// ETag and size: every later request is conditional on them (`If-Match`), and a replaced object is never mixed
    /// with the mounted index (reads of what the cache lacks fail with ``BundleError/Code-swift.struct/changed``, and
    /// the file state reads changed, so a ``BundleReloader`` mounts the new version).
    ///
    /// With a cache folder that holds this URL's object from an earlier mount, mounting asks once whether it is still
    /// the same (`HEAD` with `If-None-Match`) and reads the rest from the cache; when the server cannot be reached it
    /// mounts from the cache alone (``RemoteOptions/offlineFromCache``), with a warning.
    ///
    /// Blocks while it fetches: call it off Swift's cooperative pool, or use ``mount(_:options:)``.
    ///
    /// - Throws: ``BundleError``: `.remote` (naming the URL) when the server cannot be reached or answers an error, or
    ///   does not serve ranges and `remote` refuses whole objects; `.changed` when the object was replaced twice while
    ///   mounting; and what mounting a file throws for a bundle that is damaged, hostile or unsigned.
    package convenience init(url: String, remote: RemoteOptions, options: Options = Options()) throws {
        let parts = try RemoteMount(url: url, remote: remote, options: options).run()
        self.init(
            file: parts.file, directory: parts.directory, metadata: parts.metadata, index: parts.index, digest: parts.digest, signed: parts.signed,
            options: options, stores: [parts.file], relocation: nil, base: nil, delta: nil, manifestPatch: nil)
    }

    /// Mounts `location`: a remote bundle when it is an `http://` or `https://` URL (through `remote`), else the file
    /// at that path.
    ///
    /// - Throws: ``BundleError`` as each mount does; `.invalidArgument` for a URL without `remote`.
    package convenience init(location: String, options: Options = Options(), remote: RemoteOptions?) throws {
        if case .remote(let url, let remote) = try BundleLocation(location, remote: remote) {
            try self.init(url: url, remote: remote, options: options)
        } else {
            try self.init(path: location, options: options)
        }
    }

    /// Fetches what the cache lacks of the whole object, in requests of at most 64 MiB, each body checked against its
    /// SHA-256 as it comes (what reads every body, as `packager check` does, asks first); a no-op for a file.
    public func fetchWhole() throws { try file.remote?.prefetchAll() }

    /// The URL (without its query) a remote bundle was mounted from; nil for a file.
    public var remoteURL: String? { file.remote?.shownURL }

    /// For a remote bundle: the requests sent and bytes fetched since it was mounted (mounting included), and the
    /// bytes its cache holds; nil for a file.
    public var remoteTraffic: (requests: Int, bytes: UInt64, held: UInt64)? {
        guard let remote = file.remote else { return nil }
        let traffic = remote.traffic
        return (traffic.requests, traffic.bytes, remote.store.heldBytes)
    }

    /// For a remote bundle: whether its object was replaced since it was mounted, asking the server now (a `HEAD`,
    /// conditional on the pinned ETag; blocks); false for a file, or when the server cannot say.
    public func remoteReplaced() -> Bool { file.remote?.checkReplaced() ?? false }

    /// For a remote bundle seen replaced: what the server holds at its URL now (``RemoteObject/currentVersion()``);
    /// nil when it was not seen replaced, for a file, or when the server cannot say.
    package func remoteVersionSinceReplaced() -> String? {
        guard let remote = file.remote, remote.changeReason != nil else { return nil }
        return remote.currentVersion()
    }

    /// For a remote bundle: calls `watcher` once, when a read or a check sees its object replaced.
    public func onRemoteReplaced(_ watcher: @escaping @Sendable () -> Void) { file.remote?.onChange(watcher) }

    /// For a remote bundle: fetches the bodies of `keys` (a service's startup set: its home page, its API's first
    /// answers) that the cache lacks, before they are asked for. Bodies lie in the order of their digests, so a set is
    /// scattered; bodies less than `gap` bytes apart share one range request (the bytes between them are fetched too).
    /// Returns the requests sent; 0 for a file, or when the cache holds them all. Keys the bundle lacks are skipped.
    /// Blocks while it fetches.
    ///
    /// - Throws: ``BundleError`` as a read does (`.remote`, `.changed`).
    @discardableResult
    public func prefetch(keys: [String], gap: UInt64 = 64 << 10) throws -> Int {
        guard file.remote != nil else { return 0 }
        var spans: [Range<UInt64>] = []
        for key in keys {
            guard let body = entry(forKey: key)?.body, bodyFile(body.index) === file, !bodyIsLocal(body.index) else { continue }
            let record = bodyRecord(at: body.index)
            spans.append(record.localHeaderOffset..<(record.dataOffset + record.storedSize))
        }
        var merged: [Range<UInt64>] = []
        for span in spans.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, span.lowerBound <= last.upperBound + gap {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, span.upperBound)
            } else {
                merged.append(span)
            }
        }
        let before = file.remote?.traffic.requests ?? 0
        for span in merged { try file.prefetch(span, whole: true) }
        return (file.remote?.traffic.requests ?? 0) - before
    }

    /// Whether body `bodyIndex`'s stored bytes are here to read without a network request (always for a file).
    package func bodyIsLocal(_ bodyIndex: Int) -> Bool {
        let file = bodyFile(bodyIndex)
        guard file.remote != nil else { return true }
        let record = bodyRecord(at: bodyIndex)
        return file.holds(record.localHeaderOffset..<(record.dataOffset + record.storedSize))
    }
}

/// One remote mount: a warm start from the cache when the pinned object is unchanged (or the server is down), else a
/// cold mount in two requests. A mount that sees the object replaced half-way starts again, twice at most.
struct RemoteMount {
    let url: String
    let remote: RemoteOptions
    let options: MountedBundle.Options
    let shownURL: String
    private let logger = Logger(label: "offline-bundle.remote")

    struct Parts {
        var file: BundleFile
        var directory: ZipDirectory
        var metadata: [String: ZipCentralEntry]
        var index: BundleIndex
        var digest: String
        var signed: Bool
    }

    init(url: String, remote: RemoteOptions, options: MountedBundle.Options) {
        self.url = url
        self.remote = remote
        self.options = options
        shownURL = RemoteObject.shown(url)
    }

    func run() throws -> Parts {
        var attempt = 0
        while true {
            do {
                return try mountOnce()
            } catch let error as BundleError where error.code == .changed && attempt < 2 {
                attempt += 1
                logger.info("the remote bundle changed while it mounted; mounting again", metadata: ["url": "\(shownURL)"])
            } catch var error as BundleError {
                // Every refusal names the URL.
                if !error.message.contains(shownURL) { error.message = "\(shownURL): \(error.message)" }
                throw error
            }
        }
    }

    private func mountOnce() throws -> Parts {
        if let folder = remote.cacheDirectory, let pin = RemotePin.load(folder: folder, url: url) {
            switch revalidate(pin) {
            case .same:
                if let parts = try? open(pin: pin, folder: folder) {
                    parts.file.remote?.count(requests: 1, bytes: 0)
                    return parts
                }
            case .unreachable(let reason):
                guard remote.offlineFromCache else { throw BundleError(.remote, "cannot reach \(shownURL): \(reason)") }
                do {
                    let parts = try open(pin: pin, folder: folder)
                    logger.warning(
                        "the server cannot be reached; mounted what the cache holds of the last version seen",
                        metadata: ["url": "\(shownURL)", "reason": "\(reason)", "etag": "\(pin.etag ?? "")"])
                    return parts
                } catch {
                    throw BundleError(.remote, "cannot reach \(shownURL) (\(reason)), and the cache does not hold enough of it to mount: \(error)")
                }
            case .replaced:
                break
            }
        }
        return try cold()
    }

    private enum Revalidation {
        case same, replaced
        case unreachable(String)
    }

    /// Whether the pinned object is still the one at `url`: one `HEAD` with `If-None-Match`.
    private func revalidate(_ pin: RemotePin) -> Revalidation {
        var headers = remote.headers
        if let etag = pin.etag { headers[.ifNoneMatch] = etag }
        let request = RemoteRequest(method: "HEAD", url: url, headers: headers, timeout: remote.timeout, maxBodyBytes: 0)
        let reply: RemoteReply
        do {
            reply = try RemoteObject.send(request, options: remote, shownURL: shownURL)
        } catch {
            return .unreachable("\((error as? BundleError)?.message ?? "\(error)")")
        }
        switch reply.status {
        case 304:
            return .same
        case 200:
            let length = reply.value(of: "Content-Length").flatMap { UInt64($0) }
            let same = reply.value(of: "ETag") == pin.etag && (length == nil || length == pin.size)
            return same && pin.etag != nil ? .same : .replaced
        default:
            return .replaced
        }
    }

    /// Mounts the pinned object from the cache, fetching what it lacks.
    private func open(pin: RemotePin, folder: String) throws -> Parts {
        let store = try RangeStore(folder: folder, digest: pin.digest, size: pin.size, budget: remote.cacheBytes)
        let object = RemoteObject(url: url, options: remote, etag: pin.etag, lastModified: pin.lastModified, size: pin.size, store: store)
        do {
            return try parts(of: object, digest: pin.digest)
        } catch let error as BundleError where error.code == .corruptIndex || error.code == .corruptDirectory || error.code == .notABundle {
            // What the cache holds is not what the pin says: forgotten, and the object mounted cold.
            store.forgetAll()
            throw error
        }
    }

    /// The object's last bytes, then its index. `again`: a second try, after the cache's bytes of this digest failed
    /// the mount's checks (they are forgotten first).
    private func cold(again: Bool = false) throws -> Parts {
        let tailCount = MountedBundle.remoteTailBytes
        let cacheBytes = remote.cacheBytes
        let wholeAnswer = remote.wholeObject
        // No reply's body is read past what was asked: the last bytes asked for, or under `.download` an object sent
        // whole within the cache's bound (it is kept there whole, or refused), streamed to a file of this process's own
        // as it comes (never held in memory) and checked from there before any of it is kept.
        let request = RemoteRequest(
            method: "GET", url: url, headers: remote.headers.adding("Range", "bytes=-\(tailCount)"), timeout: remote.timeout,
            maxBodyBytes: Int(clamping: max(UInt64(tailCount), cacheBytes)),
            bodyLimit: { status, headers in
                switch status {
                case 206:
                    guard let parsed = RemoteObject.contentRange(RemoteObject.field("Content-Range", in: headers)), let total = parsed.total,
                        parsed.range.upperBound == total, parsed.range.count <= tailCount
                    else { return 0 }
                    return parsed.range.count
                case 200:
                    guard case .download = wholeAnswer else { return 0 }
                    return Int(clamping: cacheBytes)
                default:
                    return 0
                }
            },
            sink: { status, _ in status == 200 ? BodySpool() : nil })
        let reply = try RemoteObject.send(request, options: remote, shownURL: shownURL)
        let start: UInt64
        let size: UInt64
        var tail = reply.body
        var whole: RangeStore?
        switch reply.status {
        case 206:
            guard let parsed = RemoteObject.contentRange(reply.value(of: "Content-Range")), let total = parsed.total,
                parsed.range.upperBound == total, parsed.range.count <= tailCount, !reply.overLimit, reply.body.count == parsed.range.count
            else {
                let sent = reply.overLimit ? "more bytes than asked" : "\(reply.body.count) bytes"
                throw BundleError(
                    .remote,
                    "\(shownURL) answered a request for its last \(tailCount) bytes with \(reply.value(of: "Content-Range") ?? "no Content-Range") and \(sent)"
                )
            }
            (start, size) = (parsed.range.lowerBound, total)
        case 200:
            // nginx answers a range of an empty file with all of it: nothing.
            let length = reply.value(of: "Content-Length").flatMap { UInt64($0) }
            let received = reply.sink.map { ($0 as? BodySpool)?.written ?? 0 } ?? UInt64(reply.body.count)
            guard length != 0 && (reply.overLimit || received > 0) else {
                throw BundleError(.notABundle, "\(shownURL) is empty: it is not a bundle")
            }
            let ranges = reply.value(of: "Accept-Ranges").map { "Accept-Ranges: \($0)" } ?? "no Accept-Ranges"
            guard case .download = remote.wholeObject else {
                throw BundleError(
                    .remote,
                    "\(shownURL) does not serve ranges: it answered a range request with the whole object (200, \(ranges)); it must be downloaded whole"
                )
            }
            guard !reply.overLimit else { throw RemoteObject.wholeObjectNotKept(shownURL: shownURL, size: length) }
            guard let file = try RemoteObject.wholeObject(reply, shownURL: shownURL), file.size == received, length == nil || length == received else {
                throw BundleError(.remote, "\(shownURL) sent \(received) bytes of an object of \(length.map { "\($0)" } ?? "unsaid size")")
            }
            logger.warning(
                "the server does not serve ranges: it answered a range request with the whole object, which is kept in the cache whole",
                metadata: ["url": "\(shownURL)", "bytes": "\(received)", "accept-ranges": "\(ranges)"])
            (start, size) = (0, received)
            // The object's last bytes, where the end record is, read back from the file.
            let count = Int(min(received, UInt64(tailCount)))
            tail = [UInt8](repeating: 0, count: count)
            guard case .done(count) = tail.withUnsafeMutableBytes({ file.read(into: $0, at: received - UInt64(count)) }) else {
                throw BundleError(.io, "cannot read back what \(shownURL) sent from a file of this process's own")
            }
            whole = file
        case 416:
            throw BundleError(.remote, "\(shownURL) is empty (416 to a request for its last bytes): it is not a bundle")
        case 404, 410:
            throw BundleError(.remote, "\(shownURL) is not there (\(reply.status))")
        case 401, 403:
            throw BundleError(.remote, "\(shownURL) refused the request (\(reply.status)): give the bucket's credentials (a header, or a presigned URL)")
        default:
            throw BundleError(.remote, "\(shownURL) answered \(reply.status) to a range request")
        }
        let digest = try Self.digest(fromTail: tail, shownURL: shownURL)
        let store = try RangeStore(folder: remote.cacheDirectory, digest: digest, size: size, budget: remote.cacheBytes)
        if let folder = remote.cacheDirectory { RangeStore.trim(folder: folder, budget: remote.cacheBytes, keep: store.path) }
        let cachedBefore = store.heldBytes > 0
        let etag = reply.value(of: "ETag")
        let lastModified = reply.value(of: "Last-Modified")
        let object = RemoteObject(url: url, options: remote, etag: etag, lastModified: lastModified, size: size, store: store)
        object.count(requests: 1, bytes: whole?.size ?? UInt64(reply.body.count))
        // Read from a file of this process's own until the index is checked: then each body in it is checked before it
        // is kept.
        if let whole { object.stage(whole: whole) } else { try object.stage(reply.body, at: start) }
        if reply.status == 200 {
            // Said once, here.
            object.wholeObjectSaid()
        }
        let parts: Parts
        do {
            parts = try self.parts(of: object, digest: digest)
        } catch let error as BundleError
            where cachedBefore && !again && [.corruptIndex, .corruptDirectory, .notABundle, .hostile].contains(error.code)
        {
            // The cache held bytes of this digest that fail the checks (fetched for another URL that claimed it, or
            // damaged): forgotten, and the mount made again from the server alone.
            logger.warning("the cache's bytes of this bundle failed the mount's checks; mounting from the server", metadata: ["url": "\(shownURL)"])
            store.forgetAll()
            return try cold(again: true)
        }
        if let folder = remote.cacheDirectory {
            RemotePin(url: url, etag: etag, lastModified: lastModified, size: size, digest: digest).save(folder: folder)
        }
        return parts
    }

    /// What the refusal of a delta mounted as a bundle says (``MountedBundle/mount(paths:options:remote:)`` mounts it
    /// over the path after it instead).
    static let deltaRefusal = "is a delta bundle"

    /// The bundle digest the archive comment names, read from the object's last bytes.
    static func digest(fromTail tail: [UInt8], shownURL: String) throws -> String {
        guard let end = ZipDirectory.endRecordPosition(in: tail) else {
            throw BundleError(.notABundle, "\(shownURL) has no ZIP end record in its last \(tail.count) bytes: it is not a bundle, or it is cut short")
        }
        let comment = String(decoding: tail[(end + ZipConstants.endSize)...], as: UTF8.self)
        if comment.hasPrefix("packager-delta/") {
            throw BundleError(
                .unsupported,
                "\(shownURL) \(deltaRefusal): give the bundle it was made over after it (packager serve DELTA_URL BASE; in Swift, MountedBundle.mount(.delta(.remote(DELTA_URL, options), over: BASE)))"
            )
        }
        let version = BundleFormat.version(ofComment: comment)
        let prefix = BundleFormat.commentPrefix(version: version ?? BundleFormat.version) + "sha256:"
        guard let version, version >= 2, comment.utf8.count == prefix.utf8.count + 64 else {
            if comment.hasPrefix("packager-bundle/") {
                throw BundleError(.unsupported, "\(shownURL) is a bundle of format \(comment.prefix(17)); remote mounts read versions 2 and 3")
            }
            throw BundleError(.notABundle, "\(shownURL) lacks the packager bundle comment: it is not a bundle")
        }
        let digest = String(comment.dropFirst(prefix.count))
        guard digest.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw BundleError(.notABundle, "\(shownURL) has a bundle comment whose digest is not lowercase hex")
        }
        return digest
    }

    /// The mount's parts read through `object`: end records, the metadata records at the end of the central
    /// directory, and `index.bin` in one request (with `signature.json` when it lies near and a key is required).
    private func parts(of object: RemoteObject, digest: String) throws -> Parts {
        let modified = object.lastModified.flatMap { HTTPDates.parse($0) } ?? Date()
        let file = BundleFile(remote: object, modified: modified)
        let directory = try ZipDirectory.locate(in: file, tailLimit: MountedBundle.remoteTailBytes)
        let comment = String(decoding: directory.comment, as: UTF8.self)
        guard let version = BundleFormat.version(ofComment: comment), version >= 2,
            comment == BundleFormat.commentPrefix(version: version) + "sha256:" + digest
        else {
            throw BundleError(.corruptDirectory, "\(shownURL): the cached end record names another bundle")
        }
        let names = [BundleFormat.signatureEntryName, BundleFormat.manifestEntryName, BundleFormat.indexEntryName]
        let trailing = try directory.trailingEntries(from: file, names: names, optional: [BundleFormat.signatureEntryName])
        let metadata = [String: ZipCentralEntry](trailing.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        guard let indexEntry = metadata[BundleFormat.indexEntryName], let manifestEntry = metadata[BundleFormat.manifestEntryName] else {
            throw BundleError(.corruptDirectory, "\(shownURL): the central directory lacks index.bin or manifest.json")
        }
        let signatureEntry = metadata[BundleFormat.signatureEntryName]
        let cdOffset = directory.centralDirectoryOffset
        guard indexEntry.localHeaderOffset < manifestEntry.localHeaderOffset,
            manifestEntry.localHeaderOffset < (signatureEntry?.localHeaderOffset ?? cdOffset),
            (signatureEntry?.localHeaderOffset ?? 0) < cdOffset
        else {
            throw BundleError(.corruptDirectory, "\(shownURL): the metadata entries are not in the order the format lays them out")
        }
        // index.bin's local header (30 bytes, its 9-byte name, at most a 28-byte ZIP64 extra) and bytes, in one request.
        let localAllowance: UInt64 = 30 + 64 + 28
        var end = min(cdOffset, indexEntry.localHeaderOffset + localAllowance + min(indexEntry.compressedSize, cdOffset))
        // A required signature comes with the index when it lies near (the manifest between them is small), else in one
        // request of its own.
        var signatureRange: Range<UInt64>?
        if options.requiredPublicKey != nil, let signatureEntry {
            let range =
                signatureEntry
                .localHeaderOffset..<min(cdOffset, signatureEntry.localHeaderOffset + localAllowance + min(signatureEntry.compressedSize, 1 << 16))
            if range.lowerBound < end + (64 << 10) { end = max(end, range.upperBound) } else { signatureRange = range }
        }
        guard indexEntry.compressedSize <= 1 << 32 else {
            throw BundleError(.hostile, "\(shownURL): index.bin claims \(indexEntry.compressedSize) bytes", entry: indexEntry.name)
        }
        try object.prefetch(indexEntry.localHeaderOffset..<end, whole: true)
        if let signatureRange { try object.prefetch(signatureRange, whole: true) }
        let indexBytes = try MountedBundle.readIndex(indexEntry, version: version, from: file, bodyArea: cdOffset)
        guard hexString(Array(SHA256.hash(data: indexBytes))) == digest else {
            throw BundleError(.corruptIndex, "index.bin of \(shownURL) does not hash to the digest its comment names: it was altered, or the cache is damaged")
        }
        let index = try BundleIndex(bytes: indexBytes, bodyArea: indexEntry.localHeaderOffset, maxRatio: options.maxCompressionRatio)
        guard index.formatVersion == version else {
            throw BundleError(.corruptIndex, "the archive comment says format version \(version) but index.bin is version \(index.formatVersion)")
        }
        guard UInt64(index.bodyCount) + UInt64(trailing.count) == directory.entryCount else {
            throw BundleError(
                .corruptIndex, "index.bin lists \(index.bodyCount) bodies but the central directory holds \(directory.entryCount - UInt64(trailing.count))")
        }
        // From here on every body fetched is checked against the SHA-256 this index names before it is kept or read.
        object.install(RemoteBodyCheck(index: index, bodyAreaEnd: indexEntry.localHeaderOffset, maxBodySize: options.maxBodySize))
        let signed = try MountedBundle.checkSignature(
            signatureEntry, file: file, indexSHA256: { Array(SHA256.hash(data: indexBytes)) }, recordedDigest: digest, options: options, bodyArea: cdOffset)
        return Parts(file: file, directory: directory, metadata: metadata, index: index, digest: digest, signed: signed)
    }
}
