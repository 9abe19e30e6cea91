/// The binary layout of `index.bin`, version 2. docs/FORMAT.md §4 is the reference.
///
/// All integers are little-endian. Sections start at multiples of 8.
package enum IndexLayout {
    package static let magic: [UInt8] = Array("PKGINDEX".utf8)
    package static let headerSize = 144
    package static let bodyRecordSize = 68
    package static let entryRecordSize = 32
    package static let slotSize = 8
    /// Entry record value of `body` when the entry has no body.
    package static let noBody: UInt32 = .max
    /// A time field's value when the time is unknown.
    package static let noTime = Int64.min

    // Header field offsets.
    package static let versionOffset = 8
    package static let flagsOffset = 12
    package static let entryCountOffset = 16
    package static let bodyCountOffset = 20
    package static let slotCountOffset = 24
    package static let blockCountOffset = 28
    package static let bodiesOffsetOffset = 32
    package static let entriesOffsetOffset = 40
    package static let slotsOffsetOffset = 48
    package static let blocksOffsetOffset = 56
    package static let stringsOffsetOffset = 64
    package static let stringsLengthOffset = 72
    package static let manifestDigestOffset = 80
    package static let createdAtOffset = 112
    package static let keysEndOffset = 120
    package static let rulesOffsetOffset = 124
    package static let rulesLengthOffset = 128

    /// Entry flag: the entry's ETag is derived from its body digest when it is answered; the block holds none.
    package static let flagETagSynthesized: UInt8 = 0x01
    /// Entry flag: the entry's Last-Modified was made by the writer, not sent by an origin.
    package static let flagLastModifiedSynthesized: UInt8 = 0x02
    package static let knownEntryFlags: UInt8 = 0x03

    /// Hex digits of the digest in a body's ZIP entry name, unless two bodies share them (docs/FORMAT.md §2.1).
    package static let bodyNameDigits = 16

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

    /// The number of hash slots for `entryCount` entries: the smallest power of two that is at least 8 and at least
    /// 5/4 of the count (a load of at most 0.8).
    package static func slotCount(forEntries entryCount: Int) -> Int {
        var n = 8
        while n < entryCount + (entryCount + 3) / 4 { n <<= 1 }
        return n
    }

    /// Whether a table of `slotCount` slots may hold `entryCount` entries.
    package static func slotCountHolds(_ slotCount: Int, entries entryCount: Int) -> Bool {
        slotCount >= 8 && slotCount & (slotCount - 1) == 0 && slotCount >= entryCount + (entryCount + 3) / 4
    }

    /// The strong ETag a writer synthesizes from a body's SHA-256: its first 16 bytes in hex, quoted.
    package static func synthesizedETag(sha256: some Collection<UInt8>) -> String {
        "\"" + hexString(sha256.prefix(16)) + "\""
    }
}

/// The layout of version-1 indexes, which the reader still mounts (converted to version 2 in memory).
package enum IndexLayoutV1 {
    package static let headerSize = 128
    package static let bodyRecordSize = 72
    package static let entryRecordSize = 24
}

/// One body as the index describes it.
package struct IndexBodyRecord: Sendable, Equatable {
    package var sha256: [UInt8]
    package var localHeaderOffset: UInt64
    /// Local header offset + the local header's length (30 + name + extra).
    package var dataOffset: UInt64
    package var storedSize: UInt64
    package var size: UInt64
    package var crc32: UInt32
    /// CRC-32 of the stored bytes as they lie in the ZIP entry (equal to `crc32` for stored bodies).
    package var storedCRC32: UInt32
    package var compression: BodyCompression

    package init(
        sha256: [UInt8], localHeaderOffset: UInt64, dataOffset: UInt64, storedSize: UInt64, size: UInt64, crc32: UInt32, storedCRC32: UInt32,
        compression: BodyCompression
    ) {
        self.sha256 = sha256
        self.localHeaderOffset = localHeaderOffset
        self.dataOffset = dataOffset
        self.storedSize = storedSize
        self.size = size
        self.crc32 = crc32
        self.storedCRC32 = storedCRC32
        self.compression = compression
    }
}

