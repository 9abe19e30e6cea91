import Foundation

/// Extracts any archive libarchive reads (a bundle included) into a folder, refusing anything unsafe.
public enum Extractor {
    /// What an extraction wrote.
    public struct Summary: Sendable, Equatable {
        public var files: Int
        public var directories: Int
        public var bytes: UInt64
        /// Files left as they were: the destination held one of that name already (never overwritten).
        public var skipped = 0
        /// Entries naming a file an earlier entry of the archive wrote (the first is kept).
        public var repeated = 0
        /// Entries with no more path components than were stripped: nothing of their name was left to write.
        public var strippedWhole = 0
    }

    /// How much an extraction may write: an archive that lists more entries, or declares or writes more bytes, is
    /// refused (a bomb of a million empty files, or of a few kilobytes that inflate to the disk's size).
    public struct Limits: Sendable {
        /// Entries (files and folders) at most.
        public var entries: Int
        /// Bytes written at most; nil for the free space of the destination's file system.
        public var bytes: UInt64?

        public init(entries: Int = 1_000_000, bytes: UInt64? = nil) {
            self.entries = entries
            self.bytes = bytes
        }
    }

    /// Extracts `archive` into `destination`, which is created if needed.
    ///
    /// Every entry name is checked before anything is written: an absolute
    /// name, a `..` component, a symbolic or hard link, or a device is refused,
    /// and nothing is extracted. libarchive's own secure-extraction flags stay
    /// on as a second line of defence. A file the destination holds already is
    /// left as it is, and counted as skipped. An extraction that fails midway
    /// (a damaged entry, a full disk) removes what it wrote: files and folders
    /// that were there before stay, nothing half-written does.
    ///
    /// - Parameter stripComponents: leading path components to remove from each name, as `tar --strip-components`.
    /// - Parameter limits: entries and bytes at most; the declared sizes are checked before anything is written, the
    ///   bytes written as they are (a size that lies is caught too).
    /// - Throws: ``PackagerError`` with code `.unsafeEntry` naming the entry, `.invalidInput` past a limit, or
    ///   `.archive` with libarchive's message.
    @discardableResult
    public static func extract(archive: String, to destination: String, stripComponents: Int = 0, limits: Limits = Limits()) throws -> Summary {
        guard stripComponents >= 0 else { throw PackagerError(.invalidInput, "strip-components cannot be negative (\(stripComponents))") }
        try checkDestination(destination)
        // Pass 1: names and types only.
        let scan = try LibArchive.Reader(path: archive)
        var plan = [(String, LibArchive.EntryType)]()
        var declared: UInt64 = 0
        let maxBytes = limits.bytes ?? freeSpace(at: destination)
        while let header = try scan.next() {
            declared &+= UInt64(max(0, header.size))
            guard plan.count < limits.entries else {
                throw PackagerError(.invalidInput, "the archive lists more than \(limits.entries) entries; nothing was extracted", subject: archive)
            }
            guard declared <= maxBytes else {
                let bound = limits.bytes != nil ? "the limit of \(maxBytes) bytes" : "the \(maxBytes) bytes free at \(destination)"
                throw PackagerError(.invalidInput, "the archive declares more than \(bound); nothing was extracted", subject: archive)
            }
            let relative = try safeRelativePath(header.path, stripComponents: stripComponents)
            switch header.type {
            case .file, .directory:
                if let relative { plan.append((relative, header.type)) }
            case .symlink, .hardlink:
                throw PackagerError(
                    .unsafeEntry, "the archive holds a link (\(header.path) -> \(header.linkTarget ?? "?")); links are refused", subject: header.path)
            case .other:
                throw PackagerError(.unsafeEntry, "the archive holds a device, FIFO or socket; only files and folders are extracted", subject: header.path)
            }
        }
        // What this extraction made, removed again if it fails: the destination's own folders (when it made them)
        // and every file and folder it wrote inside.
        var created: [String] = []
        var folder = URL(fileURLWithPath: destination).standardizedFileURL
        while !exists(folder.path), folder.path != "/" {
            created.insert(folder.path, at: 0)
            folder.deleteLastPathComponent()
        }
        do {
            try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
            return try write(
                archive, under: URL(fileURLWithPath: destination).standardizedFileURL.path, stripComponents: stripComponents, maxBytes: maxBytes,
                created: &created)
        } catch {
            for path in created.reversed() { try? FileManager.default.removeItem(atPath: path) }
            guard var failure = error as? PackagerError else { throw error }
            failure.message += created.isEmpty ? "" : "; what the extraction had written was removed"
            throw failure
        }
    }

