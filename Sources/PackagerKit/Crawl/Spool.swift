import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A private folder of spool files: each fetched body too large for the memory budget streams into one.
///
/// The folder lives next to the output (same file system, so bodies are
/// never copied across devices) and is registered with ``TemporaryFiles`` so
/// an interrupted build removes it. Folders left by a build that was killed
/// outright (SIGKILL) are removed by the next build in the same folder.
final class SpoolFolder: Sendable {
    let path: String
    /// Open on the folder for its lifetime, holding the lock that tells other builds it is in use.
    private let lockDescriptor: Int32
    private static let prefix = ".packager-spool-"

    /// Creates a spool folder inside `parent`, after removing any left there by builds that no longer run.
    init(in parent: String) throws {
        Self.removeAbandoned(in: parent)
        let path = parent + "/" + Self.prefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(path, 0o700) == 0 else {
            throw PackagerError(.io, "cannot create a spool folder: \(String(cString: strerror(errno)))", subject: path)
        }
        self.path = path
        lockDescriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if lockDescriptor >= 0 { AbandonedFiles.hold(lockDescriptor) }
        TemporaryFiles.shared.register(path)
    }

    deinit { if lockDescriptor >= 0 { close(lockDescriptor) } }

    /// Removes the folder and everything in it.
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
        TemporaryFiles.shared.unregister(path)
    }

    /// A new file name in the folder.
    func newFile(_ n: Int) -> String { path + "/\(n)" }

    /// Spool folders (and the writer's spool files) whose process is gone: a build killed before it could clean up.
    static func removeAbandoned(in parent: String) { AbandonedFiles.remove(in: parent, prefix: prefix) }
}

/// One body being written to a spool file (the bundle writer hashes and compresses it later, in one pass).
final class SpoolWriter {
    let path: String
    private var fd: Int32
    private(set) var size: Int64 = 0

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PackagerError(.io, "cannot create a spool file: \(String(cString: strerror(errno)))", subject: path) }
        self.path = path
    }

    deinit { if fd >= 0 { close(fd) } }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        size += Int64(bytes.count)
        if let error = writeFully(fd, bytes) {
            throw PackagerError(.io, "cannot write a spool file: \(String(cString: strerror(error)))", subject: path)
        }
    }

    /// Closes the file.
    func finish() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
    }

    /// Closes and deletes the file.
    func discard() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(path)
    }
}