/// One request key as the index describes it.
package struct IndexEntryRecord: Sendable {
    package var key: String
    package var status: UInt16
    package var kind: EntryKind
    /// ``IndexLayout/flagETagSynthesized`` and ``IndexLayout/flagLastModifiedSynthesized``.
    package var flags: UInt8
    /// Header lines, names lowercased, in recorded order.
    package var headers: [(name: String, value: String)]
    /// Position in the body table, or nil.
    package var body: Int?
    /// When the response was fetched, in seconds since 1970 (UTC).
    package var fetchedAt: Int64?
    /// The origin's `Date` header, in seconds since 1970, when it sent one.
    package var originDate: Int64?

    package init(
        key: String, status: UInt16, kind: EntryKind, flags: UInt8 = 0, headers: [(name: String, value: String)], body: Int?, fetchedAt: Int64? = nil,
        originDate: Int64? = nil
    ) {
        self.key = key
        self.status = status
        self.kind = kind
        self.flags = flags
        self.headers = headers
        self.body = body
        self.fetchedAt = fetchedAt
        self.originDate = originDate
    }
}

/// Serialises a version-2 index. Entries must be sorted by key and bodies by digest; the builder checks.
package enum IndexBuilder {
    package static func build(
        entries: [IndexEntryRecord],
        bodies: [IndexBodyRecord],
        manifestSHA256: [UInt8],
        rules: BundleRules,
        createdAt: Int64?
    ) throws -> [UInt8] {
        for i in entries.indices.dropFirst() where !(Array(entries[i - 1].key.utf8).lexicographicallyPrecedes(Array(entries[i].key.utf8))) {
            throw BundleError(.invalidArgument, "index entries must be sorted by key and unique", entry: entries[i].key)
        }
        for i in bodies.indices.dropFirst() where !(bodies[i - 1].sha256.lexicographicallyPrecedes(bodies[i].sha256)) {
            throw BundleError(.invalidArgument, "index bodies must be sorted by digest and unique")
        }
        guard manifestSHA256.count == 32 else { throw BundleError(.invalidArgument, "manifest digest must be 32 bytes") }

        // Strings: keys, then the interned header blocks, then the rules.
        var strings = [UInt8]()
        func checkSize() throws {
            guard strings.count <= Int(UInt32.max) else { throw BundleError(.invalidArgument, "index strings exceed 4 GiB") }
        }
        var keyOffsets = [UInt32]()
        keyOffsets.reserveCapacity(entries.count)
        for entry in entries {
            guard !entry.key.isEmpty else { throw BundleError(.invalidArgument, "an index key is empty") }
            keyOffsets.append(UInt32(truncatingIfNeeded: strings.count))
            strings.append(contentsOf: entry.key.utf8)
            try checkSize()
        }
        let keysEnd = UInt32(strings.count)
        var blockIndex = [[UInt8]: UInt32]()
        var blockOffsets = [UInt32]()
        var entryBlocks = [UInt32]()
        entryBlocks.reserveCapacity(entries.count)
        for entry in entries {
            var block = [UInt8]()
            for (name, value) in entry.headers {
                // Bytes, not Characters: "\r\n" is one Character and would pass a Character test.
                guard !name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 || $0 == UInt8(ascii: ":") }), !name.isEmpty,
                    !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 })
                else { throw BundleError(.invalidArgument, "header \(name) has a line break or colon in it", entry: entry.key) }
                block.append(contentsOf: name.lowercased().utf8)
                block.append(contentsOf: ": ".utf8)
                block.append(contentsOf: value.utf8)
                block.append(0x0A)
            }
            if let index = blockIndex[block] {
                entryBlocks.append(index)
            } else {
                let index = UInt32(blockOffsets.count)
                blockIndex[block] = index
                blockOffsets.append(UInt32(truncatingIfNeeded: strings.count))
                strings.append(contentsOf: block)
                try checkSize()
                entryBlocks.append(index)
            }
        }
        let rulesOffset = UInt32(truncatingIfNeeded: strings.count)
        blockOffsets.append(rulesOffset)
        strings.append(contentsOf: try rules.encoded())
        try checkSize()
        let rulesLength = UInt32(truncatingIfNeeded: strings.count) - rulesOffset

        let blockCount = blockOffsets.count - 1
        let slotCount = IndexLayout.slotCount(forEntries: entries.count)
        let bodiesOffset = IndexLayout.headerSize
        let entriesOffset = align8(bodiesOffset + bodies.count * IndexLayout.bodyRecordSize)
        let slotsOffset = entriesOffset + entries.count * IndexLayout.entryRecordSize
        let blocksOffset = slotsOffset + slotCount * IndexLayout.slotSize
        let stringsOffset = align8(blocksOffset + blockOffsets.count * 4)

        var out = [UInt8]()
        out.reserveCapacity(stringsOffset + strings.count)
        out.append(contentsOf: IndexLayout.magic)
        out.appendLE(BundleFormat.version)
        out.appendLE(UInt32(0))
        out.appendLE(UInt32(entries.count))
        out.appendLE(UInt32(bodies.count))
        out.appendLE(UInt32(slotCount))
        out.appendLE(UInt32(blockCount))
        out.appendLE(UInt64(bodiesOffset))
        out.appendLE(UInt64(entriesOffset))
        out.appendLE(UInt64(slotsOffset))
        out.appendLE(UInt64(blocksOffset))
        out.appendLE(UInt64(stringsOffset))
        out.appendLE(UInt64(strings.count))
        out.append(contentsOf: manifestSHA256)
        out.appendLE(UInt64(bitPattern: createdAt ?? IndexLayout.noTime))
        out.appendLE(keysEnd)
        out.appendLE(rulesOffset)
        out.appendLE(rulesLength)
        out.append(contentsOf: repeatElement(0, count: IndexLayout.headerSize - out.count))

        for body in bodies {
            guard body.sha256.count == 32 else { throw BundleError(.invalidArgument, "body digest must be 32 bytes") }
            let headerLength = body.dataOffset &- body.localHeaderOffset
            guard body.dataOffset >= body.localHeaderOffset, headerLength <= 0xFFFF else {
                throw BundleError(.invalidArgument, "a body's local header is longer than 65535 bytes")
            }
            out.append(contentsOf: body.sha256)
            out.appendLE(body.localHeaderOffset)
            out.appendLE(body.storedSize)
            out.appendLE(body.size)
            out.appendLE(body.crc32)
            out.appendLE(body.storedCRC32)
            out.appendLE(UInt16(headerLength))
            out.append(UInt8(truncatingIfNeeded: body.compression.rawValue))
            out.append(0)
        }
        out.append(contentsOf: repeatElement(0, count: entriesOffset - out.count))
        for (i, entry) in entries.enumerated() {
            guard entry.flags & ~IndexLayout.knownEntryFlags == 0 else { throw BundleError(.invalidArgument, "unknown entry flags", entry: entry.key) }
            out.appendLE(keyOffsets[i])
            out.appendLE(entryBlocks[i])
            if let body = entry.body {
                guard body >= 0, body < bodies.count else { throw BundleError(.invalidArgument, "body reference out of range", entry: entry.key) }
                out.appendLE(UInt32(body))
            } else {
                guard entry.flags & IndexLayout.flagETagSynthesized == 0 else {
                    throw BundleError(.invalidArgument, "an entry without a body cannot have a synthesized ETag", entry: entry.key)
                }
                out.appendLE(IndexLayout.noBody)
            }
            out.appendLE(entry.status)
            out.append(entry.kind.rawValue)
            out.append(entry.flags)
            out.appendLE(UInt64(bitPattern: entry.fetchedAt ?? IndexLayout.noTime))
            out.appendLE(UInt64(bitPattern: entry.originDate ?? IndexLayout.noTime))
        }

        var slots = [UInt64](repeating: 0, count: slotCount)
        let mask = slotCount - 1
        for (i, entry) in entries.enumerated() {
            var key = entry.key
            let h = key.withUTF8 { IndexLayout.hash(UnsafeRawBufferPointer($0)) }
            var slot = Int(truncatingIfNeeded: h) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = (h >> 32) | (UInt64(i + 1) << 32)
        }
        for slot in slots {
            out.appendLE(UInt32(truncatingIfNeeded: slot))
            out.appendLE(UInt32(truncatingIfNeeded: slot >> 32))
        }
        for offset in blockOffsets { out.appendLE(offset) }
        out.append(contentsOf: repeatElement(0, count: stringsOffset - out.count))
        out.append(contentsOf: strings)
        return out
    }

    private static func align8(_ n: Int) -> Int { (n + 7) & ~7 }
}
