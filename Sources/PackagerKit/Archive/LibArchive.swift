internal import CArchive
import Foundation
import OfflineBundle

/// The one place that talks to libarchive's C API.
///
/// Swift types own the `archive` handles and free them in `deinit`; every
/// return code goes through ``check(_:_:_:)``, which turns a failure into a
/// ``PackagerError`` carrying libarchive's own message.
enum LibArchive {
    /// What an archive entry is.
    enum EntryType: Sendable, Equatable {
        case file, directory, symlink, hardlink, other
    }

    /// One archive entry's header.
    struct EntryHeader: Sendable {
        var path: String
        var type: EntryType
        var size: Int64
        var linkTarget: String?
    }

    static func check(_ handle: OpaquePointer?, _ code: Int32, _ what: @autoclosure () -> String) throws {
        guard code < ARCHIVE_WARN else { return }
        throw PackagerError(.archive, what(), cause: ArchiveError(handle))
    }

    /// libarchive's own account of a failure: its errno and its message.
    struct ArchiveError: Error, ReasonText {
        var errno: Int32
        var message: String

        init(_ handle: OpaquePointer?) {
            errno = handle.map { archive_errno($0) } ?? 0
            message = handle.flatMap { archive_error_string($0) }.map { String(cString: $0) } ?? "unknown error"
        }

        var description: String { message }
    }

    /// Reads entries from the archive formats a person means by an archive (ZIP, tar in any of its forms, 7z, cpio,
    /// ISO 9660, xar, ar, cab, lha, rar), under any compression libarchive knows. Not mtree, raw or empty: libarchive
    /// reads any text file as an mtree listing and an empty file as an empty archive, which made `pack data.json` a
    /// bundle of nothing, exit 0.
    final class Reader {
        private let handle: OpaquePointer
        private let path: String

        init(path: String) throws {
            guard let handle = archive_read_new() else { throw PackagerError(.internal, "libarchive could not allocate a reader") }
            self.handle = handle
            self.path = path
            archive_read_support_filter_all(handle)
            for support in [
                archive_read_support_format_zip, archive_read_support_format_tar, archive_read_support_format_gnutar,
                archive_read_support_format_7zip, archive_read_support_format_cpio, archive_read_support_format_iso9660,
                archive_read_support_format_xar, archive_read_support_format_ar, archive_read_support_format_cab,
                archive_read_support_format_lha, archive_read_support_format_rar, archive_read_support_format_rar5,
            ] {
                _ = support(handle)
            }
            // A path that is not there, or a folder, is the wrong argument: said in words, before libarchive's own.
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                throw PackagerError(.invalidInput, "cannot open \(path): no such file or directory")
            }
            if isFolder.boolValue { throw PackagerError(.invalidInput, "\(path) is a folder, not an archive") }
            let opened = archive_read_open_filename(handle, path, 1 << 16)
            if opened < ARCHIVE_WARN,
                archive_errno(handle) == EILSEQ || archive_error_string(handle).map({ String(cString: $0) })?.contains("Unrecognized") == true
            {
                throw PackagerError(
                    .invalidInput,
                    "\(path) is not an archive packager reads (.zip, .tar, .tar.gz, .tar.zst, .tar.xz, .7z, .cpio, .iso…)\(Self.empty(path) ? ": it is empty" : "")",
                    cause: ArchiveError(handle))
            }
            try LibArchive.check(handle, opened, "cannot open \(path) as an archive")
        }

        private static func empty(_ path: String) -> Bool {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue == 0
        }

        deinit { archive_read_free(handle) }

        /// The next entry's header, or nil at the end.
        func next() throws -> EntryHeader? {
            var entry: OpaquePointer?
            let status = archive_read_next_header(handle, &entry)
            if status == ARCHIVE_EOF { return nil }
            try LibArchive.check(handle, status, "cannot read the next entry of \(path)")
            guard let entry else { return nil }
            let name =
                archive_entry_pathname_utf8(entry).map { String(cString: $0) }
                ?? archive_entry_pathname(entry).map { String(cString: $0) } ?? ""
            let hardlink = archive_entry_hardlink(entry).map { String(cString: $0) }
            let symlink = archive_entry_symlink(entry).map { String(cString: $0) }
            let type: EntryType
            if hardlink != nil {
                type = .hardlink
            } else {
                switch archive_entry_filetype(entry) {
                case carchive_type_regular: type = .file
                case carchive_type_directory: type = .directory
                case carchive_type_symlink: type = .symlink
                default: type = .other
                }
            }
            return EntryHeader(
                path: name, type: type, size: archive_entry_size_is_set(entry) != 0 ? archive_entry_size(entry) : -1, linkTarget: hardlink ?? symlink)
        }

