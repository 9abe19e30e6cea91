import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A read-only file read with positional reads, so that many threads can read at once.
package final class BundleFile: Sendable {
    package let path: String
    package let size: UInt64
    /// When the file was last modified, as it was opened.
    package let modified: Date
    private let descriptor: Int32
    /// What identifies the file's contents as opened: device, inode, size, and the modification and status-change
    /// times (seconds and nanoseconds). A write in place changes the status-change time, which no `touch` can set
    /// back.
    private let identity: Identity
    /// The bytes of a file made in memory (a delta's bodies rebuilt from patches); nil for a file on disk.
    private let memory: [UInt8]?
    /// The object a remote bundle reads by HTTP ranges (``path`` is then its URL without the query); nil for a file.
    package let remote: RemoteObject?

    package struct Identity: Equatable, Sendable {
        var device, inode, size, modified, modifiedNanoseconds, changed, changedNanoseconds: Int
    }

    package init(path: String) throws {
        // Non-blocking: a named pipe is refused by the check below instead of blocking the open.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw BundleError(.io, "cannot open \(path)", underlying: SystemCallError(errno))
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let error = SystemCallError(errno)
            close(fd)
            throw BundleError(.io, "cannot stat \(path)", underlying: error)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            // A folder where a file was meant is the wrong argument, not a damaged bundle.
            if (info.st_mode & S_IFMT) == S_IFDIR { throw BundleError(.invalidArgument, "\(path) is a folder, not a bundle file") }
            throw BundleError(.notABundle, "\(path) is not a regular file")
        }
        self.path = path
        self.descriptor = fd
        self.size = UInt64(info.st_size)
        #if canImport(Darwin)
            let time = info.st_mtimespec
        #else
            let time = info.st_mtim
        #endif
        self.modified = Date(timeIntervalSince1970: TimeInterval(time.tv_sec) + TimeInterval(time.tv_nsec) / 1e9)
        self.identity = Self.identity(info)
        self.memory = nil
        self.remote = nil
    }

    /// A remote bundle's object, read by range requests into its cache.
    package init(remote: RemoteObject, modified: Date) {
        path = remote.shownURL
        descriptor = -1
        size = remote.size
        self.modified = modified
        identity = Identity(device: 0, inode: 0, size: Int(remote.size), modified: 0, modifiedNanoseconds: 0, changed: 0, changedNanoseconds: 0)
        memory = nil
        self.remote = remote
    }

    /// A file held in memory, named `name` in messages: never changes, and has no descriptor to send from.
    package init(memory bytes: [UInt8], name: String) {
        path = name
        descriptor = -1
        size = UInt64(bytes.count)
        modified = Date()
        identity = Identity(device: 0, inode: 0, size: bytes.count, modified: 0, modifiedNanoseconds: 0, changed: 0, changedNanoseconds: 0)
        memory = bytes
        remote = nil
    }

    /// Whether every byte of `range` is here to read without waiting on a network (always, but for a remote bundle's
    /// bytes not fetched yet).
    @inline(__always)
    package func holds(_ range: Range<UInt64>) -> Bool { remote?.holds(range) ?? true }

    /// Fetches what `range` lacks in one request, for a remote bundle (a no-op for a file): a body's local header and
    /// stored bytes are asked for together.
    /// `whole` asks for it in one request however long.
    package func prefetch(_ range: Range<UInt64>, whole: Bool = false) throws { try remote?.prefetch(range, whole: whole) }

    /// Whether the file is held in memory (it then has no descriptor for `sendfile`).
    package var inMemory: Bool { memory != nil }

    /// What the file at `path` is now (device, inode, size, modification and status-change times); nil when it
    /// cannot be read. A reloader compares these to tell a replaced or rewritten bundle.
    package static func identity(ofPath path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return identity(info)
    }

    private static func identity(_ info: stat) -> Identity {
        #if canImport(Darwin)
            let (m, c) = (info.st_mtimespec, info.st_ctimespec)
        #else
            let (m, c) = (info.st_mtim, info.st_ctim)
        #endif
        return Identity(
            device: Int(info.st_dev), inode: Int(info.st_ino), size: Int(info.st_size), modified: Int(m.tv_sec), modifiedNanoseconds: Int(m.tv_nsec),
            changed: Int(c.tv_sec), changedNanoseconds: Int(c.tv_nsec))
    }

    /// Whether the open file is still as it was opened (one `fstat`): no write in place, truncation or metadata
    /// change since. Once false it stays false, as the status-change time only moves forward.
    package var unchanged: Bool {
        if memory != nil { return true }
        if let remote { return remote.changeReason == nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return false }
        return Self.identity(info) == identity
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// A new descriptor for the same open file, which the caller closes (for `sendfile`).
    package func duplicateDescriptor() -> Int32 { dup(remote?.store.descriptor ?? descriptor) }

    /// Reads exactly `count` bytes at `offset`, or throws `.truncated` when the file ends first.
    package func read(at offset: UInt64, count: Int, what: @autoclosure () -> String) throws -> [UInt8] {
        guard count >= 0 else { throw BundleError(.invalidArgument, "negative read size") }
        guard offset <= size, UInt64(count) <= size - offset else {
            throw BundleError(.truncated, "\(what()) lies beyond the end of the file (offset \(offset), \(count) bytes, file \(size) bytes)")
        }
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            try readFully(into: UnsafeMutableRawBufferPointer(buffer), at: offset, what: what())
            initialized = count
        }
    }

    /// Fills `buffer` from `offset`.
    package func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, what: @autoclosure () -> String) throws {
        if let remote { return try remote.read(into: buffer, at: offset, what: what()) }
        if let memory {
            guard offset <= UInt64(memory.count), UInt64(buffer.count) <= UInt64(memory.count) - offset else {
                throw BundleError(.truncated, "\(what()) lies beyond the end of \(path)")
            }
            memory.withUnsafeBytes { raw in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[Int(offset)..<(Int(offset) + buffer.count)]))
            }
            return
        }
        switch FileIO.read(descriptor, into: buffer, at: offset) {
        case .failed(let error):
            throw BundleError(.io, "cannot read \(what()) from \(path)", underlying: SystemCallError(error))
        case .done(let count) where count < buffer.count:
            throw BundleError(.truncated, "\(what()) is cut short: the file ends at \(offset + UInt64(count))")
        case .done:
            break
        }
    }
}
