/// ZIP signatures and sizes (APPNOTE 6.3), as this project reads and writes them.
package enum ZipConstants {
    package static let localHeaderSignature: UInt32 = 0x0403_4b50
    package static let centralHeaderSignature: UInt32 = 0x0201_4b50
    package static let endOfCentralDirectorySignature: UInt32 = 0x0605_4b50
    package static let zip64EndSignature: UInt32 = 0x0606_4b50
    package static let zip64LocatorSignature: UInt32 = 0x0706_4b50
    package static let localHeaderSize = 30
    package static let centralHeaderSize = 46
    package static let endSize = 22
    package static let zip64EndSize = 56
    package static let zip64LocatorSize = 20
    package static let zip64ExtraID: UInt16 = 0x0001
    /// DOS date 1980-01-01, the fixed timestamp of every entry.
    package static let fixedDosDate: UInt16 = 0x0021
    package static let fixedDosTime: UInt16 = 0
}

/// One central directory record.
package struct ZipCentralEntry: Sendable {
    package var name: String
    package var nameBytes: [UInt8]
    package var flags: UInt16
    package var method: UInt16
    package var crc32: UInt32
    package var compressedSize: UInt64
    package var uncompressedSize: UInt64
    package var localHeaderOffset: UInt64
    package var externalAttributes: UInt32
    package var versionMadeBy: UInt16
    /// Offset of this record inside the central directory.
    package var recordOffset: Int
}

