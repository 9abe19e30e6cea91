#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A validated `index.bin`, held in memory in the version-2 layout (version 3's too), with lookups that allocate only
/// the key; or, for a tool's pass over a whole bundle, in a mapped scratch file (``MappedIndex``).
///
/// A version-1 index is converted to the version-2 layout when it is mounted (docs/FORMAT.md §10.3); ``formatVersion``
/// says which version the bundle holds.
package struct BundleIndex: Sendable {
    /// The index bytes in memory, in the version-2 layout (for a version-1 bundle, the converted bytes, not the
    /// file's); empty when ``mapped``.
    private let memory: [UInt8]
    /// The index bytes in a mapped scratch file, when the mount asked for it.
    package let mapped: MappedIndex?

    /// The index's bytes (in the version-2 layout).
    @inline(__always)
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        if let mapped { return try mapped.withBytes(body) }
        return try memory.withUnsafeBytes(body)
    }

    /// The index's length in bytes.
    package var byteCount: Int { mapped?.count ?? memory.count }

    /// A copy of the index's bytes when mapped (for the delta and edit paths, which mount in memory), else the bytes.
    package var bytes: [UInt8] { mapped.map { $0.withBytes { Array($0) } } ?? memory }
    /// The format version of the bundle's own index.
    package let formatVersion: UInt32
    /// Whether keys may carry request qualifiers (header flag 0x1, docs/FORMAT.md §5.4).
    package let hasRequestQualifiers: Bool
    /// Whether its keys' queries were read as forms (header flag 0x2): incoming URLs are canonicalized the same way.
    package let readsQueriesAsForms: Bool
    package let entryCount: Int
    package let bodyCount: Int
    package let slotCount: Int
    package let blockCount: Int
    package let bodiesOffset: Int
    package let entriesOffset: Int
    package let slotsOffset: Int
    package let blocksOffset: Int
    package let stringsOffset: Int
    package let stringsLength: Int
    package let keysEnd: Int
    package let manifestSHA256: [UInt8]
    package let createdAt: Int64?
    package let rules: BundleRules

    /// Whether body records carry a CRC-32 of their stored bytes (version 2), so a deflate stream can be checked
    /// without inflating it.
    package var hasStoredChecksums: Bool { formatVersion >= 2 }

    /// Parses and validates an index against the container it came from.
    ///
    /// - Parameters:
    ///   - bytes: the index entry's bytes.
    ///   - bodyArea: body extents must lie in `0..<bodyArea` (the start of the first metadata entry).
    ///   - maxRatio: the largest inflated-to-stored size ratio a deflated body may claim.
    package init(bytes: [UInt8], bodyArea: UInt64, maxRatio: UInt64) throws {
        guard bytes.count >= 12, bytes[0..<8].elementsEqual(IndexLayout.magic) else {
            throw BundleError(.corruptIndex, "index.bin: the index does not start with its magic number")
        }
        switch bytes.u32(IndexLayout.versionOffset) {
        case let version where version == 2 || version == 3:
            // Version 3 keeps version 2's layout; it may store index.bin deflated, and its manifest changed (§10.2).
            self = try bytes.withUnsafeBytes {
                try Self(version2: $0, memory: bytes, mapped: nil, bodyArea: bodyArea, maxRatio: maxRatio, formatVersion: version)
            }
        case 1:
            let converted = try IndexV1.convert(bytes)
            self = try converted.withUnsafeBytes {
                try Self(version2: $0, memory: converted, mapped: nil, bodyArea: bodyArea, maxRatio: maxRatio, formatVersion: 1)
            }
        case let version:
            throw BundleError(.unsupported, "the bundle uses format version \(version); this reader knows versions 1 to 3")
        }
    }

    /// Parses and validates an index of version 2 or 3 held in a mapped scratch file (a version-1 index is converted in
    /// memory: mount it with ``init(bytes:bodyArea:maxRatio:)``).
    package init(mapped: MappedIndex, bodyArea: UInt64, maxRatio: UInt64) throws {
        let version = try mapped.withBytes { raw -> UInt32 in
            guard raw.count >= 12, raw[0..<8].elementsEqual(IndexLayout.magic) else {
                throw BundleError(.corruptIndex, "index.bin: the index does not start with its magic number")
            }
            return raw.u32(IndexLayout.versionOffset)
        }
        guard version == 2 || version == 3 else {
            // A version-1 index is converted in memory, and any other refused, as a mount in memory does (the mount
            // then compares the version with the archive comment's).
            self = try mapped.withBytes { try BundleIndex(bytes: Array($0), bodyArea: bodyArea, maxRatio: maxRatio) }
            return
        }
        self = try mapped.withBytes {
            try Self(version2: $0, memory: [], mapped: mapped, bodyArea: bodyArea, maxRatio: maxRatio, formatVersion: version)
        }
    }

    /// Reads and checks the header and every record of `bytes`, which are `memory`'s or `mapped`'s.
    private init(
        version2 bytes: UnsafeRawBufferPointer, memory: [UInt8], mapped: MappedIndex?, bodyArea: UInt64, maxRatio: UInt64, formatVersion: UInt32
    ) throws {
        self.memory = memory
        self.mapped = mapped
        func fail(_ message: String) -> BundleError { BundleError(.corruptIndex, "index.bin: \(message)") }
        guard bytes.count >= IndexLayout.headerSize else { throw fail("the index is shorter than its header") }
        let headerFlags = bytes.u32(IndexLayout.flagsOffset)
        guard headerFlags & ~IndexLayout.knownHeaderFlags == 0 else {
            throw BundleError(.unsupported, "index.bin: the index sets flags \(headerFlags) this reader does not know")
        }
        hasRequestQualifiers = headerFlags & IndexLayout.headerFlagRequestQualifiers != 0
        readsQueriesAsForms = headerFlags & IndexLayout.headerFlagFormQuery != 0
        self.formatVersion = formatVersion
        entryCount = Int(bytes.u32(IndexLayout.entryCountOffset))
        bodyCount = Int(bytes.u32(IndexLayout.bodyCountOffset))
        slotCount = Int(bytes.u32(IndexLayout.slotCountOffset))
        blockCount = Int(bytes.u32(IndexLayout.blockCountOffset))
        let total = UInt64(bytes.count)
        func section(_ at: Int) throws -> Int {
            let value = bytes.u64(at)
            guard value <= total else { throw fail("a section offset points past the index") }
            return Int(value)
        }
        bodiesOffset = try section(IndexLayout.bodiesOffsetOffset)
        entriesOffset = try section(IndexLayout.entriesOffsetOffset)
        slotsOffset = try section(IndexLayout.slotsOffsetOffset)
        blocksOffset = try section(IndexLayout.blocksOffsetOffset)
        stringsOffset = try section(IndexLayout.stringsOffsetOffset)
        stringsLength = try section(IndexLayout.stringsLengthOffset)
        guard IndexLayout.slotCountHolds(slotCount, entries: entryCount) else {
            throw fail("the hash table has \(slotCount) slots for \(entryCount) entries")
        }
        guard bodiesOffset >= IndexLayout.headerSize,
            bodiesOffset + bodyCount * IndexLayout.bodyRecordSize <= entriesOffset,
            entriesOffset + entryCount * IndexLayout.entryRecordSize <= slotsOffset,
            slotsOffset + slotCount * IndexLayout.slotSize <= blocksOffset,
            blocksOffset + (blockCount + 1) * 4 <= stringsOffset,
            stringsOffset + stringsLength == bytes.count
        else { throw fail("its sections overlap or run past its end") }
        manifestSHA256 = Array(bytes[IndexLayout.manifestDigestOffset..<(IndexLayout.manifestDigestOffset + 32)])
        let created = Int64(bitPattern: bytes.u64(IndexLayout.createdAtOffset))
        createdAt = created == IndexLayout.noTime ? nil : created
        keysEnd = Int(bytes.u32(IndexLayout.keysEndOffset))
        let rulesOffset = Int(bytes.u32(IndexLayout.rulesOffsetOffset))
        let rulesLength = Int(bytes.u32(IndexLayout.rulesLengthOffset))
        guard keysEnd <= rulesOffset, rulesOffset + rulesLength == stringsLength else {
            throw fail("the keys and the rules do not lie where the strings section says")
        }
        rules = try BundleRules(decoding: bytes[(stringsOffset + rulesOffset)..<(stringsOffset + stringsLength)])
        // A mapped index lets go of the pages its checks read as they go (they read every byte once).
        let trim: () -> Void = { mapped?.release() }
        try Self.checkBlocks(bytes, at: blocksOffset, count: blockCount, from: keysEnd, to: rulesOffset)
        trim()
        try Self.checkEntries(
            bytes, strings: stringsOffset, keysEnd: keysEnd, entries: (entriesOffset, entryCount), bodyCount: bodyCount, blockCount: blockCount,
            qualified: hasRequestQualifiers, trim: trim)
        trim()
        try Self.checkBodies(bytes, at: bodiesOffset, count: bodyCount, bodyArea: bodyArea, maxRatio: maxRatio, trim: trim)
        trim()
    }

    /// The header block table: `blockCount + 1` offsets, non-decreasing, from the end of the keys to the rules.
    private static func checkBlocks(_ raw: UnsafeRawBufferPointer, at offset: Int, count: Int, from keysEnd: Int, to rulesOffset: Int) throws {
        do {
            var previous = keysEnd
            for j in 0...count {
                let value = Int(raw.u32(offset + 4 * j))
                guard value >= previous, value <= rulesOffset, j > 0 || value == keysEnd, j < count || value == rulesOffset else {
                    throw BundleError(.corruptIndex, "index.bin: header block \(j) does not lie between the keys and the rules")
                }
                // A block past the bound is hostile (§4.5): a reader never builds a response of that many fields.
                guard j == 0 || value - previous <= BundleFormat.maxHeaderBlockBytes else {
                    throw BundleError(
                        .hostile,
                        "index.bin: header block \(j - 1) holds \(value - previous) bytes, past the \(BundleFormat.maxHeaderBlockBytes) a block may hold")
                }
                previous = value
            }
        }
    }

    /// Every entry's references, flags, key shape, status and order, checked once so lookups need not check again.
    private static func checkEntries(
        _ raw: UnsafeRawBufferPointer, strings sOff: Int, keysEnd: Int, entries: (offset: Int, count: Int), bodyCount bCount: Int,
        blockCount: Int, qualified: Bool, trim: () -> Void
    ) throws {
        func fail(_ message: String) -> BundleError { BundleError(.corruptIndex, "index.bin: \(message)") }
        let (eOff, entryCount) = entries
        do {
            var previousStart = 0
            var previousLength = 0
            for i in 0..<entryCount {
                if i & 0x3FFF == 0x3FFF { trim() }
                let r = eOff + i * IndexLayout.entryRecordSize
                let keyOffset = Int(raw.u32(r))
                let keyEnd = i + 1 < entryCount ? Int(raw.u32(r + IndexLayout.entryRecordSize)) : keysEnd
                guard i > 0 || keyOffset == 0, keyOffset < keyEnd, keyEnd <= keysEnd else {
                    throw fail("entry \(i)'s key does not follow the key before it")
                }
                let keyLength = keyEnd - keyOffset
                guard Int(raw.u32(r + 4)) < blockCount else { throw fail("entry \(i) names a header block past the table") }
                let body = raw.u32(r + 8)
                guard body == IndexLayout.noBody || Int(body) < bCount else { throw fail("entry \(i) names body \(body) of \(bCount)") }
                guard raw[r + 14] <= EntryKind.blocked.rawValue else { throw fail("entry \(i) has an unknown kind") }
                let flags = raw[r + 15]
                guard flags & ~IndexLayout.knownEntryFlags == 0 else {
                    throw BundleError(.unsupported, "index.bin: entry \(i) sets flags this reader does not know")
                }
                guard flags & IndexLayout.flagETagSynthesized == 0 || body != IndexLayout.noBody else {
                    throw fail("entry \(i) synthesizes an ETag but has no body")
                }
                let key = UnsafeRawBufferPointer(rebasing: raw[(sOff + keyOffset)..<(sOff + keyEnd)])
                var keyText: String { String(decoding: key.prefix(200), as: UTF8.self) }
                // With request qualifiers (header flag 0x1), a key may go on after its URL from its first space (§5.4).
                let space = qualified ? key.firstIndex(of: 0x20) : nil
                guard isWellFormedKey(space.map { UnsafeRawBufferPointer(rebasing: key[..<$0]) } ?? key) else {
                    throw BundleError(.hostile, "index.bin: entry \(i)'s key is not a canonical http or https URL", entry: keyText)
                }
                if let space, !RequestQualifiers.isWellFormed(UnsafeRawBufferPointer(rebasing: key[space...])) {
                    throw BundleError(.hostile, "index.bin: entry \(i)'s key has request qualifiers of the wrong shape", entry: keyText)
                }
                // Statuses an HTTP response can carry, and no body where HTTP allows none (RFC 9110 §6.4.1):
                // a body after a 204 or 304 head would be read by the client as the next response.
                let status = raw.u16(r + 12)
                guard (100...599).contains(status) else {
                    throw BundleError(.hostile, "index.bin: entry \(i) records HTTP status \(status), outside 100...599", entry: keyText)
                }
                // A 1xx is never a final response: a client given one keeps waiting for the real one.
                guard status >= 200 else {
                    throw BundleError(
                        .hostile, "index.bin: entry \(i) records HTTP status \(status), an informational status, not a final response", entry: keyText)
                }
                guard body == IndexLayout.noBody || !(status == 204 || status == 304) else {
                    throw BundleError(.hostile, "index.bin: entry \(i) records a body with HTTP status \(status), which has none", entry: keyText)
                }
                if i > 0 {
                    let c = memcmp(raw.baseAddress! + sOff + previousStart, raw.baseAddress! + sOff + keyOffset, min(previousLength, keyLength))
                    guard c < 0 || (c == 0 && previousLength < keyLength) else { throw fail("entries are not sorted by key at entry \(i)") }
                }
                previousStart = keyOffset
                previousLength = keyLength
            }
        }
    }

    /// Bodies: sorted by digest, laid out in order, inside the body area, not overlapping, with believable sizes.
    private static func checkBodies(
        _ raw: UnsafeRawBufferPointer, at bodiesOffset: Int, count bCount: Int, bodyArea: UInt64, maxRatio: UInt64, trim: () -> Void
    ) throws {
        let bOff = bodiesOffset
        do {
            var previousEnd: UInt64 = 0
            for i in 0..<bCount {
                if i & 0x3FFF == 0x3FFF { trim() }
                let r = bOff + i * IndexLayout.bodyRecordSize
                var name: String { "sha256:" + hexString(UnsafeRawBufferPointer(rebasing: raw[r..<(r + 32)])) }
                if i > 0 {
                    guard memcmp(raw.baseAddress! + r - IndexLayout.bodyRecordSize, raw.baseAddress! + r, 32) < 0 else {
                        throw BundleError(.corruptIndex, "index.bin: bodies are not sorted by digest", entry: name)
                    }
                }
                let lho = raw.u64(r + 32)
                let stored = raw.u64(r + 40)
                let size = raw.u64(r + 48)
                let headerLength = UInt64(raw.u16(r + 64))
                let method = raw[r + 66]
                guard lho >= previousEnd else {
                    throw BundleError(.hostile, "body overlaps the entry before it", entry: name)
                }
                // A local header holds 30 bytes, a name of at least `b/` + 16 hex digits (v1: `bodies/` + 64), and extras.
                let (dataOffset, headerOverflow) = lho.addingReportingOverflow(headerLength)
                let (dataEnd, overflow) = dataOffset.addingReportingOverflow(stored)
                guard headerLength >= UInt64(ZipConstants.localHeaderSize + 2 + IndexLayout.bodyNameDigits), !headerOverflow, !overflow,
                    dataEnd <= bodyArea
                else {
                    throw BundleError(.hostile, "body extent \(lho)..<\(dataEnd) lies outside the body area 0..<\(bodyArea)", entry: name)
                }
                switch UInt16(method) {
                case BodyCompression.stored.rawValue:
                    guard stored == size else { throw BundleError(.hostile, "stored body claims \(size) bytes but occupies \(stored)", entry: name) }
                    guard raw.u32(r + 56) == raw.u32(r + 60) else {
                        throw BundleError(.corruptIndex, "index.bin: a stored body records two different CRC-32s", entry: name)
                    }
                case BodyCompression.deflate.rawValue:
                    guard size <= max(stored, 1) &* maxRatio else {
                        throw BundleError(.hostile, "body claims to inflate \(stored) bytes to \(size), a ratio over \(maxRatio):1 (a zip bomb?)", entry: name)
                    }
                default:
                    throw BundleError(.unsupported, "body uses compression method \(method)", entry: name)
                }
                previousEnd = dataEnd
            }
        }
    }

    // MARK: Records

    package func body(at i: Int) -> IndexBodyRecord {
        withBytes { raw in
            let r = bodiesOffset + i * IndexLayout.bodyRecordSize
            let lho = raw.u64(r + 32)
            return IndexBodyRecord(
                sha256: Array(raw[r..<(r + 32)]),
                localHeaderOffset: lho,
                dataOffset: lho + UInt64(raw.u16(r + 64)),
                storedSize: raw.u64(r + 40),
                size: raw.u64(r + 48),
                crc32: raw.u32(r + 56),
                storedCRC32: raw.u32(r + 60),
                compression: BodyCompression(rawValue: UInt16(raw[r + 66])) ?? .stored)
        }
    }

    /// Where entry `i`'s key lies in `bytes`.
    @inline(__always)
    private func keyRange(_ raw: UnsafeRawBufferPointer, _ i: Int) -> Range<Int> {
        let r = entriesOffset + i * IndexLayout.entryRecordSize
        let end = i + 1 < entryCount ? Int(raw.u32(r + IndexLayout.entryRecordSize)) : keysEnd
        return (stringsOffset + Int(raw.u32(r)))..<(stringsOffset + end)
    }

    package func entryKey(_ i: Int) -> String {
        withBytes { raw in
            String(decoding: UnsafeRawBufferPointer(rebasing: raw[keyRange(raw, i)]), as: UTF8.self)
        }
    }

    /// The header block entry `i` uses, and where it lies in ``bytes``.
    package func headerBlock(ofEntry i: Int) -> (block: Int, range: Range<Int>) {
        withBytes { raw in
            let block = Int(raw.u32(entriesOffset + i * IndexLayout.entryRecordSize + 4))
            let start = stringsOffset + Int(raw.u32(blocksOffset + 4 * block))
            let end = stringsOffset + Int(raw.u32(blocksOffset + 4 * block + 4))
            return (block, start..<end)
        }
    }

    package func entryHeaders(_ i: Int) -> [(name: String, value: String)] {
        let (_, range) = headerBlock(ofEntry: i)
        return withBytes { raw in
            let (start, end) = (range.lowerBound, range.upperBound)
            // Lines `name: value\n` (§4.5), split on bytes: no line, no name, no value is copied twice.
            var headers = [(name: String, value: String)]()
            var line = start
            while line < end {
                var lineEnd = line
                while lineEnd < end, raw[lineEnd] != 0x0A { lineEnd += 1 }
                var colon = line
                while colon < lineEnd, raw[colon] != UInt8(ascii: ":") { colon += 1 }
                if colon < lineEnd {
                    var value = colon + 1
                    while value < lineEnd, raw[value] == UInt8(ascii: " ") { value += 1 }
                    // Names are lowercased here (ASCII), whatever the block holds: every rule that names a header (the
                    // never-replayed list, lookups) then holds for a hand-made block in any case (§8.4 H3).
                    let nameBytes = UnsafeRawBufferPointer(rebasing: raw[line..<colon])
                    let name =
                        nameBytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
                        ? String(decoding: nameBytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                        : String(decoding: nameBytes, as: UTF8.self)
                    headers.append((name, String(decoding: UnsafeRawBufferPointer(rebasing: raw[value..<lineEnd]), as: UTF8.self)))
                }
                line = lineEnd + 1
            }
            return headers
        }
    }

    package struct EntryFields {
        package var status: UInt16
        package var kind: EntryKind
        package var flags: UInt8
        package var body: Int?
        package var fetchedAt: Int64?
        package var originDate: Int64?
    }

    package func entryFields(_ i: Int) -> EntryFields {
        withBytes { raw in
            let r = entriesOffset + i * IndexLayout.entryRecordSize
            let body = raw.u32(r + 8)
            func time(_ at: Int) -> Int64? {
                let value = Int64(bitPattern: raw.u64(at))
                return value == IndexLayout.noTime ? nil : value
            }
            return EntryFields(
                status: raw.u16(r + 12), kind: EntryKind(rawValue: raw[r + 14]) ?? .recorded, flags: raw[r + 15],
                body: body == IndexLayout.noBody ? nil : Int(body), fetchedAt: time(r + 16), originDate: time(r + 24))
        }
    }

    /// The entries whose keys carry request qualifiers (a space after their URL), with where their URL ends.
    package func qualifiedKeys() -> [(entry: Int, urlLength: Int)] {
        withBytes { raw in
            var found: [(Int, Int)] = []
            for i in 0..<entryCount {
                if i & 0x3FFF == 0x3FFF { mapped?.release() }
                let range = keyRange(raw, i)
                if let space = UnsafeRawBufferPointer(rebasing: raw[range]).firstIndex(of: 0x20) { found.append((i, space)) }
            }
            return found
        }
    }

    /// The bytes of entry `i`'s key, to `body`.
    package func withKeyBytes<T>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try withBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[keyRange(raw, i)])) }
    }

    /// The entry whose canonical key is `key`, by the index's hash table.
    package func find(canonicalKey key: UnsafeRawBufferPointer) -> Int? { find(canonicalKey: key, hash: IndexLayout.hash(key)) }

    /// The entry whose canonical key is `key`, whose FNV-1a hash is `h`.
    package func find(canonicalKey key: UnsafeRawBufferPointer, hash h: UInt64) -> Int? {
        let tag = UInt32(truncatingIfNeeded: h >> 32)
        let mask = slotCount - 1
        return withBytes { raw -> Int? in
            var slot = Int(truncatingIfNeeded: h) & mask
            for _ in 0..<slotCount {
                let s = slotsOffset + slot * IndexLayout.slotSize
                let entryPlusOne = raw.u32(s + 4)
                if entryPlusOne == 0 { return nil }
                let i = Int(entryPlusOne) - 1
                if raw.u32(s) == tag, i < entryCount {
                    let range = keyRange(raw, i)
                    if range.count == key.count, memcmp(raw.baseAddress! + range.lowerBound, key.baseAddress!, range.count) == 0 { return i }
                }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }
}

/// Reads a version-1 index and re-lays it out as version 2, checking every bound it reads (docs/FORMAT.md §10.3).
enum IndexV1 {
    static func convert(_ bytes: [UInt8]) throws -> [UInt8] {
        func fail(_ message: String) -> BundleError { BundleError(.corruptIndex, "index.bin (version 1): \(message)") }
        guard bytes.count >= IndexLayoutV1.headerSize else { throw fail("the index is shorter than its header") }
        let entryCount = Int(bytes.u32(16))
        let bodyCount = Int(bytes.u32(20))
        let total = UInt64(bytes.count)
        func section(_ at: Int) throws -> Int {
            let value = bytes.u64(at)
            guard value <= total else { throw fail("a section offset points past the index") }
            return Int(value)
        }
        let bodiesOffset = try section(32)
        let entriesOffset = try section(40)
        let stringsOffset = try section(56)
        let stringsLength = try section(64)
        guard bodiesOffset >= IndexLayoutV1.headerSize,
            bodyCount <= (bytes.count - bodiesOffset) / IndexLayoutV1.bodyRecordSize,
            entryCount <= (bytes.count - entriesOffset) / IndexLayoutV1.entryRecordSize,
            stringsOffset + stringsLength == bytes.count
        else { throw fail("its sections run past its end") }
        func string(_ offset: UInt32, _ length: UInt32) throws -> ArraySlice<UInt8> {
            guard Int(offset) + Int(length) <= stringsLength else { throw fail("a string lies outside the strings section") }
            return bytes[(stringsOffset + Int(offset))..<(stringsOffset + Int(offset) + Int(length))]
        }
        let dropText = try string(bytes.u32(104), bytes.u32(108))
        let drop = dropText.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }

        var bodies = [IndexBodyRecord]()
        bodies.reserveCapacity(bodyCount)
        for i in 0..<bodyCount {
            let r = bodiesOffset + i * IndexLayoutV1.bodyRecordSize
            guard let compression = BodyCompression(rawValue: bytes.u16(r + 68)) else {
                throw BundleError(.unsupported, "body uses compression method \(bytes.u16(r + 68))")
            }
            let lho = bytes.u64(r + 32)
            let dataOffset = bytes.u64(r + 40)
            guard dataOffset >= lho, dataOffset - lho <= 0xFFFF else { throw BundleError(.hostile, "a body's local header is out of bounds") }
            let crc = bytes.u32(r + 64)
            bodies.append(
                IndexBodyRecord(
                    sha256: Array(bytes[r..<(r + 32)]), localHeaderOffset: lho, dataOffset: dataOffset, storedSize: bytes.u64(r + 48),
                    size: bytes.u64(r + 56), crc32: crc, storedCRC32: compression == .stored ? crc : 0, compression: compression))
        }
        guard zip(bodies, bodies.dropFirst()).allSatisfy({ $0.sha256.lexicographicallyPrecedes($1.sha256) }) else {
            throw fail("bodies are not sorted by digest")
        }
        var entries = [IndexEntryRecord]()
        entries.reserveCapacity(entryCount)
        for i in 0..<entryCount {
            let r = entriesOffset + i * IndexLayoutV1.entryRecordSize
            let key = String(decoding: try string(bytes.u32(r), bytes.u32(r + 4)), as: UTF8.self)
            let block = try string(bytes.u32(r + 8), bytes.u32(r + 12))
            var headers = [(name: String, value: String)]()
            for line in block.split(separator: 0x0A) {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
                let value = String(decoding: line[line.index(after: colon)...].drop { $0 == UInt8(ascii: " ") }, as: UTF8.self)
                guard !name.isEmpty, !name.utf8.contains(0x0D), !name.utf8.contains(0), !value.utf8.contains(0x0D), !value.utf8.contains(0) else {
                    throw fail("entry \(i)'s header block holds a line break or NUL")
                }
                headers.append((name, value))
            }
            let body = bytes.u32(r + 16)
            guard body == IndexLayout.noBody || Int(body) < bodyCount else { throw fail("entry \(i) names body \(body) of \(bodyCount)") }
            guard let kind = EntryKind(rawValue: bytes[r + 22]) else { throw fail("entry \(i) has an unknown kind") }
            entries.append(
                IndexEntryRecord(key: key, status: bytes.u16(r + 20), kind: kind, headers: headers, body: body == IndexLayout.noBody ? nil : Int(body)))
        }
        do {
            return try IndexBuilder.build(
                entries: entries, bodies: bodies, manifestSHA256: Array(bytes[72..<104]), rules: BundleRules(dropQueryParameters: drop), createdAt: nil)
        } catch let error as BundleError {
            throw fail(error.message)
        }
    }
}
