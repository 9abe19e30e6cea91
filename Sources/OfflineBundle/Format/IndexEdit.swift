import Foundation

/// A delta's `index.edit` (docs/FORMAT.md §12.3): the target's `index.bin` as what it keeps of its base's bodies and
/// entries, and what it adds. The index is made again from that, as a writer makes one, with the bodies laid out as
/// the writer lays them out; its SHA-256 must then be the target's digest. An edit costs what changed, where a byte
/// patch of the index pays for every offset and reference that moved.
///
/// ```
/// "PKGIDXE1"
/// varint B, then until B bodies:   0 varint skip varint take          (the base's next bodies: skip some, take some)
///                                  1 sha256(32) varint stored varint size u32 crc u32 storedCRC u8 compression
/// varint E, then until E entries:  0 varint skip varint keep          (the base's next entries, as they are)
///                                  1 key status kind flags headers body fetchedAt originDate
/// manifest sha256(32)  createdAt  u8 header flags  rules (JSON)
/// ```
package enum IndexEdit {
    package static let magic = Array("PKGIDXE1".utf8)

    // MARK: Making

    /// The edit that turns `base`'s index into `target`'s.
    package static func make(base: BundleIndex, target: BundleIndex) throws -> [UInt8] {
        var out = Writer(bytes: magic)
        // Bodies, in digest order: a run of the base's (skipped, then taken), or a new record.
        out.varint(UInt64(target.bodyCount))
        var j = 0
        // A run of the base's records: so many skipped, then so many taken (op 0); written once a new record or the
        // next skip breaks it.
        func flush(_ run: inout (skip: Int, take: Int)) {
            guard run.take > 0 || run.skip > 0 else { return }
            out.byte(0)
            out.varint(UInt64(run.skip))
            out.varint(UInt64(run.take))
            run = (0, 0)
        }
        var pending = (skip: 0, take: 0)
        for i in 0..<target.bodyCount {
            let record = target.body(at: i)
            var skipped = 0
            while j < base.bodyCount, base.body(at: j).sha256.lexicographicallyPrecedes(record.sha256) {
                j += 1
                skipped += 1
            }
            if pending.take > 0 && skipped > 0 { flush(&pending) }
            pending.skip += skipped
            if j < base.bodyCount, base.body(at: j).isStoredAlike(record) {
                pending.take += 1
                j += 1
                continue
            }
            flush(&pending)
            out.byte(1)
            out.bytes(record.sha256)
            out.varint(record.storedSize)
            out.varint(record.size)
            out.u32(record.crc32)
            out.u32(record.storedCRC32)
            out.byte(UInt8(record.compression.rawValue))
        }
        if pending.take > 0 { flush(&pending) }
        // Entries, in key order: a run of the base's kept as they are, or a new entry.
        out.varint(UInt64(target.entryCount))
        var k = 0
        var entries = (skip: 0, take: 0)
        for i in 0..<target.entryCount {
            let key = target.entryKey(i)
            var skipped = 0
            while k < base.entryCount, base.entryKey(k).utf8.lexicographicallyPrecedes(key.utf8) {
                k += 1
                skipped += 1
            }
            if entries.take > 0 && skipped > 0 { flush(&entries) }
            entries.skip += skipped
            if k < base.entryCount, base.entryKey(k) == key, sameEntry(base, k, target, i) {
                entries.take += 1
                k += 1
                continue
            }
            flush(&entries)
            let fields = target.entryFields(i)
            out.byte(1)
            out.string(key)
            out.varint(UInt64(fields.status))
            out.byte(fields.kind.rawValue)
            out.byte(fields.flags)
            let headers = target.entryHeaders(i)
            out.varint(UInt64(headers.count))
            for (name, value) in headers {
                out.string(name)
                out.string(value)
            }
            out.varint(fields.body.map { UInt64($0) + 1 } ?? 0)
            out.time(fields.fetchedAt)
            out.time(fields.originDate)
        }
        if entries.take > 0 { flush(&entries) }
        out.bytes(target.manifestSHA256)
        out.time(target.createdAt)
        out.byte((target.hasRequestQualifiers ? 1 : 0) | (target.readsQueriesAsForms ? 2 : 0))
        // Sorted keys: the same rules give the same bytes, so deltas are reproducible.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        out.bytes(Array(try encoder.encode(target.rules)))
        return out.bytes
    }

    private static func sameEntry(_ base: BundleIndex, _ k: Int, _ target: BundleIndex, _ i: Int) -> Bool {
        let a = base.entryFields(k)
        let b = target.entryFields(i)
        guard a.status == b.status, a.kind == b.kind, a.flags == b.flags, a.fetchedAt == b.fetchedAt, a.originDate == b.originDate else { return false }
        switch (a.body, b.body) {
        case (nil, nil): break
        case (let x?, let y?): guard base.body(at: x).sha256 == target.body(at: y).sha256 else { return false }
        default: return false
        }
        return base.entryHeaders(k).elementsEqual(target.entryHeaders(i)) { $0.name == $1.name && $0.value == $1.value }
    }

    // MARK: Applying

    /// The target's `index.bin` bytes, made from `base` and `edit` as a writer makes an index of format `version`
    /// (the caller checks their digest).
    ///
    /// - Throws: ``BundleError`` with code `.corruptIndex` when the edit is damaged or refers past the base.
    package static func apply(_ edit: [UInt8], to base: BundleIndex, version: UInt32 = BundleFormat.version) throws -> [UInt8] {
        var reader = Reader(bytes: edit)
        guard try reader.take(magic.count) == magic else { throw Reader.fail("no PKGIDXE1 header") }
        // Counts are bounded by what the base and the edit's own bytes can make (a new body takes 44 bytes or more, a new
        // entry 9), so a short edit cannot make the reader allocate for millions.
        let bodyCount = try reader.count(limit: base.bodyCount + edit.count / 44)
        var bodies: [IndexBodyRecord] = []
        // Which target body each base body became, for the entries kept.
        var fromBase = [Int](repeating: -1, count: base.bodyCount)
        var j = 0
        while bodies.count < bodyCount {
            switch try reader.byte() {
            case 0:
                let skip = try reader.count(limit: base.bodyCount)
                let take = try reader.count(limit: base.bodyCount)
                guard take > 0 || skip > 0, j + skip + take <= base.bodyCount, bodies.count + take <= bodyCount else {
                    throw Reader.fail("a run of bodies runs past the base or the target")
                }
                j += skip
                for _ in 0..<take {
                    fromBase[j] = bodies.count
                    bodies.append(base.body(at: j))
                    j += 1
                }
            case 1:
                let sha256 = try reader.take(32)
                let stored = try reader.varint()
                let size = try reader.varint()
                let crc = try reader.u32()
                let storedCRC = try reader.u32()
                guard let compression = BodyCompression(rawValue: UInt16(try reader.byte())) else { throw Reader.fail("a body's compression is unknown") }
                bodies.append(
                    IndexBodyRecord(
                        sha256: sha256, localHeaderOffset: 0, dataOffset: 0, storedSize: stored, size: size, crc32: crc, storedCRC32: storedCRC,
                        compression: compression))
            default:
                throw Reader.fail("an unknown body operation")
            }
        }
        // Laid out as the writer lays bodies out: one after the other from the file's start, each after its local header
        // (30 bytes, the name, and a ZIP64 extra of 20 bytes when a size needs one).
        let digits = IndexLayout.bodyNameDigits(bodies.map(\.sha256))
        var offset: UInt64 = 0
        for i in bodies.indices {
            let zip64 = bodies[i].storedSize >= 0xFFFF_FFFF || bodies[i].size >= 0xFFFF_FFFF
            let header = UInt64(ZipConstants.localHeaderSize + 2 + digits[i] + (zip64 ? 20 : 0))
            bodies[i].localHeaderOffset = offset
            bodies[i].dataOffset = offset + header
            let (end, overflow) = bodies[i].dataOffset.addingReportingOverflow(bodies[i].storedSize)
            guard !overflow else { throw Reader.fail("bodies larger than a file can be") }
            offset = end
        }
        let entryCount = try reader.count(limit: base.entryCount + edit.count / 9)
        // The entries are read first, the accumulator made after: the target's counts are known by then.
        var accumulator = try IndexAccumulator(entryCount: entryCount, bodyCount: bodyCount)
        accumulator.version = version
        for body in bodies { try accumulator.addBody(body) }
        var added = 0
        var k = 0
        while added < entryCount {
            switch try reader.byte() {
            case 0:
                let skip = try reader.count(limit: base.entryCount)
                let keep = try reader.count(limit: base.entryCount)
                guard keep > 0 || skip > 0, k + skip + keep <= base.entryCount, added + keep <= entryCount else {
                    throw Reader.fail("a run of entries runs past the base or the target")
                }
                k += skip
                for _ in 0..<keep {
                    let fields = base.entryFields(k)
                    var body: Int?
                    if let b = fields.body {
                        guard fromBase[b] >= 0 else { throw Reader.fail("an entry kept refers to a body the target dropped") }
                        body = fromBase[b]
                    }
                    try accumulator.add(
                        key: base.entryKey(k), status: fields.status, kind: fields.kind, flags: fields.flags, headers: base.entryHeaders(k), body: body,
                        fetchedAt: fields.fetchedAt, originDate: fields.originDate)
                    k += 1
                    added += 1
                }
            case 1:
                let key = try reader.string()
                let status = try reader.varint()
                guard status <= UInt64(UInt16.max), let kind = EntryKind(rawValue: try reader.byte()) else { throw Reader.fail("an entry's status or kind") }
                let flags = try reader.byte()
                let headerCount = try reader.count(limit: 1 << 16)
                var headers: [(name: String, value: String)] = []
                for _ in 0..<headerCount { headers.append((try reader.string(), try reader.string())) }
                let body = try reader.varint()
                guard body <= UInt64(bodyCount) else { throw Reader.fail("an entry refers past the bodies") }
                try accumulator.add(
                    key: key, status: UInt16(status), kind: kind, flags: flags, headers: headers, body: body == 0 ? nil : Int(body - 1),
                    fetchedAt: try reader.time(), originDate: try reader.time())
                added += 1
            default:
                throw Reader.fail("an unknown entry operation")
            }
        }
        let manifest = try reader.take(32)
        let createdAt = try reader.time()
        let flags = try reader.byte()
        accumulator.formQuery = flags & 2 != 0
        let rules: BundleRules
        do {
            rules = try JSONDecoder().decode(BundleRules.self, from: Data(reader.rest()))
        } catch {
            throw Reader.fail("its rules are not JSON")
        }
        return try accumulator.finish(manifestSHA256: manifest, rules: rules, createdAt: createdAt).joinedBytes()
    }

    // MARK: Encoding

    private struct Writer {
        var bytes: [UInt8]
        mutating func byte(_ value: UInt8) { bytes.append(value) }
        mutating func bytes(_ values: [UInt8]) { bytes.append(contentsOf: values) }
        mutating func u32(_ value: UInt32) { bytes.appendLE(value) }
        mutating func varint(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                bytes.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }
        mutating func string(_ text: String) {
            varint(UInt64(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
        }
        /// A time as zigzag varint + 1, 0 for none.
        mutating func time(_ value: Int64?) {
            guard let value else { return varint(0) }
            varint(UInt64(bitPattern: (value << 1) ^ (value >> 63)) &+ 1)
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var position = 0

        static func fail(_ reason: String) -> BundleError { BundleError(.corruptIndex, "the delta's index.edit is damaged: \(reason)") }

        mutating func byte() throws -> UInt8 {
            guard position < bytes.count else { throw Self.fail("it ends too soon") }
            position += 1
            return bytes[position - 1]
        }
        mutating func take(_ count: Int) throws -> [UInt8] {
            guard count >= 0, count <= bytes.count - position else { throw Self.fail("it ends too soon") }
            position += count
            return Array(bytes[(position - count)..<position])
        }
        mutating func rest() -> [UInt8] {
            defer { position = bytes.count }
            return Array(bytes[position...])
        }
        mutating func u32() throws -> UInt32 {
            let b = try take(4)
            return UInt32(b[0]) | UInt32(b[1]) << 8 | UInt32(b[2]) << 16 | UInt32(b[3]) << 24
        }
        mutating func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard shift < 64 else { throw Self.fail("a number is too long") }
                let b = try byte()
                value |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return value }
                shift += 7
            }
        }
        mutating func count(limit: Int) throws -> Int {
            let value = try varint()
            guard value <= UInt64(limit) else { throw Self.fail("a count of \(value) is over \(limit)") }
            return Int(value)
        }
        mutating func string() throws -> String {
            let length = try count(limit: bytes.count - position)
            return String(decoding: try take(length), as: UTF8.self)
        }
        mutating func time() throws -> Int64? {
            let v = try varint()
            guard v > 0 else { return nil }
            let z = v - 1
            return Int64(bitPattern: z >> 1) ^ -Int64(bitPattern: z & 1)
        }
    }
}