    /// Refuses, before anything is read, a destination that cannot be the folder to extract into: an empty path, or a
    /// file.
    static func checkDestination(_ destination: String) throws {
        guard !destination.isEmpty else { throw PackagerError(.invalidInput, "give the folder to extract into") }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination, isDirectory: &isFolder), !isFolder.boolValue {
            throw PackagerError(.invalidInput, "this is a file, not a folder to extract into", subject: destination)
        }
    }

    /// Pass 2: writes the entries under `root`, adding each file and folder it makes to `created`.
    private static func write(_ archive: String, under root: String, stripComponents: Int, maxBytes: UInt64, created: inout [String]) throws -> Summary {
        let reader = try LibArchive.Reader(path: archive)
        let writer = try LibArchive.DiskWriter()
        var summary = Summary(files: 0, directories: 0, bytes: 0)
        var written = Set<String>()
        while let header = try reader.next() {
            guard let relative = try safeRelativePath(header.path, stripComponents: stripComponents) else {
                if header.type != .directory { summary.strippedWhole += 1 }
                continue
            }
            let target = root + "/" + relative
            let existed = exists(target)
            // Folders an entry's name implies (no entry of their own) are made with it.
            var missing: [String] = []
            var parent = (target as NSString).deletingLastPathComponent
            while parent.count > root.count, !exists(parent) {
                missing.insert(parent, at: 0)
                parent = (parent as NSString).deletingLastPathComponent
            }
            created += missing
            if header.type == .directory {
                guard !existed else { continue }
                created.append(target)
                try writer.write(path: target, type: .directory, size: 0) { _ in }
                summary.directories += 1
            } else if existed {
                // Never overwritten: the next entry's header skips this one's data.
                if written.contains(target) { summary.repeated += 1 } else { summary.skipped += 1 }
            } else {
                created.append(target)
                written.insert(target)
                var written: UInt64 = 0
                try writer.write(path: target, type: .file, size: header.size) { sink in
                    try reader.readData { block in
                        written += UInt64(block.count)
                        guard summary.bytes + written <= maxBytes else {
                            throw PackagerError(
                                .invalidInput, "\(header.path) writes more than its archive declared, past \(maxBytes) bytes", subject: header.path)
                        }
                        try sink(block)
                    }
                }
                summary.files += 1
                summary.bytes += written
            }
        }
        try writer.close()
        return summary
    }

    /// Whether something is at `path`, a symbolic link included (not followed). Asked just before each write, whose
    /// libarchive flags refuse to overwrite as well: something another process puts there in between is left alone
    /// by the write, though a failed extraction would then remove it with what it wrote.
    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Bytes free for an unprivileged writer on the file system that holds `path`, or would (its nearest existing
    /// folder: nothing is created before the archive is accepted); no limit when it cannot be read.
    static func freeSpace(at path: String) -> UInt64 {
        var folder = URL(fileURLWithPath: path).standardizedFileURL
        while !FileManager.default.fileExists(atPath: folder.path) && folder.path != "/" { folder.deleteLastPathComponent() }
        var info = statvfs()
        guard statvfs(folder.path, &info) == 0 else { return .max }
        return UInt64(info.f_bavail) &* UInt64(info.f_frsize)
    }

    /// The normalised relative path for an archive entry name, nil when stripping leaves nothing, or an error when unsafe.
    static func safeRelativePath(_ name: String, stripComponents: Int) throws -> String? {
        guard !name.hasPrefix("/"), !name.hasPrefix("\\"), !(name.count >= 2 && name.dropFirst().first == ":") else {
            throw PackagerError(.unsafeEntry, "the entry name \(name) is an absolute path; it would escape the destination", subject: name)
        }
        let parts = name.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        if parts.contains("..") || name.contains("\\..") || name.contains("..\\") {
            throw PackagerError(.unsafeEntry, "the entry name \(name) has a '..' component; it would escape the destination", subject: name)
        }
        if name.utf8.contains(0) {
            throw PackagerError(.unsafeEntry, "the entry name has a NUL byte", subject: name)
        }
        let kept = parts.dropFirst(max(0, stripComponents))
        return kept.isEmpty ? nil : kept.joined(separator: "/")
    }
}
