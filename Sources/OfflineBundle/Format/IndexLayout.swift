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
    /// Header flag: keys may carry request qualifiers after their URL (method, body digest, headers; §5.4).
    package static let headerFlagRequestQualifiers: UInt32 = 0x01
    /// Header flag: queries are read as forms (`+` is a space; parameters ordered by name, one name's values in their
    /// order; §5.1 rule 11).
    package static let headerFlagFormQuery: UInt32 = 0x02
    package static let knownHeaderFlags: UInt32 = 0x03
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

    /// How many hex digits of each digest its body's ZIP entry name holds (docs/FORMAT.md §2.1): 16, or one more than it
    /// shares with a neighbour in digest order (a body shares the most leading digits with a neighbour), so no two
    /// names are equal. `digests` must be sorted and distinct.
    package static func bodyNameDigits(_ digests: [[UInt8]]) -> [Int] {
        digests.indices.map { i in
            bodyNameDigits(digests[i], previous: i > 0 ? digests[i - 1] : nil, next: i + 1 < digests.count ? digests[i + 1] : nil)
        }
    }

    /// The digits of one body's name, given its neighbours in digest order.
    package static func bodyNameDigits(_ digest: [UInt8], previous: [UInt8]?, next: [UInt8]?) -> Int {
        func sharedDigits(_ a: [UInt8]?) -> Int {
            guard let a else { return 0 }
            var n = 0
            for (x, y) in Swift.zip(a, digest) {
                if x != y { return n + (x >> 4 == y >> 4 ? 1 : 0) }
                n += 2
            }
            return n
        }
        return min(64, max(bodyNameDigits, max(sharedDigits(previous), sharedDigits(next)) + 1))
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

    /// Whether `other` is the same body stored the same way (digest, sizes, both CRC-32s, compression): a delta reads
    /// such a body from its base, and a target rebuilt from them is byte for byte the same (docs/FORMAT.md §12).
    package func isStoredAlike(_ other: IndexBodyRecord) -> Bool {
        sha256 == other.sha256 && storedSize == other.storedSize && size == other.size && crc32 == other.crc32 && storedCRC32 == other.storedCRC32
            && compression == other.compression
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

/// Serialises an index in the version-2 layout (version 3's). Entries must be sorted by key and bodies by digest; the builder checks.
package enum IndexBuilder {
    /// `index.bin` for `entries` (sorted by key, unique) and `bodies` (sorted by digest, unique), in one piece.
    package static func build(
        entries: [IndexEntryRecord],
        bodies: [IndexBodyRecord],
        manifestSHA256: [UInt8],
        rules: BundleRules,
        createdAt: Int64?
    ) throws -> [UInt8] {
        var accumulator = try IndexAccumulator(entryCount: entries.count, bodyCount: bodies.count)
        for body in bodies { try accumulator.addBody(body) }
        for entry in entries { try accumulator.add(entry) }
        return try accumulator.finish(manifestSHA256: manifestSHA256, rules: rules, createdAt: createdAt).joinedBytes()
    }
}

/// `index.bin` built body by body and entry by entry, so a writer need not hold every body's record or every entry's
/// record (with its header lines) until the end: each body leaves its 68-byte record, and each entry its key, its
/// 32-byte record, its hash slot and, when no entry before it had the same header lines, its header block.
/// ``finish(manifestSHA256:rules:createdAt:)`` returns the file as pieces, to be written one after the other without
/// joining them. Not copyable: its growing parts are shared storage (``SpilledBytes``), which two copies would both
/// append to.
package struct IndexAccumulator: ~Copyable {
    private let entryCount: Int
    private let bodyCount: Int
    /// The keys' bytes, one after the other: the start of the strings section.
    private let keys: SpilledBytes
    /// The last key added, to check the order.
    private var lastKey: [UInt8] = []
    /// The key being added, and the record being made: buffers kept from one entry to the next, not made for each.
    private var nextKey: [UInt8] = []
    private var record: [UInt8] = []
    /// The distinct header blocks, one after the other, and where each starts among them.
    private let blocks: SpilledBytes
    private let blockStarts: ScratchArray<UInt32>
    /// Each distinct block by the first 16 bytes of its SHA-256 (``DigestTable``): its index. The bytes are compared in
    /// `blocks` when a digest is found, not kept twice.
    private var blocksByDigest: DigestTable
    private let records: SpilledBytes
    /// The hash table (``IndexLayout/slotSize`` bytes a slot), and which of its slots are taken: slots are written at
    /// the places their keys' hashes choose, one at a time once they are in a file.
    private let slots: ScratchArray<UInt64>
    private var taken: [UInt64]
    private let slotCount: Int
    /// What the index's parts hold in memory before they go to the spill folder.
    private let spillFolder: String?
    private let memoryLimit: Int
    private var added = 0
    /// The body records so far, in digest order.
    private let bodyRecords: SpilledBytes
    private var lastDigest: [UInt8] = []
    private var bodiesAdded = 0
    /// The sums of the bodies' sizes and stored sizes so far.
    package private(set) var bodyBytes: UInt64 = 0
    package private(set) var storedBytes: UInt64 = 0
    /// Whether a key carries request qualifiers (sets header flag 0x1).
    private var qualified = false
    /// Whether the keys were canonicalized reading queries as forms, and need it to be found (header flag 0x2).
    package var formQuery = false
    /// The format version written at offset 8: this library's, or 2 when an index a version-2 writer made is made
    /// again (a delta that stands for a version-2 bundle, §12.4). The layout is the same.
    package var version = BundleFormat.version

    /// For `entryCount` entries (exactly that many are added) referring to `bodyCount` bodies. With `spillFolder`, the
    /// parts that grow with the entries (keys, header blocks, entry and body records) go to temporary files there
    /// once each passes `memoryLimit` bytes.
    package init(entryCount: Int, bodyCount: Int, spillFolder: String? = nil, memoryLimit: Int = 1 << 20) throws {
        self.entryCount = entryCount
        self.bodyCount = bodyCount
        self.spillFolder = spillFolder
        self.memoryLimit = memoryLimit
        slotCount = IndexLayout.slotCount(forEntries: entryCount)
        slots = try ScratchArray(zeros: slotCount, folder: spillFolder, memoryLimit: memoryLimit, pageBytes: 0)
        taken = [UInt64](repeating: 0, count: (slotCount + 63) / 64)
        blockStarts = ScratchArray(folder: spillFolder, memoryLimit: memoryLimit / 4, pageBytes: 16 << 10)
        blocksByDigest = DigestTable(folder: spillFolder, memoryLimit: memoryLimit)
        keys = SpilledBytes(folder: spillFolder, memoryLimit: memoryLimit)
        blocks = SpilledBytes(folder: spillFolder, memoryLimit: memoryLimit)
        records = SpilledBytes(folder: spillFolder, memoryLimit: memoryLimit)
        bodyRecords = SpilledBytes(folder: spillFolder, memoryLimit: memoryLimit)
    }

    /// Adds the next body; digests must come in increasing byte order.
    package mutating func addBody(_ body: IndexBodyRecord) throws {
        try addBody(
            sha256: body.sha256, localHeaderOffset: body.localHeaderOffset, dataOffset: body.dataOffset, storedSize: body.storedSize,
            size: body.size, crc32: body.crc32, storedCRC32: body.storedCRC32, compression: body.compression)
    }

    /// Adds the next body (the fields of an ``IndexBodyRecord``); digests must come in increasing byte order.
    package mutating func addBody(
        sha256: [UInt8], localHeaderOffset: UInt64, dataOffset: UInt64, storedSize: UInt64, size: UInt64, crc32: UInt32, storedCRC32: UInt32,
        compression: BodyCompression
    ) throws {
        guard bodiesAdded < bodyCount else { throw BundleError(.invalidArgument, "more index bodies than announced") }
        guard sha256.count == 32 else { throw BundleError(.invalidArgument, "body digest must be 32 bytes") }
        if bodiesAdded > 0 {
            guard lastDigest.lexicographicallyPrecedes(sha256) else {
                throw BundleError(.invalidArgument, "index bodies must be sorted by digest and unique")
            }
        }
        let headerLength = dataOffset &- localHeaderOffset
        guard dataOffset >= localHeaderOffset, headerLength <= 0xFFFF else {
            throw BundleError(.invalidArgument, "a body's local header is longer than 65535 bytes")
        }
        record.removeAll(keepingCapacity: true)
        record.append(contentsOf: sha256)
        record.appendLE(localHeaderOffset)
        record.appendLE(storedSize)
        record.appendLE(size)
        record.appendLE(crc32)
        record.appendLE(storedCRC32)
        record.appendLE(UInt16(headerLength))
        record.append(UInt8(truncatingIfNeeded: compression.rawValue))
        record.append(0)
        try bodyRecords.append(record)
        lastDigest = sha256
        bodyBytes &+= size
        storedBytes &+= storedSize
        bodiesAdded += 1
    }

    /// What the record of the body at `i` (one added already) holds for a manifest: its digest, sizes and compression.
    package func body(at i: Int) throws -> (sha256: ArraySlice<UInt8>, size: UInt64, storedSize: UInt64, compression: BodyCompression) {
        precondition(i >= 0 && i < bodiesAdded, "body \(i) of \(bodiesAdded)")
        let r = i * IndexLayout.bodyRecordSize
        let record = try bodyRecords.bytes(in: r..<(r + IndexLayout.bodyRecordSize))
        return (record[0..<32], record.u64(48), record.u64(40), BodyCompression(rawValue: UInt16(record[66])) ?? .stored)
    }

    /// Adds the next entry; keys must come in increasing byte order.
    package mutating func add(_ entry: IndexEntryRecord) throws {
        try add(
            key: entry.key, status: entry.status, kind: entry.kind, flags: entry.flags, headers: entry.headers, body: entry.body,
            fetchedAt: entry.fetchedAt, originDate: entry.originDate)
    }

    /// Adds the next entry (the fields of an ``IndexEntryRecord``); keys must come in increasing byte order.
    package mutating func add(
        key: String, status: UInt16, kind: EntryKind, flags: UInt8, headers: [(name: String, value: String)], body: Int?, fetchedAt: Int64?,
        originDate: Int64?
    ) throws {
        guard added < entryCount else { throw BundleError(.invalidArgument, "more index entries than announced", entry: key) }
        guard !key.isEmpty else { throw BundleError(.invalidArgument, "an index key is empty") }
        let keyStart = keys.count
        nextKey.removeAll(keepingCapacity: true)
        nextKey.append(contentsOf: key.utf8)
        if added > 0 {
            guard lastKey.lexicographicallyPrecedes(nextKey) else {
                throw BundleError(.invalidArgument, "index entries must be sorted by key and unique", entry: key)
            }
        }
        try keys.append(nextKey)
        if key.utf8.contains(0x20) {
            // A space starts a key's request qualifiers (§5.4): their shape is checked here as a reader checks it.
            let split = RequestQualifiers.split(key: key)
            guard isWellFormedKey(String(split.url)), split.qualifiers != nil else {
                throw BundleError(.invalidArgument, "a key's request qualifiers are malformed", entry: key)
            }
            qualified = true
        }
        guard keys.count <= Int(UInt32.max) else { throw BundleError(.invalidArgument, "index strings exceed 4 GiB") }

        var block = [UInt8]()
        for (name, value) in headers {
            // Bytes, not Characters: "\r\n" is one Character and would pass a Character test.
            guard !name.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 || $0 == UInt8(ascii: ":") }), !name.isEmpty,
                !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 })
            else { throw BundleError(.invalidArgument, "header \(name) has a line break or colon in it", entry: key) }
            block.append(contentsOf: name.lowercased().utf8)
            block.append(contentsOf: ": ".utf8)
            block.append(contentsOf: value.utf8)
            block.append(0x0A)
        }
        guard block.count <= BundleFormat.maxHeaderBlockBytes else {
            throw BundleError(
                .invalidArgument,
                "its \(headers.count) headers take \(block.count) bytes, past the \(BundleFormat.maxHeaderBlockBytes) an entry may store (FORMAT §4.5)",
                entry: key)
        }
        let blockIndex = try intern(block)

        guard flags & ~IndexLayout.knownEntryFlags == 0 else { throw BundleError(.invalidArgument, "unknown entry flags", entry: key) }
        record.removeAll(keepingCapacity: true)
        record.appendLE(UInt32(keyStart))
        record.appendLE(blockIndex)
        if let body {
            guard body >= 0, body < bodyCount else { throw BundleError(.invalidArgument, "body reference out of range", entry: key) }
            record.appendLE(UInt32(body))
        } else {
            guard flags & IndexLayout.flagETagSynthesized == 0 else {
                throw BundleError(.invalidArgument, "an entry without a body cannot have a synthesized ETag", entry: key)
            }
            record.appendLE(IndexLayout.noBody)
        }
        record.appendLE(status)
        record.append(kind.rawValue)
        record.append(flags)
        record.appendLE(UInt64(bitPattern: fetchedAt ?? IndexLayout.noTime))
        record.appendLE(UInt64(bitPattern: originDate ?? IndexLayout.noTime))
        try records.append(record)

        let h = nextKey.withUnsafeBytes { IndexLayout.hash($0) }
        let mask = slotCount - 1
        var slot = Int(truncatingIfNeeded: h) & mask
        while taken[slot >> 6] & (1 << (slot & 63)) != 0 { slot = (slot + 1) & mask }
        taken[slot >> 6] |= 1 << (slot & 63)
        try slots.set((h >> 32) | (UInt64(added + 1) << 32), at: slot)
        added += 1
        swap(&lastKey, &nextKey)
    }

    /// The index of `block` among the distinct blocks, adding it when it is new.
    private mutating func intern(_ block: [UInt8]) throws -> UInt32 {
        let digest = TableKey(sha256Of: block)
        let known = try blocksByDigest.value(for: digest)
        if let known {
            let i = Int(known)
            let start = Int(try blockStarts.value(at: i))
            let end = i + 1 < blockStarts.count ? Int(try blockStarts.value(at: i + 1)) : blocks.count
            if try blocks.equals(start..<end, block) { return UInt32(i) }
        }
        let index = UInt32(blockStarts.count)
        try blockStarts.append(UInt32(truncatingIfNeeded: blocks.count))
        try blocks.append(block)
        guard keys.count + blocks.count <= Int(UInt32.max) else { throw BundleError(.invalidArgument, "index strings exceed 4 GiB") }
        // Two different blocks with one digest (never seen): the table keeps the first.
        if known == nil { try blocksByDigest.set(UInt64(index), for: digest) }
        return index
    }

    /// The whole file, as pieces to write in order: the header, the body records, the entry records, the slots with
    /// the block offsets, the keys, the header blocks, the rules.
    package consuming func finish(manifestSHA256: [UInt8], rules: BundleRules, createdAt: Int64?) throws -> [IndexPiece] {
        guard added == entryCount, bodiesAdded == bodyCount else {
            throw BundleError(.invalidArgument, "index entries or bodies differ from those announced")
        }
        guard manifestSHA256.count == 32 else { throw BundleError(.invalidArgument, "manifest digest must be 32 bytes") }
        let encodedRules = try rules.encoded()
        let keysEnd = keys.count
        let rulesOffset = keysEnd + blocks.count
        let stringsLength = rulesOffset + encodedRules.count
        guard stringsLength <= Int(UInt32.max) else { throw BundleError(.invalidArgument, "index strings exceed 4 GiB") }

        let blockCount = blockStarts.count
        let bodiesOffset = IndexLayout.headerSize
        let entriesOffset = Self.align8(bodiesOffset + bodyCount * IndexLayout.bodyRecordSize)
        let slotsOffset = entriesOffset + entryCount * IndexLayout.entryRecordSize
        let blocksOffset = slotsOffset + slotCount * IndexLayout.slotSize
        let stringsOffset = Self.align8(blocksOffset + (blockCount + 1) * 4)

        var head = [UInt8]()
        head.reserveCapacity(IndexLayout.headerSize)
        head.append(contentsOf: IndexLayout.magic)
        head.appendLE(version)
        // The request-qualifiers flag only when a key carries qualifiers: a bundle without them is as it always was.
        head.appendLE((qualified ? IndexLayout.headerFlagRequestQualifiers : 0) | (formQuery ? IndexLayout.headerFlagFormQuery : 0))
        head.appendLE(UInt32(entryCount))
        head.appendLE(UInt32(bodyCount))
        head.appendLE(UInt32(slotCount))
        head.appendLE(UInt32(blockCount))
        head.appendLE(UInt64(bodiesOffset))
        head.appendLE(UInt64(entriesOffset))
        head.appendLE(UInt64(slotsOffset))
        head.appendLE(UInt64(blocksOffset))
        head.appendLE(UInt64(stringsOffset))
        head.appendLE(UInt64(stringsLength))
        head.append(contentsOf: manifestSHA256)
        head.appendLE(UInt64(bitPattern: createdAt ?? IndexLayout.noTime))
        head.appendLE(UInt32(keysEnd))
        head.appendLE(UInt32(rulesOffset))
        head.appendLE(UInt32(encodedRules.count))
        head.append(contentsOf: repeatElement(0, count: IndexLayout.headerSize - head.count))

        // The slots and the block table, made a run of values at a time, and kept as the other parts are.
        let table = SpilledBytes(folder: spillFolder, memoryLimit: memoryLimit)
        var run = [UInt8]()
        run.reserveCapacity(4096 * 8)
        for start in stride(from: 0, to: slotCount, by: 4096) {
            run.removeAll(keepingCapacity: true)
            for slot in try slots.values(in: start..<min(slotCount, start + 4096)) {
                run.appendLE(UInt32(truncatingIfNeeded: slot))
                run.appendLE(UInt32(truncatingIfNeeded: slot >> 32))
            }
            try table.append(run)
        }
        for start in stride(from: 0, to: blockCount, by: 4096) {
            run.removeAll(keepingCapacity: true)
            for blockStart in try blockStarts.values(in: start..<min(blockCount, start + 4096)) { run.appendLE(UInt32(keysEnd) + blockStart) }
            try table.append(run)
        }
        run.removeAll(keepingCapacity: true)
        run.appendLE(UInt32(rulesOffset))
        run.append(contentsOf: repeatElement(0, count: stringsOffset - slotsOffset - table.count - run.count))
        try table.append(run)
        let bodyPadding = [UInt8](repeating: 0, count: entriesOffset - bodiesOffset - bodyRecords.count)
        return [
            .bytes(head), .spilled(bodyRecords), .bytes(bodyPadding), .spilled(records), .spilled(table), .spilled(keys), .spilled(blocks),
            .bytes(encodedRules),
        ]
    }

    private static func align8(_ n: Int) -> Int { (n + 7) & ~7 }
}
