/// The binary layout of `index.bin`, version 1. docs/FORMAT.md is the reference.
///
/// All integers are little-endian. Sections start at multiples of 8.
package enum IndexLayout {
    package static let magic: [UInt8] = Array("PKGINDEX".utf8)
    package static let headerSize = 128
    package static let bodyRecordSize = 72
    package static let entryRecordSize = 24
    package static let slotSize = 8
    /// Entry record value of `body` when the entry has no body.
    package static let noBody: UInt32 = .max

    // Header field offsets.
    package static let versionOffset = 8
    package static let flagsOffset = 12
    package static let entryCountOffset = 16
    package static let bodyCountOffset = 20
    package static let slotCountOffset = 24
    package static let bodiesOffsetOffset = 32
    package static let entriesOffsetOffset = 40
    package static let slotsOffsetOffset = 48
    package static let stringsOffsetOffset = 56
    package static let stringsLengthOffset = 64
    package static let manifestDigestOffset = 72
    package static let dropParametersOffset = 104

    /// FNV-1a, 64 bits, over the canonical key's UTF-8 bytes.
    @inline(__always)
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            h ^= UInt64(b)
            h &*= 0x0000_0100_0000_01b3
        }
        return h
    }

    /// The number of hash slots for `entryCount` entries: a power of two at least twice the count, and at least 8.
    package static func slotCount(forEntries entryCount: Int) -> Int {
        var n = 8
        while n < entryCount * 2 { n <<= 1 }
        return n
    }
}

/// One body as the index describes it.
package struct IndexBodyRecord: Sendable, Equatable {
    package var sha256: [UInt8]
    package var localHeaderOffset: UInt64
    package var dataOffset: UInt64
    package var storedSize: UInt64
    package var size: UInt64
    package var crc32: UInt32
    package var compression: BodyCompression

    package init(sha256: [UInt8], localHeaderOffset: UInt64, dataOffset: UInt64, storedSize: UInt64, size: UInt64, crc32: UInt32, compression: BodyCompression)
    {
        self.sha256 = sha256
        self.localHeaderOffset = localHeaderOffset
        self.dataOffset = dataOffset
        self.storedSize = storedSize
        self.size = size
        self.crc32 = crc32
        self.compression = compression
    }
}

/// One request key as the index describes it.
package struct IndexEntryRecord: Sendable {
    package var key: String
    package var status: UInt16
    package var kind: EntryKind
    package var flags: UInt8
    /// Header lines, names lowercased, in recorded order.
    package var headers: [(name: String, value: String)]
    /// Position in the body table, or nil.
    package var body: Int?

    package init(key: String, status: UInt16, kind: EntryKind, flags: UInt8 = 0, headers: [(name: String, value: String)], body: Int?) {
        self.key = key
        self.status = status
        self.kind = kind
        self.flags = flags
        self.headers = headers
        self.body = body
    }
}

