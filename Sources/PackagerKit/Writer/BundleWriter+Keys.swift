import OfflineBundle

/// The writer's two orders over the entries, each kept in bounded memory (``ExternalSorter``): the keys in key order,
/// and the distinct bodies in digest order with each key's body position.
extension BundleWriter {
    /// The entries' canonical keys in key order, each record the entry's index (32 bits) and the key's bytes: sorted
    /// in memory up to 2 MiB of them, in runs in the scratch folder past it (``ExternalSorter``), so that the writer's
    /// memory does not grow with the entries (an array of them held about 75 bytes an entry).
    struct KeyTable {
        let sorter: ExternalSorter
        /// Whether a key needs queries read as forms to be found (header flag bit 1).
        var formQuery = false

        var count: Int { sorter.count }

        /// Calls `body` with each key's position in key order, its entry's index and the key's bytes.
        func forEachKey(_ body: (_ position: Int, _ entry: Int, _ key: UnsafeRawBufferPointer) throws -> Void) throws {
            let records = try sorter.sorted()
            var position = 0
            while try records.next({ record in
                try body(position, Int(record.loadUnaligned(as: UInt32.self).littleEndian), UnsafeRawBufferPointer(rebasing: record[4...]))
            }) != nil {
                position += 1
            }
        }
    }

    /// The entries' canonical keys, in key order, each checked: an http(s) key, a final status, no body where HTTP allows
    /// none, no key answered twice.
    func keyedEntries(scratch: String?, memoryLimit: Int) throws -> KeyTable {
        // Queries are read as forms; the bundle says so (header flag bit 1) only where a key needs it.
        let canonicalizer = RequestKeyCanonicalizer(rules: options.rules, formQuery: options.readsQueriesAsForms)
        var table = KeyTable(
            sorter: ExternalSorter(folder: scratch, memoryLimit: memoryLimit) { a, b in
                UnsafeRawBufferPointer(rebasing: a[4...]).lexicographicallyPrecedes(UnsafeRawBufferPointer(rebasing: b[4...]))
            })
        var record = [UInt8]()
        for index in 0..<entryCount where !superseded.contains(index) {
            let entry = try entry(at: index)
            guard let url = canonicalizer.canonicalize(entry.url), isWellFormedKey(url) else {
                throw PackagerError(.invalidInput, "\(entry.url) is not an absolute http or https URL with a host", subject: entry.url)
            }
            let key = url + (entry.carriedKeySuffix ?? entry.request?.qualifiers(rules: options.rules, canonicalKey: url).keySuffix ?? "")
            if options.readsQueriesAsForms, !table.formQuery, canonicalizer.needsFormQuery(url) { table.formQuery = true }
            guard (200...599).contains(entry.status) else {
                throw PackagerError(.invalidInput, "status \(entry.status) is not a final HTTP status (200...599)", subject: key)
            }
            if entry.body != nil || entry.prepared != nil, entry.status == 204 || entry.status == 304 {
                throw PackagerError(.invalidInput, "an entry with status \(entry.status) cannot have a body (RFC 9110 §6.4.1)", subject: key)
            }
            guard index <= Int(UInt32.max) else { throw PackagerError(.invalidInput, "more than 4,294,967,295 entries", subject: key) }
            record.removeAll(keepingCapacity: true)
            withUnsafeBytes(of: UInt32(index).littleEndian) { record.append(contentsOf: $0) }
            record.append(contentsOf: key.utf8)
            try table.sorter.append(record)
        }
        var last: (key: [UInt8], entry: Int)?
        try table.forEachKey { _, entry, key in
            if let last, key.elementsEqual(last.key) {
                let shown = String(decoding: key, as: UTF8.self)
                throw PackagerError(
                    .duplicate,
                    "two entries answer the same request key \(shown) (from \(try self.entry(at: min(last.entry, entry)).url) and \(try self.entry(at: max(last.entry, entry)).url))",
                    subject: shown)
            }
            if last == nil { last = ([], 0) }
            last!.key.removeAll(keepingCapacity: true)
            last!.key.append(contentsOf: key)
            last!.entry = entry
        }
        return table
    }

    /// The distinct bodies, in digest order, each as the entry that has it first in key order (identical bytes under
    /// two media types are stored once, one way), and for each key the position of its body in that order. Sorted by
    /// digest, and then by key, in bounded memory (``ExternalSorter``); the bodies' entries in a ``ScratchArray``.
    struct DistinctBodies {
        /// For each distinct body, the entry whose prepared body it is.
        let entries: ScratchArray<Int32>
        /// For each key with a body, in key order: the key's position (32 bits, big-endian) and its body's position
        /// among the distinct ones (32 bits).
        let positions: ExternalSorter
        /// How many entries have a body that is the same as one stored for another.
        private(set) var duplicates = 0

        var count: Int { entries.count }

        /// Takes what `prepared` holds of the keys' bodies; the prepared bodies of duplicates are let go.
        init(_ prepared: PreparedBodies, keys: KeyTable, scratch: String?, memoryLimit: Int) throws {
            entries = ScratchArray(folder: scratch, memoryLimit: memoryLimit / 2, pageBytes: 16 << 10)
            // Records of the digest (32 bytes), the key's position (big-endian) and the entry: their bytes' order is the
            // digest's, then the key's.
            let byDigest = ExternalSorter(folder: scratch, memoryLimit: memoryLimit) { a, b in a.lexicographicallyPrecedes(b) }
            positions = ExternalSorter(folder: scratch, memoryLimit: memoryLimit / 2) { a, b in
                a.loadUnaligned(as: UInt32.self).bigEndian < b.loadUnaligned(as: UInt32.self).bigEndian
            }
            var record = [UInt8]()
            try keys.forEachKey { position, entry, _ in
                guard let digest = try prepared.digest(at: entry) else { return }
                record.removeAll(keepingCapacity: true)
                record.append(contentsOf: digest.bytes)
                withUnsafeBytes(of: UInt32(position).bigEndian) { record.append(contentsOf: $0) }
                withUnsafeBytes(of: UInt32(entry).littleEndian) { record.append(contentsOf: $0) }
                try byDigest.append(record)
            }
            let sorted = try byDigest.sorted()
            var last = [UInt8]()
            var pair = [UInt8](repeating: 0, count: 8)
            while let (position, entry, new) = try sorted.next({ record -> (UInt32, Int, Bool) in
                let new = !record[0..<32].elementsEqual(last)
                if new {
                    last.removeAll(keepingCapacity: true)
                    last.append(contentsOf: record[0..<32])
                }
                return (
                    record.loadUnaligned(fromByteOffset: 32, as: UInt32.self), Int(record.loadUnaligned(fromByteOffset: 36, as: UInt32.self).littleEndian), new
                )
            }) {
                if new {
                    try entries.append(Int32(entry))
                } else {
                    // The same bytes prepared for another entry: not written, and not needed.
                    try prepared.setWritten(entry)
                    duplicates += 1
                }
                pair.withUnsafeMutableBytes {
                    $0.storeBytes(of: position, as: UInt32.self)
                    $0.storeBytes(of: UInt32(entries.count - 1).littleEndian, toByteOffset: 4, as: UInt32.self)
                }
                try positions.append(pair)
            }
        }
    }
}
