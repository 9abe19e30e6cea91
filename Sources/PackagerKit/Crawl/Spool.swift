import Crypto
import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A private folder of spool files: each fetched body streams into one while its SHA-256 is computed.
///
/// The folder lives next to the output (same file system, so bodies are
/// never copied across devices) and is registered with ``TemporaryFiles`` so
/// an interrupted build removes it. Folders left by a build that was killed
/// outright (SIGKILL) are removed by the next build in the same folder.
final class SpoolFolder: Sendable {
    let path: String
    private static let prefix = ".packager-spool-"

    /// Creates a spool folder inside `parent`, after removing any left there by builds that no longer run.
    init(in parent: String) throws {
        Self.removeAbandoned(in: parent)
        let path = parent + "/" + Self.prefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(path, 0o700) == 0 else {
            throw PackagerError(.io, "cannot create a spool folder: \(String(cString: strerror(errno)))", subject: path)
        }
        self.path = path
        TemporaryFiles.shared.register(path)
    }

    /// Removes the folder and everything in it.
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
        TemporaryFiles.shared.unregister(path)
    }

    /// A new file name in the folder.
    func newFile(_ n: Int) -> String { path + "/\(n)" }

    /// Spool folders whose process is gone: a build killed before it could clean up.
    static func removeAbandoned(in parent: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
        for name in names where name.hasPrefix(prefix) {
            let pidText = name.dropFirst(prefix.count).prefix { $0 != "-" }
            guard let pid = Int32(pidText), pid != getpid() else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { try? FileManager.default.removeItem(atPath: parent + "/" + name) }
        }
    }
}

/// One body being written to a spool file, hashed as it goes.
final class SpoolWriter {
    let path: String
    private var fd: Int32
    private var hasher = SHA256()
    private(set) var size: Int64 = 0

    init(path: String) throws {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PackagerError(.io, "cannot create a spool file: \(String(cString: strerror(errno)))", subject: path) }
        self.path = path
    }

    deinit { if fd >= 0 { close(fd) } }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        hasher.update(bufferPointer: bytes)
        size += Int64(bytes.count)
        var done = 0
        while done < bytes.count {
            let n = systemWrite(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw PackagerError(.io, "cannot write a spool file: \(String(cString: strerror(errno)))", subject: path)
            }
            done += n
        }
    }

    /// Closes the file and returns the body's SHA-256 in lowercase hex.
    func finish() -> String {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        return OfflineBundle.hexString(Array(hasher.finalize()))
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
