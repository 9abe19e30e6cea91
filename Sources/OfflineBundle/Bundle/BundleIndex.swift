/// A validated `index.bin`, held in memory, with lookups that allocate only the key.
package struct BundleIndex: Sendable {
    package let bytes: [UInt8]
    package let entryCount: Int
    package let bodyCount: Int
    package let slotCount: Int
    package let bodiesOffset: Int
    package let entriesOffset: Int
    package let slotsOffset: Int
    package let stringsOffset: Int
    package let stringsLength: Int
    package let manifestSHA256: [UInt8]
    package let dropQueryParameters: [String]

    /// Parses and validates an index against the container it came from.
    ///
    /// - Parameters:
    ///   - bytes: the index entry's bytes.
    ///   - bodyArea: body extents must lie in `0..<bodyArea` (the start of the first metadata entry).
    ///   - maxRatio: the largest inflated-to-stored size ratio a deflated body may claim.
    package init(bytes: [UInt8], bodyArea: UInt64, maxRatio: UInt64) throws {
        func fail(_ message: String, entry: String? = nil) -> BundleError {
            BundleError(.corruptIndex, "index.bin: \(message)", entry: entry)
        }
        guard bytes.count >= IndexLayout.headerSize, bytes[0..<8].elementsEqual(IndexLayout.magic) else {
            throw fail("the index does not start with its magic number")
        }
        let version = bytes.u32(IndexLayout.versionOffset)
        guard version == BundleFormat.version else {
            throw BundleError(.unsupported, "the bundle uses format version \(version); this reader knows version \(BundleFormat.version)")
        }
        self.bytes = bytes
        entryCount = Int(bytes.u32(IndexLayout.entryCountOffset))
        bodyCount = Int(bytes.u32(IndexLayout.bodyCountOffset))
        slotCount = Int(bytes.u32(IndexLayout.slotCountOffset))
        let total = UInt64(bytes.count)
        func section(_ at: Int) throws -> Int {
            let value = bytes.u64(at)
            guard value <= total else { throw fail("a section offset points past the index") }
            return Int(value)
        }
        bodiesOffset = try section(IndexLayout.bodiesOffsetOffset)
        entriesOffset = try section(IndexLayout.entriesOffsetOffset)
        slotsOffset = try section(IndexLayout.slotsOffsetOffset)
        stringsOffset = try section(IndexLayout.stringsOffsetOffset)
        stringsLength = try section(IndexLayout.stringsLengthOffset)
        guard slotCount >= 8, slotCount & (slotCount - 1) == 0, slotCount >= entryCount * 2 else {
            throw fail("the hash table has \(slotCount) slots for \(entryCount) entries")
        }
        guard bodiesOffset >= IndexLayout.headerSize,
            bodiesOffset + bodyCount * IndexLayout.bodyRecordSize <= entriesOffset,
            entriesOffset + entryCount * IndexLayout.entryRecordSize <= slotsOffset,
            slotsOffset + slotCount * IndexLayout.slotSize <= stringsOffset,
            stringsOffset + stringsLength == bytes.count
        else { throw fail("its sections overlap or run past its end") }
        manifestSHA256 = Array(bytes[IndexLayout.manifestDigestOffset..<(IndexLayout.manifestDigestOffset + 32)])
        let dropOffset = Int(bytes.u32(IndexLayout.dropParametersOffset))
        let dropLength = Int(bytes.u32(IndexLayout.dropParametersOffset + 4))
        guard dropOffset + dropLength <= stringsLength else { throw fail("the drop-parameter list points outside the strings") }
        let dropText = String(decoding: bytes[(stringsOffset + dropOffset)..<(stringsOffset + dropOffset + dropLength)], as: UTF8.self)
        dropQueryParameters = dropText.isEmpty ? [] : dropText.split(separator: "\n").map(String.init)

        try Self.checkEntries(bytes, strings: (stringsOffset, stringsLength), entries: (entriesOffset, entryCount), bodyCount: bodyCount)
        try Self.checkBodies(bytes, at: bodiesOffset, count: bodyCount, bodyArea: bodyArea, maxRatio: maxRatio)
    }

    /// Every entry's references, key shape, status and order, checked once so lookups need not check again.
    private static func checkEntries(_ bytes: [UInt8], strings: (offset: Int, length: Int), entries: (offset: Int, count: Int), bodyCount: Int) throws {
        func fail(_ message: String, entry: String? = nil) -> BundleError {
            BundleError(.corruptIndex, "index.bin: \(message)", entry: entry)
        }
        let entryCount = entries.count
        let (sOff, sLen, eOff, bCount) = (strings.offset, strings.length, entries.offset, bodyCount)
        try bytes.withUnsafeBytes { raw in
            for i in 0..<entryCount {
                let r = eOff + i * IndexLayout.entryRecordSize
                let keyOffset = Int(raw.u32(r))
                let keyLength = Int(raw.u32(r + 4))
                let headerOffset = Int(raw.u32(r + 8))
                let headerLength = Int(raw.u32(r + 12))
                guard keyOffset + keyLength <= sLen, headerOffset + headerLength <= sLen, keyLength > 0 else {
                    throw fail("entry \(i) points outside the strings")
                }
                let body = raw.u32(r + 16)
                guard body == IndexLayout.noBody || Int(body) < bCount else { throw fail("entry \(i) names body \(body) of \(bCount)") }
                guard raw[r + 22] <= EntryKind.blocked.rawValue else { throw fail("entry \(i) has an unknown kind") }
                let key = UnsafeRawBufferPointer(rebasing: raw[(sOff + keyOffset)..<(sOff + keyOffset + keyLength)])
                var keyText: String { String(decoding: key.prefix(200), as: UTF8.self) }
                guard isWellFormedKey(key) else {
                    throw BundleError(.hostile, "index.bin: entry \(i)'s key is not a canonical http or https URL", entry: keyText)
                }
                // Statuses an HTTP response can carry, and no body where HTTP allows none (RFC 9110 §6.4.1):
                // a body after a 204 or 304 head would be read by the client as the next response.
                let status = raw.u16(r + 20)
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
                    let previous = r - IndexLayout.entryRecordSize
                    let aLength = Int(raw.u32(previous + 4))
                    let c = memcmp(raw.baseAddress! + sOff + Int(raw.u32(previous)), raw.baseAddress! + sOff + keyOffset, min(aLength, keyLength))
                    guard c < 0 || (c == 0 && aLength < keyLength) else { throw fail("entries are not sorted by key at entry \(i)") }
                }
            }
        }
    }

    /// Bodies: sorted by digest, laid out in order, inside the body area, not overlapping, with believable sizes.
    private static func checkBodies(_ bytes: [UInt8], at bodiesOffset: Int, count bCount: Int, bodyArea: UInt64, maxRatio: UInt64) throws {
        func fail(_ message: String, entry: String? = nil) -> BundleError {
            BundleError(.corruptIndex, "index.bin: \(message)", entry: entry)
        }
        let bOff = bodiesOffset
        try bytes.withUnsafeBytes { raw in
            var previousEnd: UInt64 = 0
            for i in 0..<bCount {
                let r = bOff + i * IndexLayout.bodyRecordSize
                var name: String { "bodies/" + hexString(UnsafeRawBufferPointer(rebasing: raw[r..<(r + 32)])) }
                if i > 0 {
                    guard memcmp(raw.baseAddress! + r - IndexLayout.bodyRecordSize, raw.baseAddress! + r, 32) < 0 else {
                        throw fail("bodies are not sorted by digest", entry: name)
                    }
                }
                let lho = raw.u64(r + 32)
                let dataOffset = raw.u64(r + 40)
                let stored = raw.u64(r + 48)
                let size = raw.u64(r + 56)
                let method = raw.u16(r + 68)
                guard lho >= previousEnd else {
                    throw BundleError(.hostile, "body overlaps the entry before it", entry: name)
                }
                let minimumHeader = UInt64(ZipConstants.localHeaderSize + 7 + 64)
                let (dataEnd, overflow) = dataOffset.addingReportingOverflow(stored)
                let (headerEnd, headerOverflow) = lho.addingReportingOverflow(minimumHeader)
                guard !headerOverflow, dataOffset >= headerEnd, dataOffset - lho <= minimumHeader + 0xFFFF, !overflow, dataEnd <= bodyArea else {
                    throw BundleError(.hostile, "body extent \(lho)..<\(dataEnd) lies outside the body area 0..<\(bodyArea)", entry: name)
                }
                switch method {
                case BodyCompression.stored.rawValue:
                    guard stored == size else { throw BundleError(.hostile, "stored body claims \(size) bytes but occupies \(stored)", entry: name) }
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
        bytes.withUnsafeBytes { raw in
            let r = bodiesOffset + i * IndexLayout.bodyRecordSize
            return IndexBodyRecord(
                sha256: Array(raw[r..<(r + 32)]),
                localHeaderOffset: raw.u64(r + 32),
                dataOffset: raw.u64(r + 40),
                storedSize: raw.u64(r + 48),
                size: raw.u64(r + 56),
                crc32: raw.u32(r + 64),
                compression: BodyCompression(rawValue: raw.u16(r + 68)) ?? .stored)
        }
    }

    package func entryKey(_ i: Int) -> String {
        bytes.withUnsafeBytes { raw in
            let r = entriesOffset + i * IndexLayout.entryRecordSize
            let o = stringsOffset + Int(raw.u32(r))
            return String(decoding: UnsafeRawBufferPointer(rebasing: raw[o..<(o + Int(raw.u32(r + 4)))]), as: UTF8.self)
        }
    }

    package func entryHeaders(_ i: Int) -> [(name: String, value: String)] {
        bytes.withUnsafeBytes { raw in
            let r = entriesOffset + i * IndexLayout.entryRecordSize
            let start = stringsOffset + Int(raw.u32(r + 8))
            let end = start + Int(raw.u32(r + 12))
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
                    headers.append(
                        (
                            String(decoding: UnsafeRawBufferPointer(rebasing: raw[line..<colon]), as: UTF8.self),
                            String(decoding: UnsafeRawBufferPointer(rebasing: raw[value..<lineEnd]), as: UTF8.self)
                        ))
                }
                line = lineEnd + 1
            }
            return headers
        }
    }

    package func entryFields(_ i: Int) -> (status: UInt16, kind: EntryKind, flags: UInt8, body: Int?) {
        bytes.withUnsafeBytes { raw in
            let r = entriesOffset + i * IndexLayout.entryRecordSize
            let body = raw.u32(r + 16)
            return (raw.u16(r + 20), EntryKind(rawValue: raw[r + 22]) ?? .recorded, raw[r + 23], body == IndexLayout.noBody ? nil : Int(body))
        }
    }

    /// The entry whose canonical key is `key`, by the index's hash table.
    package func find(canonicalKey key: UnsafeRawBufferPointer) -> Int? {
        let h = IndexLayout.hash(key)
        let tag = UInt32(truncatingIfNeeded: h >> 32)
        let mask = slotCount - 1
        return bytes.withUnsafeBytes { raw -> Int? in
            var slot = Int(truncatingIfNeeded: h) & mask
            for _ in 0..<slotCount {
                let s = slotsOffset + slot * IndexLayout.slotSize
                let entryPlusOne = raw.u32(s + 4)
                if entryPlusOne == 0 { return nil }
                let i = Int(entryPlusOne) - 1
                if raw.u32(s) == tag, i < entryCount {
                    let r = entriesOffset + i * IndexLayout.entryRecordSize
                    let o = stringsOffset + Int(raw.u32(r))
                    let n = Int(raw.u32(r + 4))
                    if n == key.count, memcmp(raw.baseAddress! + o, key.baseAddress!, n) == 0 { return i }
                }
                slot = (slot + 1) & mask
            }
            return nil
        }
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
