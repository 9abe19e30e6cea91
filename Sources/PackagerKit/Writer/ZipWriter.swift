import OfflineBundle

/// Writes a ZIP file entry by entry, each with known sizes and CRC, so no data descriptors are needed.
///
/// Timestamps are fixed (1980-01-01 00:00), attributes are a plain 0644 file,
/// and ZIP64 fields appear only where a size, offset or count needs them, so
/// the same entries give the same bytes on any host.
final class ZipWriter {
    struct Record {
        var name: [UInt8]
        var method: UInt16
        var crc32: UInt32
        var compressedSize: UInt64
        var size: UInt64
        var localHeaderOffset: UInt64
    }

    let output: AtomicOutput
    private(set) var records: [Record] = []

    init(output: AtomicOutput) { self.output = output }

    /// Writes a local header and returns the offset where the entry's data must start.
    func beginEntry(name: String, method: UInt16, crc32: UInt32, compressedSize: UInt64, size: UInt64) throws -> (localHeaderOffset: UInt64, dataOffset: UInt64)
    {
        let nameBytes = Array(name.utf8)
        let offset = output.offset
        let needsZip64 = compressedSize >= 0xFFFF_FFFF || size >= 0xFFFF_FFFF
        var header = [UInt8]()
        header.reserveCapacity(30 + nameBytes.count + 20)
        header.appendLE(ZipConstants.localHeaderSignature)
        header.appendLE(UInt16(needsZip64 ? 45 : 20))
        header.appendLE(UInt16(0))
        header.appendLE(method)
        header.appendLE(ZipConstants.fixedDosTime)
        header.appendLE(ZipConstants.fixedDosDate)
        header.appendLE(crc32)
        header.appendLE(needsZip64 ? UInt32.max : UInt32(compressedSize))
        header.appendLE(needsZip64 ? UInt32.max : UInt32(size))
        header.appendLE(UInt16(nameBytes.count))
        header.appendLE(UInt16(needsZip64 ? 20 : 0))
        header.append(contentsOf: nameBytes)
        if needsZip64 {
            header.appendLE(ZipConstants.zip64ExtraID)
            header.appendLE(UInt16(16))
            header.appendLE(size)
            header.appendLE(compressedSize)
        }
        try output.write(header)
        records.append(Record(name: nameBytes, method: method, crc32: crc32, compressedSize: compressedSize, size: size, localHeaderOffset: offset))
        return (offset, output.offset)
    }

    /// Writes an entry whose data is in memory.
    @discardableResult
    func addEntry(name: String, method: UInt16, crc32: UInt32, size: UInt64, data: [UInt8]) throws -> (localHeaderOffset: UInt64, dataOffset: UInt64) {
        let offsets = try beginEntry(name: name, method: method, crc32: crc32, compressedSize: UInt64(data.count), size: size)
        try output.write(data)
        return offsets
    }

    /// Writes the central directory and end records, with `comment` as the archive comment.
    func finish(comment: [UInt8]) throws {
        let cdOffset = output.offset
        for record in records {
            var extra = [UInt8]()
            if record.size >= 0xFFFF_FFFF { extra.appendLE(record.size) }
            if record.compressedSize >= 0xFFFF_FFFF { extra.appendLE(record.compressedSize) }
            if record.localHeaderOffset >= 0xFFFF_FFFF { extra.appendLE(record.localHeaderOffset) }
            var h = [UInt8]()
            h.reserveCapacity(46 + record.name.count + extra.count + 4)
            h.appendLE(ZipConstants.centralHeaderSignature)
            h.appendLE(UInt16(3 << 8 | 63))  // made by: Unix, APPNOTE 6.3
            h.appendLE(UInt16(extra.isEmpty ? 20 : 45))
            h.appendLE(UInt16(0))
            h.appendLE(record.method)
            h.appendLE(ZipConstants.fixedDosTime)
            h.appendLE(ZipConstants.fixedDosDate)
            h.appendLE(record.crc32)
            h.appendLE(record.compressedSize >= 0xFFFF_FFFF ? UInt32.max : UInt32(record.compressedSize))
            h.appendLE(record.size >= 0xFFFF_FFFF ? UInt32.max : UInt32(record.size))
            h.appendLE(UInt16(record.name.count))
            h.appendLE(UInt16(extra.isEmpty ? 0 : extra.count + 4))
            h.appendLE(UInt16(0))  // comment
            h.appendLE(UInt16(0))  // disk
            h.appendLE(UInt16(0))  // internal attributes
            h.appendLE(UInt32(0o100644) << 16)
            h.appendLE(record.localHeaderOffset >= 0xFFFF_FFFF ? UInt32.max : UInt32(record.localHeaderOffset))
            h.append(contentsOf: record.name)
            if !extra.isEmpty {
                h.appendLE(ZipConstants.zip64ExtraID)
                h.appendLE(UInt16(extra.count))
                h.append(contentsOf: extra)
            }
            try output.write(h)
        }
        let cdSize = output.offset - cdOffset
        let count = UInt64(records.count)
        let needsZip64 = count >= 0xFFFF || cdSize >= 0xFFFF_FFFF || cdOffset >= 0xFFFF_FFFF
        var end = [UInt8]()
        if needsZip64 {
            let zip64Offset = output.offset
            end.appendLE(ZipConstants.zip64EndSignature)
            end.appendLE(UInt64(44))
            end.appendLE(UInt16(3 << 8 | 63))
            end.appendLE(UInt16(45))
            end.appendLE(UInt32(0))
            end.appendLE(UInt32(0))
            end.appendLE(count)
            end.appendLE(count)
            end.appendLE(cdSize)
            end.appendLE(cdOffset)
            end.appendLE(ZipConstants.zip64LocatorSignature)
            end.appendLE(UInt32(0))
            end.appendLE(zip64Offset)
            end.appendLE(UInt32(1))
        }
        end.appendLE(ZipConstants.endOfCentralDirectorySignature)
        end.appendLE(UInt16(0))
        end.appendLE(UInt16(0))
        end.appendLE(count >= 0xFFFF ? UInt16.max : UInt16(count))
        end.appendLE(count >= 0xFFFF ? UInt16.max : UInt16(count))
        end.appendLE(cdSize >= 0xFFFF_FFFF ? UInt32.max : UInt32(cdSize))
        end.appendLE(cdOffset >= 0xFFFF_FFFF ? UInt32.max : UInt32(cdOffset))
        end.appendLE(UInt16(comment.count))
        end.append(contentsOf: comment)
        try output.write(end)
    }
}