/// Serialises an index. Entries must be sorted by key and bodies by digest; the builder checks.
package enum IndexBuilder {
    package static func build(
        entries: [IndexEntryRecord],
        bodies: [IndexBodyRecord],
        manifestSHA256: [UInt8],
        dropQueryParameters: [String]
    ) throws -> [UInt8] {
        for i in entries.indices.dropFirst() where !(Array(entries[i - 1].key.utf8).lexicographicallyPrecedes(Array(entries[i].key.utf8))) {
            throw BundleError(.invalidArgument, "index entries must be sorted by key and unique", entry: entries[i].key)
        }
        for i in bodies.indices.dropFirst() where !(bodies[i - 1].sha256.lexicographicallyPrecedes(bodies[i].sha256)) {
            throw BundleError(.invalidArgument, "index bodies must be sorted by digest and unique")
        }
        guard manifestSHA256.count == 32 else { throw BundleError(.invalidArgument, "manifest digest must be 32 bytes") }

        // Strings: keys, then interned header blocks, then the drop list.
        var strings = [UInt8]()
        var blockOffsets = [String: (UInt32, UInt32)]()
        func append(_ text: String) throws -> (UInt32, UInt32) {
            let offset = strings.count
            strings.append(contentsOf: text.utf8)
            guard strings.count <= Int(UInt32.max) else { throw BundleError(.invalidArgument, "index strings exceed 4 GiB") }
            return (UInt32(offset), UInt32(strings.count - offset))
        }
        var keyRefs = [(UInt32, UInt32)]()
        keyRefs.reserveCapacity(entries.count)
        for entry in entries { keyRefs.append(try append(entry.key)) }
        var headerRefs = [(UInt32, UInt32)]()
        headerRefs.reserveCapacity(entries.count)
        for entry in entries {
            var block = ""
            for (name, value) in entry.headers {
                // Bytes, not Characters: "\r\n" is one Character and would pass a Character test.
                guard !name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 || $0 == UInt8(ascii: ":") }), !name.isEmpty,
                    !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 })
                else { throw BundleError(.invalidArgument, "header \(name) has a line break or colon in it", entry: entry.key) }
                block += name.lowercased() + ": " + value + "\n"
            }
            if let ref = blockOffsets[block] {
                headerRefs.append(ref)
            } else {
                let ref = try append(block)
                blockOffsets[block] = ref
                headerRefs.append(ref)
            }
        }
        let dropRef = try append(dropQueryParameters.joined(separator: "\n"))

        let slotCount = IndexLayout.slotCount(forEntries: entries.count)
        let bodiesOffset = IndexLayout.headerSize
        let entriesOffset = bodiesOffset + bodies.count * IndexLayout.bodyRecordSize
        let slotsOffset = entriesOffset + align8(entries.count * IndexLayout.entryRecordSize)
        let stringsOffset = slotsOffset + slotCount * IndexLayout.slotSize

        var out = [UInt8]()
        out.reserveCapacity(stringsOffset + strings.count)
        out.append(contentsOf: IndexLayout.magic)
        out.appendLE(BundleFormat.version)
        out.appendLE(UInt32(0))
        out.appendLE(UInt32(entries.count))
        out.appendLE(UInt32(bodies.count))
        out.appendLE(UInt32(slotCount))
        out.appendLE(UInt32(0))
        out.appendLE(UInt64(bodiesOffset))
        out.appendLE(UInt64(entriesOffset))
        out.appendLE(UInt64(slotsOffset))
        out.appendLE(UInt64(stringsOffset))
        out.appendLE(UInt64(strings.count))
        out.append(contentsOf: manifestSHA256)
        out.appendLE(dropRef.0)
        out.appendLE(dropRef.1)
        out.append(contentsOf: repeatElement(0, count: IndexLayout.headerSize - out.count))

        for body in bodies {
            guard body.sha256.count == 32 else { throw BundleError(.invalidArgument, "body digest must be 32 bytes") }
            out.append(contentsOf: body.sha256)
            out.appendLE(body.localHeaderOffset)
            out.appendLE(body.dataOffset)
            out.appendLE(body.storedSize)
            out.appendLE(body.size)
            out.appendLE(body.crc32)
            out.appendLE(body.compression.rawValue)
            out.appendLE(UInt16(0))
        }
        for (i, entry) in entries.enumerated() {
            out.appendLE(keyRefs[i].0)
            out.appendLE(keyRefs[i].1)
            out.appendLE(headerRefs[i].0)
            out.appendLE(headerRefs[i].1)
            if let body = entry.body {
                guard body >= 0, body < bodies.count else { throw BundleError(.invalidArgument, "body reference out of range", entry: entry.key) }
                out.appendLE(UInt32(body))
            } else {
                out.appendLE(IndexLayout.noBody)
            }
            out.appendLE(entry.status)
            out.append(entry.kind.rawValue)
            out.append(entry.flags)
        }
        out.append(contentsOf: repeatElement(0, count: slotsOffset - out.count))

        var slots = [UInt64](repeating: 0, count: slotCount)
        let mask = slotCount - 1
        for (i, entry) in entries.enumerated() {
            var key = Array(entry.key.utf8)
            let h = key.withUnsafeMutableBytes { IndexLayout.hash(UnsafeRawBufferPointer($0)) }
            var slot = Int(truncatingIfNeeded: h) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = (h >> 32) | (UInt64(i + 1) << 32)
        }
        for slot in slots {
            out.appendLE(UInt32(truncatingIfNeeded: slot))
            out.appendLE(UInt32(truncatingIfNeeded: slot >> 32))
        }
        out.append(contentsOf: strings)
        return out
    }

    private static func align8(_ n: Int) -> Int { (n + 7) & ~7 }
}
