import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one place a run keeps temporary files: a private folder next to the output, `flock`-held while it lives.
///
/// It holds the crawl's spool files (bodies too large for the memory budget), the writer's overflow file
/// (compressed bodies beyond the budget), `pack`'s staging copy of an extracted archive, and anything else a
/// command needs before the result is renamed into place by ``AtomicOutput``. It lives on the output's file system,
/// so nothing is copied across devices; it is created with mode 0700; it is registered with ``TemporaryFiles`` so
/// an interrupted run removes it; and a folder left by a run killed outright (SIGKILL) is removed by the next run
/// in the same folder, once no live process holds its lock (which also protects a run in another PID namespace).
final class ScratchFolder: Sendable {
    let path: String
    /// Open on the folder for its lifetime, holding the lock that tells other runs it is in use.
    private let lockDescriptor: Int32
    static let prefix = ".packager-scratch-"
    /// Names earlier versions used for the same purposes, reclaimed the same way.
    private static let formerPrefixes = [".packager-spool-", ".packager-staging-"]

    /// Creates a scratch folder inside `parent`, after removing any left there by runs that no longer run.
    init(in parent: String) throws {
        let parent = parent.isEmpty ? "." : parent
        Self.removeAbandoned(in: parent)
        let path = parent + "/" + Self.prefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(path, 0o700) == 0 else {
            throw PackagerError(.io, "cannot create a scratch folder in \(parent)", subject: path, cause: SystemCallError(errno))
        }
        self.path = path
        lockDescriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if lockDescriptor >= 0 { AbandonedFiles.hold(lockDescriptor) }
        TemporaryFiles.shared.register(path)
    }

    /// A scratch folder beside `output` (in the folder that will hold it).
    convenience init(besideOutput output: String) throws {
        try self.init(in: (output as NSString).deletingLastPathComponent)
    }

    deinit { if lockDescriptor >= 0 { close(lockDescriptor) } }

    /// Removes the folder and everything in it.
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
        TemporaryFiles.shared.unregister(path)
    }

    /// A path in the folder for a numbered file.
    func newFile(_ n: Int) -> String { path + "/\(n)" }

    /// A path in the folder for a named file or subfolder.
    func path(for name: String) -> String { path + "/" + name }

    /// Scratch folders (and the temporaries of earlier versions) whose process is gone.
    static func removeAbandoned(in parent: String) {
        for prefix in [Self.prefix] + formerPrefixes { AbandonedFiles.remove(in: parent, prefix: prefix) }
    }
}