/// The located central directory of a ZIP file.
package struct ZipDirectory: Sendable {
    package var centralDirectoryOffset: UInt64
    package var centralDirectorySize: UInt64
    package var entryCount: UInt64
    /// Where the end records start (the ZIP64 end record when there is one): nothing of an entry may lie past it.
    package var endOfEntries: UInt64
    package var comment: [UInt8]
    package var isZip64: Bool

    /// Finds and validates the end of central directory records of `file`.
    ///
    /// `tailLimit` bounds the bytes read from the end to find the end record (a remote bundle reads what it fetched in
    /// its first request); by default, the longest an end record with its comment can be.
    package static func locate(in file: BundleFile, tailLimit: Int = ZipConstants.endSize + 0xFFFF) throws -> ZipDirectory {
        let size = file.size
        guard size >= UInt64(ZipConstants.endSize) else {
            throw BundleError(.notABundle, "\(file.path) is \(size) bytes, too short to be a ZIP file")
        }
        let tailCount = Int(min(size, UInt64(min(tailLimit, ZipConstants.endSize + 0xFFFF))))
        let tailStart = size - UInt64(tailCount)
        let tail = try file.read(at: tailStart, count: tailCount, what: "the end of the file")
        guard let end = endRecordPosition(in: tail) else {
            throw BundleError(.notABundle, "no ZIP end of central directory record: \(file.path) is truncated or not a ZIP file")
        }
        let endOffset = tailStart + UInt64(end)
        var directory = tail.withUnsafeBytes { raw in
            ZipDirectory(
                centralDirectoryOffset: UInt64(raw.u32(end + 16)),
                centralDirectorySize: UInt64(raw.u32(end + 12)),
                entryCount: UInt64(raw.u16(end + 10)),
                endOfEntries: endOffset,
                comment: Array(raw[(end + 22)...]),
                isZip64: false)
        }
        let (disk, cdDisk, onDisk) = tail.withUnsafeBytes { ($0.u16(end + 4), $0.u16(end + 6), $0.u16(end + 8)) }
        let needsZip64 =
            directory.centralDirectoryOffset == 0xFFFF_FFFF || directory.centralDirectorySize == 0xFFFF_FFFF
            || directory.entryCount == 0xFFFF
        if needsZip64 || endOffset >= UInt64(ZipConstants.zip64LocatorSize) {
            // Look for a ZIP64 locator just before the end record.
            // (An end record that asks for ZIP64 can sit too close to the start of the file for a locator: found by fuzzing.)
            let locatorOffset = endOffset >= UInt64(ZipConstants.zip64LocatorSize) ? endOffset - UInt64(ZipConstants.zip64LocatorSize) : 0
            let locator =
                endOffset >= UInt64(ZipConstants.zip64LocatorSize)
                ? try file.read(at: locatorOffset, count: ZipConstants.zip64LocatorSize, what: "the ZIP64 locator") : []
            if locator.count == ZipConstants.zip64LocatorSize, locator.u32(0) == ZipConstants.zip64LocatorSignature {
                let zip64Offset = locator.u64(8)
                guard zip64Offset <= locatorOffset, locatorOffset - zip64Offset >= UInt64(ZipConstants.zip64EndSize) else {
                    throw BundleError(.corruptDirectory, "the ZIP64 locator points outside the file")
                }
                let record = try file.read(at: zip64Offset, count: ZipConstants.zip64EndSize, what: "the ZIP64 end record")
                guard record.u32(0) == ZipConstants.zip64EndSignature else {
                    throw BundleError(.corruptDirectory, "the ZIP64 end of central directory record is damaged")
                }
                directory.entryCount = record.u64(32)
                directory.centralDirectorySize = record.u64(40)
                directory.centralDirectoryOffset = record.u64(48)
                directory.endOfEntries = zip64Offset
                directory.isZip64 = true
                guard record.u32(16) == 0, record.u32(20) == 0 else {
                    throw BundleError(.unsupported, "multi-disk ZIP files are not supported")
                }
            } else if needsZip64 {
                throw BundleError(.corruptDirectory, "the end record asks for ZIP64 but there is no ZIP64 locator")
            }
        }
        guard directory.isZip64 || (disk == 0 && cdDisk == 0 && UInt64(onDisk) == directory.entryCount) else {
            throw BundleError(.unsupported, "multi-disk ZIP files are not supported")
        }
        let cdEnd = directory.centralDirectoryOffset.addingReportingOverflow(directory.centralDirectorySize)
        guard !cdEnd.overflow, cdEnd.partialValue <= directory.endOfEntries else {
            throw BundleError(
                .truncated,
                "the central directory (offset \(directory.centralDirectoryOffset), \(directory.centralDirectorySize) bytes) lies outside the file: it is truncated or damaged"
            )
        }
        guard directory.centralDirectorySize <= UInt64(Int.max),
            directory.entryCount <= directory.centralDirectorySize / UInt64(ZipConstants.centralHeaderSize)
        else {
            throw BundleError(
                .corruptDirectory,
                "the central directory claims \(directory.entryCount) entries, more than its \(directory.centralDirectorySize) bytes can hold")
        }
        return directory
    }

    /// Walks the central directory records, calling `body` with each; stops early when `body` returns false.
    ///
    /// Records whose name `skip` accepts are checked for structure but not decoded (mounting skips bodies this way).
    /// The directory is read through one reused 1 MiB window, not one array of its whole size (12 MB for 100,000 entries).
    package func forEachEntry(from file: BundleFile, skip: ((UnsafeRawBufferPointer) -> Bool)? = nil, _ body: (ZipCentralEntry) throws -> Bool) throws {
        let total = Int(centralDirectorySize)
        var window = [UInt8](repeating: 0, count: min(total, 1 << 20))
        var windowStart = 0
        var windowCount = 0
        var pos = 0
        var index: UInt64 = 0
        while index < entryCount {
            // A record is at most 46 + 3 × 65,535 bytes, so it always fits in a fresh window that starts with it.
            let available = windowStart + windowCount - pos
            if available < ZipConstants.centralHeaderSize + 3 * 0xFFFF && windowStart + windowCount < total {
                windowStart = pos
                windowCount = min(window.count, total - pos)
                try window.withUnsafeMutableBytes { buffer in
                    try file.readFully(
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<windowCount]), at: centralDirectoryOffset + UInt64(pos),
                        what: "the central directory")
                }
            }
            let (length, entry) = try window.withUnsafeBytes { raw in
                try record(
                    in: UnsafeRawBufferPointer(rebasing: raw[0..<windowCount]), at: pos - windowStart, directoryPosition: pos, index: index, skip: skip)
            }
            pos += length
            index += 1
            if let entry, try !body(entry) { return }
        }
    }

    /// Where the end record starts in `tail` (the file's last bytes): the last signature whose comment runs exactly
    /// to the end of the file; nil when there is none.
    package static func endRecordPosition(in tail: [UInt8]) -> Int? {
        tail.withUnsafeBytes { raw in
            var i = raw.count - ZipConstants.endSize
            while i >= 0 {
                if raw.u32(i) == ZipConstants.endOfCentralDirectorySignature, i + ZipConstants.endSize + Int(raw.u16(i + 20)) == raw.count {
                    return i
                }
                i -= 1
            }
            return nil
        }
    }

    /// The metadata entries' records, read from the end of the central directory without walking it: `names` are the
    /// names its last records may have, last first (`signature.json`, which may be absent, then `manifest.json`, then
    /// `index.bin`); a name that is not there is skipped when `optional` holds it. Each record is found by trying the
    /// lengths its ZIP64 extra may have (none, or 1 to 3 fields), so the search is exact: no scan for a signature.
    package func trailingEntries(from file: BundleFile, names: [String], optional: Set<String>) throws -> [ZipCentralEntry] {
        let cdEnd = centralDirectoryOffset + centralDirectorySize
        var end = cdEnd
        var found: [ZipCentralEntry] = []
        for name in names {
            let nameBytes = Array(name.utf8)
            var match: ZipCentralEntry?
            for extraLength in [0, 12, 20, 28] {
                let length = UInt64(ZipConstants.centralHeaderSize + nameBytes.count + extraLength)
                guard end >= centralDirectoryOffset + length else { continue }
                let start = end - length
                let bytes = try file.read(at: start, count: Int(length), what: "the central directory record of \(name)")
                guard bytes.u32(0) == ZipConstants.centralHeaderSignature, Int(bytes.u16(28)) == nameBytes.count,
                    Int(bytes.u16(30)) == extraLength, bytes.u16(32) == 0, Array(bytes[46..<(46 + nameBytes.count)]) == nameBytes
                else { continue }
                let (_, entry) = try bytes.withUnsafeBytes {
                    try record(in: $0, at: 0, directoryPosition: Int(start - centralDirectoryOffset), index: entryCount - 1 - UInt64(found.count), skip: nil)
                }
                match = entry
                end = start
                break
            }
            if let match {
                found.append(match)
            } else if !optional.contains(name) {
                throw BundleError(
                    .corruptDirectory,
                    "the central directory does not end with the record of \(name), as a bundle's does (\(BundleFormat.indexEntryName), \(BundleFormat.manifestEntryName), then \(BundleFormat.signatureEntryName) when signed)"
                )
            }
        }
        return found
    }

    /// Checks and decodes the record at `at` of `raw` (which holds the directory from `directoryPosition - at` on);
    /// returns its length, and the entry unless `skip` accepted its name.
    private func record(
        in raw: UnsafeRawBufferPointer, at pos: Int, directoryPosition: Int, index: UInt64, skip: ((UnsafeRawBufferPointer) -> Bool)?
    ) throws -> (Int, ZipCentralEntry?) {
        guard pos + ZipConstants.centralHeaderSize <= raw.count else {
            throw BundleError(.corruptDirectory, "the central directory ends inside record \(index)")
        }
        guard raw.u32(pos) == ZipConstants.centralHeaderSignature else {
            throw BundleError(
                .corruptDirectory, "central directory record \(index) has a bad signature at offset \(centralDirectoryOffset + UInt64(directoryPosition))")
        }
        let nameLength = Int(raw.u16(pos + 28))
        let extraLength = Int(raw.u16(pos + 30))
        let commentLength = Int(raw.u16(pos + 32))
        let recordLength = ZipConstants.centralHeaderSize + nameLength + extraLength + commentLength
        guard pos + recordLength <= raw.count else {
            throw BundleError(.corruptDirectory, "central directory record \(index) runs past the directory's end")
        }
        if let skip, skip(UnsafeRawBufferPointer(rebasing: raw[(pos + 46)..<(pos + 46 + nameLength)])) {
            return (recordLength, nil)
        }
        let nameBytes = Array(raw[(pos + 46)..<(pos + 46 + nameLength)])
        var entry = ZipCentralEntry(
            name: String(decoding: nameBytes, as: UTF8.self),
            nameBytes: nameBytes,
            flags: raw.u16(pos + 8),
            method: raw.u16(pos + 10),
            crc32: raw.u32(pos + 16),
            compressedSize: UInt64(raw.u32(pos + 20)),
            uncompressedSize: UInt64(raw.u32(pos + 24)),
            localHeaderOffset: UInt64(raw.u32(pos + 42)),
            externalAttributes: raw.u32(pos + 38),
            versionMadeBy: raw.u16(pos + 4),
            recordOffset: directoryPosition)
        if raw.u16(pos + 34) != 0 {
            throw BundleError(.unsupported, "multi-disk ZIP files are not supported", entry: entry.name)
        }
        try Self.applyZip64Extra(
            UnsafeRawBufferPointer(rebasing: raw[(pos + 46 + nameLength)..<(pos + 46 + nameLength + extraLength)]),
            to: &entry)
        return (recordLength, entry)
    }

    private static func applyZip64Extra(_ extra: UnsafeRawBufferPointer, to entry: inout ZipCentralEntry) throws {
        var pos = 0
        while pos + 4 <= extra.count {
            let id = extra.u16(pos)
            let length = Int(extra.u16(pos + 2))
            guard pos + 4 + length <= extra.count else {
                throw BundleError(.corruptDirectory, "an extra field runs past its record", entry: entry.name)
            }
            if id == ZipConstants.zip64ExtraID {
                var field = pos + 4
                let end = field + length
                func next() throws -> UInt64 {
                    guard field + 8 <= end else {
                        throw BundleError(.corruptDirectory, "the ZIP64 extra field is too short", entry: entry.name)
                    }
                    defer { field += 8 }
                    return extra.u64(field)
                }
                if entry.uncompressedSize == 0xFFFF_FFFF { entry.uncompressedSize = try next() }
                if entry.compressedSize == 0xFFFF_FFFF { entry.compressedSize = try next() }
                if entry.localHeaderOffset == 0xFFFF_FFFF { entry.localHeaderOffset = try next() }
            }
            pos += 4 + length
        }
    }
}
