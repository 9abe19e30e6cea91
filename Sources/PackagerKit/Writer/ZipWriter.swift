import OfflineBundle

/// Writes a ZIP file entry by entry, each with known sizes and CRC, so no data descriptors are needed.
///
/// Timestamps are fixed (1980-01-01 00:00), attributes are a plain 0644 file,
/// and ZIP64 fields appear only where a size, offset or count needs them, so
/// the same entries give the same bytes on any host.
final class ZipWriter {
    let output: AtomicOutput
    /// The central directory so far, as it will be written; from `spillSize` bytes on it goes to `spill`.
    private var central = [UInt8]()
    /// Where earlier parts of the central directory went, and their lengths.
    private var spilled: [(offset: UInt64, count: Int)] = []
    private let spill: OverflowFile?
    private let spillSize: Int
    private var count: UInt64 = 0

    /// - Parameters:
    ///   - spill: a file that takes the central directory's records, `spillSize` bytes at a time, until
    ///     ``finish(comment:)``: a bundle of many bodies then holds no record per body in memory. Nil keeps them all in
    ///     memory.
    init(output: AtomicOutput, spill: OverflowFile? = nil, spillSize: Int = 1 << 20) {
        self.output = output
        self.spill = spill
        self.spillSize = spillSize
    }

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
        try addCentralRecord(name: nameBytes, method: method, crc32: crc32, compressedSize: compressedSize, size: size, localHeaderOffset: offset)
        return (offset, output.offset)
    }

    /// Writes an entry whose data is in memory.
    @discardableResult
    func addEntry(name: String, method: UInt16, crc32: UInt32, size: UInt64, data: [UInt8]) throws -> (localHeaderOffset: UInt64, dataOffset: UInt64) {
        let offsets = try beginEntry(name: name, method: method, crc32: crc32, compressedSize: UInt64(data.count), size: size)
        try output.write(data)
        return offsets
    }

    /// The entry's central directory record, kept (or spilled) until ``finish(comment:)``.
    private func addCentralRecord(name: [UInt8], method: UInt16, crc32: UInt32, compressedSize: UInt64, size: UInt64, localHeaderOffset: UInt64) throws {
        var extra = [UInt8]()
        if size >= 0xFFFF_FFFF { extra.appendLE(size) }
        if compressedSize >= 0xFFFF_FFFF { extra.appendLE(compressedSize) }
        if localHeaderOffset >= 0xFFFF_FFFF { extra.appendLE(localHeaderOffset) }
        central.appendLE(ZipConstants.centralHeaderSignature)
        central.appendLE(UInt16(3 << 8 | 63))  // made by: Unix, APPNOTE 6.3
        central.appendLE(UInt16(extra.isEmpty ? 20 : 45))
        central.appendLE(UInt16(0))
        central.appendLE(method)
        central.appendLE(ZipConstants.fixedDosTime)
        central.appendLE(ZipConstants.fixedDosDate)
        central.appendLE(crc32)
        central.appendLE(compressedSize >= 0xFFFF_FFFF ? UInt32.max : UInt32(compressedSize))
        central.appendLE(size >= 0xFFFF_FFFF ? UInt32.max : UInt32(size))
        central.appendLE(UInt16(name.count))
        central.appendLE(UInt16(extra.isEmpty ? 0 : extra.count + 4))
        central.appendLE(UInt16(0))  // comment
        central.appendLE(UInt16(0))  // disk
        central.appendLE(UInt16(0))  // internal attributes
        central.appendLE(UInt32(0o100644) << 16)
        central.appendLE(localHeaderOffset >= 0xFFFF_FFFF ? UInt32.max : UInt32(localHeaderOffset))
        central.append(contentsOf: name)
        if !extra.isEmpty {
            central.appendLE(ZipConstants.zip64ExtraID)
            central.appendLE(UInt16(extra.count))
            central.append(contentsOf: extra)
        }
        count += 1
        if let spill, central.count >= spillSize {
            spilled.append((try spill.append(central), central.count))
            central.removeAll(keepingCapacity: true)
        }
    }

    /// Writes the central directory and end records, with `comment` as the archive comment.
    func finish(comment: [UInt8]) throws {
        let cdOffset = output.offset
        if let spill, !spilled.isEmpty {
            var buffer = [UInt8](repeating: 0, count: spilled.map(\.count).max() ?? 0)
            for part in spilled {
                try buffer.withUnsafeMutableBytes { raw in
                    let bytes = UnsafeMutableRawBufferPointer(rebasing: raw[0..<part.count])
                    try spill.read(into: bytes, at: part.offset)
                    try output.write(UnsafeRawBufferPointer(bytes))
                }
            }
        }
        try output.write(central)
        let cdSize = output.offset - cdOffset
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