        /// Reads the current entry's data in blocks.
        func readData(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = buffer.withUnsafeMutableBytes { archive_read_data(handle, $0.baseAddress, $0.count) }
                if n == 0 { return }
                if n < 0 {
                    // A warning (an entry whose data runs past its stated size, say) is no data: every negative answer
                    // fails the read.
                    try LibArchive.check(handle, Int32(n), "cannot read data from \(path)")
                    throw PackagerError(.archive, "cannot read data from \(path): the archive's data disagrees with its headers", subject: path)
                }
                try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            }
        }

        /// The archive's format name (after the first header was read).
        var formatName: String { archive_format_name(handle).map { String(cString: $0) } ?? "unknown" }
        /// The compression filter's name (after the first header was read).
        var filterName: String { archive_filter_name(handle, 0).map { String(cString: $0) } ?? "none" }
    }

    /// Extracts entries of a reader to disk with libarchive's own safety checks on.
    final class DiskWriter {
        private let handle: OpaquePointer

        init() throws {
            guard let handle = archive_write_disk_new() else { throw PackagerError(.internal, "libarchive could not allocate a disk writer") }
            self.handle = handle
            // Names were checked and joined to an absolute root by the caller, so absolute targets are expected here.
            let flags =
                ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT
                | ARCHIVE_EXTRACT_NO_OVERWRITE
            try LibArchive.check(handle, archive_write_disk_set_options(handle, flags), "cannot configure extraction")
        }

        deinit { archive_write_free(handle) }

        /// Writes a regular file or directory at `path` with `contents` produced by `fill`.
        func write(path: String, type: EntryType, size: Int64, fill: ((UnsafeRawBufferPointer) throws -> Void) throws -> Void) throws {
            guard let entry = archive_entry_new() else { throw PackagerError(.internal, "libarchive could not allocate an entry") }
            defer { archive_entry_free(entry) }
            archive_entry_set_pathname_utf8(entry, path)
            archive_entry_set_filetype(entry, type == .directory ? carchive_type_directory : carchive_type_regular)
            archive_entry_set_perm(entry, type == .directory ? 0o755 : 0o644)
            if type == .file { archive_entry_set_size(entry, size) }
            try LibArchive.check(handle, archive_write_header(handle, entry), "cannot create \(path)")
            if type == .file {
                try fill { block in
                    guard block.count > 0 else { return }
                    let n = archive_write_data(handle, block.baseAddress, block.count)
                    if n < 0 { try LibArchive.check(handle, Int32(n), "cannot write \(path)") }
                }
            }
            try LibArchive.check(handle, archive_write_finish_entry(handle), "cannot finish \(path)")
        }

        func close() throws { try LibArchive.check(handle, archive_write_close(handle), "cannot finish extraction") }
    }

    /// Writes a new archive (tar with a compression filter, or zip) deterministically.
    final class ArchiveWriter {
        private let handle: OpaquePointer

        /// A writer onto an open descriptor (not closed by the writer), as ``AtomicOutput`` hands out.
        init(descriptor: Int32, format: Exporter.Format) throws {
            guard let handle = archive_write_new() else { throw PackagerError(.internal, "libarchive could not allocate a writer") }
            self.handle = handle
            switch format {
            case .zip:
                try LibArchive.check(handle, archive_write_set_format_zip(handle), "cannot select zip")
            case .wacz:
                // A WACZ's files are stored, so a reader can seek into the WARC and the index (WACZ 1.1.1).
                try LibArchive.check(handle, archive_write_set_format_zip(handle), "cannot select zip")
                try LibArchive.check(handle, archive_write_set_format_option(handle, "zip", "compression", "store"), "cannot store zip entries")
            default:
                try LibArchive.check(handle, archive_write_set_format_pax_restricted(handle), "cannot select tar")
            }
            switch format {
            case .tarZstd: try LibArchive.check(handle, archive_write_add_filter_zstd(handle), "this libarchive cannot write zstd")
            case .tarGzip:
                try LibArchive.check(handle, archive_write_add_filter_gzip(handle), "cannot select gzip")
                // No name or timestamp in the gzip header: reproducible output.
                try LibArchive.check(handle, archive_write_set_filter_option(handle, "gzip", "timestamp", nil), "cannot configure gzip")
            case .tarXz: try LibArchive.check(handle, archive_write_add_filter_xz(handle), "this libarchive cannot write xz")
            case .tar, .zip, .har, .warc, .wacz: break
            }
            try LibArchive.check(handle, archive_write_open_fd(handle, descriptor), "cannot start writing the archive")
        }

        deinit { archive_write_free(handle) }

        /// Adds a regular file with fixed metadata (mtime 0, root-owned, 0644).
        func addFile(path: String, bytes: UnsafeRawBufferPointer) throws {
            try header(path: path, size: Int64(bytes.count))
            try data(bytes, path: path)
        }

        /// Starts a regular file entry of `size` bytes with fixed metadata (mtime 0, root-owned, 0644).
        private func header(path: String, size: Int64) throws {
            guard let entry = archive_entry_new() else { throw PackagerError(.internal, "libarchive could not allocate an entry") }
            defer { archive_entry_free(entry) }
            archive_entry_set_pathname_utf8(entry, path)
            archive_entry_set_filetype(entry, carchive_type_regular)
            archive_entry_set_perm(entry, 0o644)
            archive_entry_set_size(entry, size)
            archive_entry_set_mtime(entry, 0, 0)
            archive_entry_set_uid(entry, 0)
            archive_entry_set_gid(entry, 0)
            try LibArchive.check(handle, archive_write_header(handle, entry), "cannot add \(path)")
        }

        /// Writes `bytes` into the entry started last.
        private func data(_ bytes: UnsafeRawBufferPointer, path: String) throws {
            var done = 0
            while done < bytes.count {
                let n = archive_write_data(handle, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 { try LibArchive.check(handle, Int32(n), "cannot write \(path)") }
                if n == 0 { throw PackagerError(.archive, "libarchive wrote nothing for \(path)") }
                done += n
            }
        }

        /// Adds the regular file at `source` as `path`, read in chunks (fixed metadata, as ``addFile(path:bytes:)``).
        func addFile(path: String, contentsOf source: String) throws {
            guard let file = FileHandle(forReadingAtPath: source) else { throw PackagerError(.io, "cannot read \(source)", subject: source) }
            defer { try? file.close() }
            let size = try file.seekToEnd()
            try file.seek(toOffset: 0)
            try header(path: path, size: Int64(size))
            while let chunk = try file.read(upToCount: 1 << 20), !chunk.isEmpty {
                try chunk.withUnsafeBytes { try data($0, path: path) }
            }
        }

        func close() throws { try LibArchive.check(handle, archive_write_close(handle), "cannot finish the archive") }
    }
}
