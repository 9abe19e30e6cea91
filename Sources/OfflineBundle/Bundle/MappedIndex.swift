import Crypto
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An inflated `index.bin` kept in a scratch file of its own and mapped, for the tools that go through a whole bundle
/// (exports, check): the pages read are let go every few hundred reads, so the memory such a pass holds stays a few
/// MiB whatever the number of entries, where a mounted index in memory holds about 230 bytes an entry.
///
/// The file is made with `O_EXCL`, unlinked at once and closed once mapped: no other process can change the bytes
/// the mount checked, which every later read trusts. A service keeps its index in memory (``BundleIndex`` with no
/// mapping): its lookups then never wait on a page read, and a page that cannot be read back (an I/O error) would stop
/// the process. In a folder on tmpfs the file itself is held in memory (the system's, shared, not the process's):
/// the bound is then on the process alone.
package final class MappedIndex: Sendable {
    /// Reads between two releases of the pages read: each read touches a page or two, so at most a few MiB are held.
    static let readsPerRelease = 512

    /// Read-only after init; the mapping lives as long as the object.
    nonisolated(unsafe) private let address: UnsafeMutableRawPointer
    /// The index's length in bytes (the mapping is at least a page).
    package let count: Int
    private let mappedLength: Int
    private let reads = Atomic<Int>(0)

    /// Writes what `fill` gives (in order, `count` bytes in all) to a new scratch file in `folder` and maps it.
    ///
    /// - Throws: ``BundleError`` `.io` when the file cannot be made, written (a full disk) or mapped; what `fill`
    ///   throws; `.corruptIndex` when `fill` gives other than `count` bytes.
    package init(count: Int, folder: String, fill: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
        let fd = FileIO.unlinkedFile(in: folder, prefix: "index")
        guard fd >= 0 else {
            let error = SystemCallError(errno)
            throw BundleError(.io, "cannot make a scratch file for index.bin in \(folder)", underlying: error)
        }
        defer { close(fd) }
        var written = 0
        try fill { piece in
            guard piece.count <= count - written else { throw BundleError(.hostile, "index.bin inflates past its recorded size of \(count) bytes") }
            if piece.isEmpty { return }
            if let failure = FileIO.write(fd, piece) {
                throw BundleError(
                    .io, "cannot write index.bin's scratch copy in \(folder)", underlying: SystemCallError(failure))
            }
            written += piece.count
        }
        guard written == count else { throw BundleError(.corruptIndex, "index.bin inflates to \(written) bytes, not the \(count) recorded") }
        mappedLength = max(count, 1)
        if count == 0, ftruncate(fd, 1) != 0 {
            let error = SystemCallError(errno)
            throw BundleError(.io, "cannot size index.bin's scratch copy", underlying: error)
        }
        guard let mapped = mmap(nil, mappedLength, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            let error = SystemCallError(errno)
            throw BundleError(.io, "cannot map index.bin's scratch copy", underlying: error)
        }
        address = mapped
        self.count = count
    }

    deinit { munmap(address, mappedLength) }

    /// The index's bytes, counted as a read (see ``readsPerRelease``).
    @inline(__always)
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        if reads.add(1, ordering: .relaxed).newValue % Self.readsPerRelease == 0 { release() }
        return try body(UnsafeRawBufferPointer(start: address, count: count))
    }

    /// The SHA-256 of the index (the bundle digest), read 4 MiB at a time, each let go once hashed.
    package func sha256() -> [UInt8] {
        var hash = SHA256()
        var at = 0
        while at < count {
            let piece = min(4 << 20, count - at)
            hash.update(bufferPointer: UnsafeRawBufferPointer(start: address + at, count: piece))
            release()
            at += piece
        }
        return Array(hash.finalize())
    }

    /// Lets go of every page read so far: the next read of one maps it again from the file (the page cache, as a
    /// rule). Safe while other threads read: their pages come back on their next touch.
    package func release() {
        _ = madvise(address, mappedLength, MADV_DONTNEED)
    }
}
