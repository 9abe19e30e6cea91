import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension MountedBundle {
    /// Mounts the delta bundle at `url` over `base` (a bundle file, a remote bundle, or a delta mounted over one): the
    /// result answers as the release the delta stands for. A delta is a small object (the bodies its base lacks, byte
    /// patches, an index edit), so it is fetched whole, as it arrives into a file (never into memory), within the
    /// cache's bound; then it is mounted as a delta file is, and the bodies it does not carry are read from `base`,
    /// which a fleet node holds already. With a cache folder it is kept there by its SHA-256 (`<sha256>.delta`), so a
    /// restart fetches nothing (given `sha256` and `size`), and the bodies it carries are lent to later mounts as an
    /// earlier release's are; without one its file is this process's own.
    ///
    /// - Parameter sha256: the SHA-256 of the delta's file that a signed channel names (``ChannelDocument/Delta``):
    ///   the bytes fetched must hash to it. Without it the delta is trusted as any bundle URL is: its base must be
    ///   `base` and its index the target's, and a signature is checked when `options` requires one.
    /// - Throws: ``BundleError``: `.remote` naming the URL when it cannot be fetched (or is larger than the cache may
    ///   hold), `.corruptBody` when it does not hash to `sha256`, and what ``init(deltaPath:base:options:)`` throws.
    package convenience init(
        deltaURL url: String, base: MountedBundle, remote: RemoteOptions, sha256: String? = nil, size: UInt64? = nil, options: Options = Options()
    ) throws {
        let shownURL = RemoteObject.shown(url)
        let (path, owned) = try Self.fetchDelta(url, shownURL: shownURL, remote: remote, sha256: sha256, size: size)
        defer { if owned { unlink(path) } }
        do {
            try self.init(deltaPath: path, base: base, options: options)
            // Kept in the cache folder: the bodies it carries are listed there, so a release mounted later by its URL
            // (a rollback to this one) borrows them as it borrows an earlier release's.
            if !owned, path.hasSuffix(".data") {
                BodyDonors.writeList(
                    base: String(path.dropLast(5)), bodies: (0..<bodyCount).lazy.filter { self.bodyStore($0) == 0 }.map { self.bodyRecord(at: $0) })
            }
        } catch var error as BundleError {
            // Not kept for another try: fetched again when asked again.
            unlink(path)
            error.message = error.message.replacingOccurrences(of: path, with: shownURL)
            if !error.message.contains(shownURL) { error.message = "\(shownURL): \(error.message)" }
            throw error
        }
    }

    /// The delta at `url` in a file: in the cache folder by its SHA-256 (fetched only when not there already, or when
    /// what is there does not hash to its name), or in a file of this process's own (`owned`, to be unlinked once
    /// mounted).
    private static func fetchDelta(
        _ url: String, shownURL: String, remote: RemoteOptions, sha256: String?, size: UInt64?
    ) throws -> (path: String, owned: Bool) {
        if let folder = remote.cacheDirectory, let sha256, let size, ChannelDocument.isDigest(sha256) {
            let kept = "\(folder)/\(sha256)-\(size).data"
            if (try? fileDigest(kept)) == sha256 {
                // Marked used (the folder's least recently used go first).
                let fd = open("\(folder)/\(sha256)-\(size).ranges", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                if fd >= 0 {
                    futimens(fd, nil)
                    close(fd)
                }
                return (kept, false)
            }
        }
        let limit = min(remote.cacheBytes, 1 << 32)
        let request = RemoteRequest(
            method: "GET", url: url, headers: remote.headers, timeout: remote.timeout, maxBodyBytes: Int(clamping: limit),
            sink: { status, _ in status == 200 ? BodySpool() : nil })
        let reply = try RemoteObject.send(request, options: remote, shownURL: shownURL)
        guard reply.status == 200 else {
            throw BundleError(.remote, "\(shownURL) answered \(reply.status) to a request for the delta")
        }
        guard !reply.overLimit, let spool = reply.sink as? BodySpool, let file = spool.store() else {
            throw BundleError(.remote, "\(shownURL): the delta is larger than the cache may hold (\(limit) bytes; --cache-bytes)")
        }
        var hasher = SHA256()
        try file.pieces(0..<file.size) { piece, _ in hasher.update(data: piece) }
        let digest = hexString(Array(hasher.finalize()))
        if let sha256, digest != sha256 {
            throw BundleError(
                .corruptBody, "\(shownURL) sent a delta whose SHA-256 is \(digest.prefix(16))…, not the \(sha256.prefix(16))… named for it: refused")
        }
        // Written out whole (0600, never through a link), then renamed into place: in the cache folder by its SHA-256
        // and size as a store that holds all of it (its log says so: what lends its bodies to the next mount reads it
        // as any bundle's), or beside this process's other files.
        let folder = remote.cacheDirectory
        if let folder { try RangeStore.makeFolder(folder) }
        let target =
            folder.map { "\($0)/\(digest)-\(file.size).data" } ?? NSTemporaryDirectory() + "/packager-delta-\(getpid())-\(digest.prefix(16))"
        let temporary = target + ".\(getpid()).tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BundleError(.io, "cannot write the delta fetched from \(shownURL)", underlying: SystemCallError(errno)) }
        var failed: Int32?
        try file.pieces(0..<file.size) { piece, offset in
            if failed == nil { failed = piece.withUnsafeBytes { FileIO.write(fd, $0, at: offset) } }
        }
        close(fd)
        guard failed == nil, rename(temporary, target) == 0 else {
            unlink(temporary)
            throw BundleError(.io, "cannot write the delta fetched from \(shownURL)", underlying: failed.map(SystemCallError.init))
        }
        if folder != nil {
            var record = [UInt8]()
            record.appendLE(UInt64(0))
            record.appendLE(file.size)
            RangeStore.replace(String(target.dropLast(5)) + ".ranges", with: record)
        }
        return (target, folder == nil)
    }

    /// The SHA-256 of the regular file at `path` of this user's (opened without following a link), hex.
    private static func fileDigest(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { throw BundleError(.io, "cannot open \(path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid() else { throw BundleError(.io, "\(path) is not a file") }
        var hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while true {
            guard case .done(let count) = buffer.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: offset) }) else {
                throw BundleError(.io, "cannot read \(path)")
            }
            if count == 0 { break }
            hasher.update(data: buffer[0..<count])
            offset += UInt64(count)
        }
        return hexString(Array(hasher.finalize()))
    }
}
