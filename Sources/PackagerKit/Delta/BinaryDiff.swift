import OfflineBundle

/// Makes byte patches (``OfflineBundle/BinaryPatch``, docs/FORMAT.md §12.3): the target as copies of the source's
/// ranges and added bytes. Matches are found through a table of the source's 16-byte windows, and the copy that
/// continues the last one (the same shift) is tried first, so records whose offsets moved by the same amount cost a few
/// added bytes each.
package enum BinaryDiff {
    private static let window = 16

    package static func make(source: [UInt8], target: [UInt8]) -> [UInt8] {
        var out = BinaryPatch.magic
        func varint(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                out.append(UInt8(v & 0x7F) | 0x80)
                v >>= 7
            }
            out.append(UInt8(v))
        }
        varint(UInt64(source.count))
        varint(UInt64(target.count))
        var table: [UInt64: Int] = [:]
        if source.count >= window {
            table.reserveCapacity(source.count)
            for p in stride(from: source.count - window, through: 0, by: -1) { table[hash(source, p)] = p }
        }
        var copiedEnd = 0
        var added = 0  // where the bytes not yet emitted start
        var t = 0
        var shift: Int?  // source − target offset of the last copy
        func flushAdd(upTo end: Int) {
            guard end > added else { return }
            out.append(1)
            varint(UInt64(end - added))
            out.append(contentsOf: target[added..<end])
        }
        while t < target.count {
            var match: (start: Int, length: Int)?
            // The copy that continues the last one's shift, when 8 bytes agree.
            if let shift, t + shift >= 0, t + shift + 8 <= source.count, t + 8 <= target.count,
                source[(t + shift)..<(t + shift + 8)].elementsEqual(target[t..<(t + 8)])
            {
                match = (t + shift, 0)
            } else if t + window <= target.count, let found = table[hash(target, t)],
                source[Int(found)..<(Int(found) + window)].elementsEqual(target[t..<(t + window)])
            {
                match = (Int(found), 0)
            }
            guard let match else {
                t += 1
                continue
            }
            let start = match.start
            var length = match.length
            while start + length < source.count, t + length < target.count, source[start + length] == target[t + length] { length += 1 }
            // Back into the bytes not yet emitted, while they agree.
            var back = 0
            while t - back > added, start - back > 0, source[start - back - 1] == target[t - back - 1] { back += 1 }
            let from = t - back
            flushAdd(upTo: from)
            out.append(0)
            let delta = Int64(start - back) - Int64(copiedEnd)
            varint(UInt64(bitPattern: (delta << 1) ^ (delta >> 63)))
            varint(UInt64(length + back))
            copiedEnd = start + length
            shift = start - t
            t += length
            added = t
        }
        flushAdd(upTo: target.count)
        return out
    }

    @inline(__always)
    private static func hash(_ bytes: [UInt8], _ p: Int) -> UInt64 {
        bytes.withUnsafeBytes { raw in
            let a = raw.loadUnaligned(fromByteOffset: p, as: UInt64.self)
            let b = raw.loadUnaligned(fromByteOffset: p + 8, as: UInt64.self)
            return (a &* 0x9E37_79B9_7F4A_7C15) ^ (b &* 0xC2B2_AE3D_27D4_EB4F).rotatedLeft(31)
        }
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ n: UInt64) -> UInt64 { (self << n) | (self >> (64 - n)) }
}
