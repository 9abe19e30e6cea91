import Crypto

/// Sixteen bytes of a SHA-256: how an import names a request key or a payload, and the index writer a header block,
/// in the tables they keep one entry in per exchange (``DigestTable``).
package struct TableKey: Hashable, Sendable, BitwiseCopyable {
    package var high: UInt64
    package var low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The first 16 bytes of the SHA-256 of `bytes`.
    package init(sha256Of bytes: some Collection<UInt8>) {
        var hasher = SHA256()
        if let done = bytes.withContiguousStorageIfAvailable({ hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }) {
            _ = done
        } else {
            hasher.update(data: Array(bytes))
        }
        self.init(digest: hasher.finalize())
    }

    private init(digest: SHA256.Digest) {
        (high, low) = digest.withUnsafeBytes { raw in
            (UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)), UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }
}

/// A table from ``TableKey``s to 64-bit values, for the tables an import or a writer keeps one entry in per exchange:
/// open addressing in one array of slots, filled to 7/8 before it doubles. A `Dictionary` fills to 3/4: for 200,000
/// names of 16 bytes and a 4-byte value it needs 524,288 buckets (10.5 MB of keys and values) and held half as many
/// again while it doubled, at the peak of a 100,000-record WARC import; this needs 262,144 slots (6.3 MB).
///
/// With a scratch folder, a table that would pass `memoryLimit` bytes keeps its slots in a file there
/// (``ScratchArray``), each read and written on its own, and holds one byte a slot in memory: 0 for an empty slot,
/// else a byte of the key. A name looked up and not there (most of them: a request key is new, a payload is
/// remembered once) costs no read, a name added one write of its slot, so an archive of any size is read in about the
/// same memory (a byte and a bit a name), for a system call or two a name.
package struct DigestTable {
    package typealias Key = TableKey

    /// A slot: an empty one holds the all-zero key, whose own value (a digest of zeros) is kept apart.
    private struct Slot {
        var key: Key
        var value: UInt64
    }

    private var slots: ScratchArray<Slot>
    /// Once the slots are in a file: each slot's byte (0: empty).
    private var tags: [UInt8] = []
    private var zeroKeyValue: UInt64?
    private let folder: String?
    private let memoryLimit: Int
    package private(set) var count = 0

    private static var empty: Key { Key(high: 0, low: 0) }

    /// An empty table, its slots in a file in `folder` past `memoryLimit` bytes (nil: in memory whatever their size).
    package init(folder: String? = nil, memoryLimit: Int = 4 << 20) {
        self.folder = folder
        self.memoryLimit = memoryLimit
        // 1,024 slots of zeros in memory: making them cannot fail.
        slots = try! ScratchArray(zeros: 1024, folder: nil, memoryLimit: .max)
    }

    /// Whether the slots went to a file.
    package var spilled: Bool { slots.spilled }

    /// The byte a key's slot holds in ``tags``: from the half of the digest that does not choose the slot, never 0.
    private static func tag(_ key: Key) -> UInt8 { UInt8(truncatingIfNeeded: key.high >> 56) | 1 }

    /// The value for `key`, or nil.
    package func value(for key: Key) throws -> UInt64? {
        if key == Self.empty { return zeroKeyValue }
        let (index, found) = try Self.find(key, in: slots, tags: tags)
        return found ? try slots.value(at: index).value : nil
    }

    /// Sets the value for `key`, adding it or replacing its value (no name is ever removed).
    package mutating func set(_ value: UInt64, for key: Key) throws {
        if key == Self.empty {
            if zeroKeyValue == nil { count += 1 }
            zeroKeyValue = value
            return
        }
        if (count + 1) * 8 > slots.count * 7 { try grow() }
        if try Self.place(Slot(key: key, value: value), in: slots, tags: &tags) { count += 1 }
    }

    /// The slot that holds `key`, or the empty one where it would go (`found` false).
    private static func find(_ key: Key, in slots: ScratchArray<Slot>, tags: [UInt8]) throws -> (index: Int, found: Bool) {
        let mask = slots.count - 1
        var index = Int(truncatingIfNeeded: key.low) & mask
        if tags.isEmpty {
            while case let held = try slots.value(at: index).key, held != empty {
                if held == key { return (index, true) }
                index = (index + 1) & mask
            }
            return (index, false)
        }
        let tag = tag(key)
        while tags[index] != 0 {
            if tags[index] == tag, try slots.value(at: index).key == key { return (index, true) }
            index = (index + 1) & mask
        }
        return (index, false)
    }

    /// Puts `slot` in its place among `slots`; whether its key is new.
    private static func place(_ slot: Slot, in slots: ScratchArray<Slot>, tags: inout [UInt8]) throws -> Bool {
        let (index, found) = try find(slot.key, in: slots, tags: tags)
        if !tags.isEmpty { tags[index] = tag(slot.key) }
        try slots.set(slot, at: index)
        return !found
    }

    /// Twice the slots, every key placed again: in a file once they would pass the memory limit.
    private mutating func grow() throws {
        let old = slots
        let oldTags = tags
        let count = old.count * 2
        if let folder, count * MemoryLayout<Slot>.stride > memoryLimit {
            slots = try ScratchArray(zeros: count, folder: folder, memoryLimit: 0, pageBytes: 0)
            tags = [UInt8](repeating: 0, count: count)
        } else {
            slots = try ScratchArray(zeros: count, folder: nil, memoryLimit: .max)
        }
        // The old slots read a run at a time (from the file, once they are in one).
        let run = 4096
        for start in stride(from: 0, to: old.count, by: run) {
            let end = min(old.count, start + run)
            for (offset, slot) in try old.values(in: start..<end).enumerated() {
                let occupied = oldTags.isEmpty ? slot.key != Self.empty : oldTags[start + offset] != 0
                if occupied { _ = try Self.place(slot, in: slots, tags: &tags) }
            }
        }
    }
}
