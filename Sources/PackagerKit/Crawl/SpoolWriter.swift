import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One body being written to a spool file (the bundle writer hashes and compresses it later, in one pass).
final class SpoolWriter {
    let path: String
    private var fd: Int32
    private(set) var size: Int64 = 0

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PackagerError(.io, "cannot create a spool file", subject: path, cause: SystemCallError(errno)) }
        self.path = path
    }

    deinit { if fd >= 0 { close(fd) } }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        size += Int64(bytes.count)
        if let error = FileIO.write(fd, bytes) {
            throw PackagerError(.io, "cannot write a spool file", subject: path, cause: SystemCallError(error))
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
