import Crypto
import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Temporary files and folders named `PREFIX<pid>-<random>` whose writer is gone: left by a build killed
/// outright (SIGKILL), which no signal handler could clean up. The next write in the same folder removes them.
///
/// A name is removed only when it matches the pattern exactly, its process does not run here, and no one holds
/// the `flock` every writer keeps on its temporary file or folder while it lives (which also protects the files
/// of a build in another PID namespace sharing the folder).
enum AbandonedFiles {
    static func remove(in folder: String, prefix: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) {
            let parts = name.dropFirst(prefix.count).split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                let pid = Int32(parts[0]), pid != getpid()
            else { continue }
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            let path = folder + "/" + name
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { continue }  // a live writer still holds it
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// Takes the lock that marks `fd`'s file or folder as in use (released when the process ends, however it ends).
    static func hold(_ fd: Int32) { _ = flock(fd, LOCK_EX | LOCK_NB) }
}

/// A file written under a temporary name in the destination's folder and renamed into place only when complete.
///
/// An interrupted or failed write leaves nothing at the destination path:
/// the temporary file is removed on failure, on deinit, and by the signal
/// handler the CLI installs (``TemporaryFiles``).
final class AtomicOutput {
    let destination: String
    let temporaryPath: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    private(set) var offset: UInt64 = 0
    private var committed = false
    /// Whether this output writes nowhere (``discarding()``).
    let discards: Bool
    private static let bufferSize = 1 << 20

    /// The open temporary file, for writers that take a descriptor (libarchive); write through one or the other.
    var descriptor: Int32 { fd }

    init(destination: String) throws {
        discards = false
        if let problem = OutputFile.problem(with: destination) { throw problem }
        let url = URL(fileURLWithPath: destination)
        let folder = url.deletingLastPathComponent().path
        self.destination = destination
        let prefix = "." + url.lastPathComponent + ".tmp-"
        AbandonedFiles.remove(in: folder, prefix: prefix)
        self.temporaryPath = folder + "/" + prefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            // Named by the output asked for; the temporary name beside it is how it would have been written.
            throw PackagerError(.io, "cannot write a file in \(folder)", subject: destination, cause: SystemCallError(errno))
        }
        AbandonedFiles.hold(fd)
        TemporaryFiles.shared.register(temporaryPath)
        buffer.reserveCapacity(Self.bufferSize)
    }

    /// An output that writes nowhere: it counts and hashes what it is given (``hashing()``), for checking what a
    /// writer would make (`packager check` rebuilds a delta's bundle this way). It cannot be committed.
    static func discarding() -> AtomicOutput { AtomicOutput() }

    private init() {
        destination = ""
        temporaryPath = ""
        fd = -1
        committed = true
        discards = true
    }

    deinit {
        if fd >= 0 { close(fd) }
        if !committed {
            unlink(temporaryPath)
            TemporaryFiles.shared.unregister(temporaryPath)
        }
    }

    /// The SHA-256 of what is written, when asked for (``hashing()``) before the first write.
    private var hasher: SHA256?

    /// Keeps a SHA-256 of every byte written from now on (call before the first write).
    func hashing() { hasher = SHA256() }

    /// The SHA-256 of what was written, in lowercase hex; nil unless ``hashing()`` was called.
    var sha256: String? { hasher.map { hexString(Array($0.finalize())) } }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        hasher?.update(bufferPointer: bytes)
        offset += UInt64(bytes.count)
        if discards { return }
        if buffer.count + bytes.count > Self.bufferSize { try flush() }
        if bytes.count >= Self.bufferSize {
            try writeAll(bytes)
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    func write(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try write($0) } }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        try buffer.withUnsafeBytes { try writeAll($0) }
        buffer.removeAll(keepingCapacity: true)
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer) throws {
        if let error = FileIO.write(fd, bytes) {
            throw PackagerError(.io, "cannot write \(temporaryPath)", subject: destination, cause: SystemCallError(error))
        }
    }

    /// Flushes, syncs and renames the file into place.
    func commit() throws {
        precondition(!discards, "a discarding output has no file to put in place")
        try flush()
        guard fsync(fd) == 0 else {
            throw PackagerError(.io, "cannot sync \(temporaryPath)", subject: destination, cause: SystemCallError(errno))
        }
        close(fd)
        fd = -1
        guard rename(temporaryPath, destination) == 0 else {
            throw PackagerError(.io, "cannot put the finished file in place", subject: destination, cause: SystemCallError(errno))
        }
        committed = true
        TemporaryFiles.shared.unregister(temporaryPath)
        // The rename is durable only once the folder's entry is on disk: sync the folder too.
        let folder = (destination as NSString).deletingLastPathComponent
        let dirFD = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            close(dirFD)
        }
    }
}

/// Writing a whole file to an output path, the one way outputs are written: under a temporary name beside it,
/// synced, renamed into place, the folder synced.
public enum OutputFile {
    /// Writes `bytes` to `path` atomically; a previous file there is kept until the new one is complete.
    public static func write(_ bytes: some Collection<UInt8>, to path: String) throws {
        let output = try AtomicOutput(destination: path)
        try output.write(Array(bytes))
        try output.commit()
    }

    /// Writes `text` as UTF-8 to `path` atomically.
    public static func write(_ text: String, to path: String) throws { try write(Array(text.utf8), to: path) }

    /// Why a file cannot be written at `destination`, or nil: it is a folder, or its folder does not exist. (Checked
    /// again when writing; a command checks it before a long run too.)
    public static func problem(with destination: String) -> PackagerError? {
        let folder = URL(fileURLWithPath: destination).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
            // A path given wrong, as a folder is: exit 2.
            return PackagerError(.invalidInput, "the output folder \(folder) does not exist", subject: destination)
        }
        if FileManager.default.fileExists(atPath: destination, isDirectory: &isDirectory), isDirectory.boolValue {
            return PackagerError(.invalidInput, "this is a folder: give the path of the file to write", subject: destination)
        }
        return nil
    }
}

/// Temporary files and folders the process must remove if it is interrupted.
public final class TemporaryFiles: Sendable {
    /// The process-wide registry.
    public static let shared = TemporaryFiles()
    private let paths = NIOLockedValueBox(Set<String>())

    func register(_ path: String) { paths.withLockedValue { _ = $0.insert(path) } }
    func unregister(_ path: String) { paths.withLockedValue { _ = $0.remove(path) } }

    /// Removes every registered path; returns whether there were any (a write was under way). Called when the CLI
    /// is interrupted, before it exits.
    @discardableResult
    public func removeAll() -> Bool {
        let current = paths.withLockedValue { $0 }
        for path in current { try? FileManager.default.removeItem(atPath: path) }
        return !current.isEmpty
    }
}
