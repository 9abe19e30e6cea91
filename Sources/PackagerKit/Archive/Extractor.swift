import Foundation

/// Extracts any archive libarchive reads (a bundle included) into a folder, refusing anything unsafe.
public enum Extractor {
    /// What an extraction wrote.
    public struct Summary: Sendable, Equatable {
        public var files: Int
        public var directories: Int
        public var bytes: UInt64
    }

    /// Extracts `archive` into `destination`, which is created if needed.
    ///
    /// Every entry name is checked before anything is written: an absolute
    /// name, a `..` component, a symbolic or hard link, or a device is refused,
    /// and nothing is extracted. libarchive's own secure-extraction flags stay
    /// on as a second line of defence, and existing files are never overwritten.
    ///
    /// - Parameter stripComponents: leading path components to remove from each name, as `tar --strip-components`.
    /// - Throws: ``PackagerError`` with code `.unsafeEntry` naming the entry, or `.archive` with libarchive's message.
    @discardableResult
    public static func extract(archive: String, to destination: String, stripComponents: Int = 0) throws -> Summary {
        guard stripComponents >= 0 else { throw PackagerError(.invalidInput, "strip-components cannot be negative (\(stripComponents))") }
        // Pass 1: names and types only.
        let scan = try LibArchive.Reader(path: archive)
        var plan = [(String, LibArchive.EntryType)]()
        while let header = try scan.next() {
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
        try FileManager.default.createDirectory(atPath: destination, withIntermediateDirectories: true)
        // Pass 2: write.
        let reader = try LibArchive.Reader(path: archive)
        let writer = try LibArchive.DiskWriter()
        var summary = Summary(files: 0, directories: 0, bytes: 0)
        let root = URL(fileURLWithPath: destination).standardizedFileURL.path
        while let header = try reader.next() {
            guard let relative = try safeRelativePath(header.path, stripComponents: stripComponents) else { continue }
            let target = root + "/" + relative
            if header.type == .directory {
                try writer.write(path: target, type: .directory, size: 0) { _ in }
                summary.directories += 1
            } else {
                var written: UInt64 = 0
                try writer.write(path: target, type: .file, size: header.size) { sink in
                    try reader.readData { block in
                        written += UInt64(block.count)
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
