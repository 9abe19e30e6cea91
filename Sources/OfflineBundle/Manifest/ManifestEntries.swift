import Foundation

extension MountedBundle {
    /// The entries of `manifest.json` one at a time, in the manifest's order (the writer's is key order), so that a tool
    /// that goes through a large bundle (an export) holds one entry's description, not the whole manifest decoded (a
    /// manifest of 100,000 entries took 290 MB as one ``Manifest``).
    ///
    /// The manifest is checked against the SHA-256 `index.bin` records for it before any entry is given (a deflated
    /// one is inflated twice: once into the digest alone, then into entries).
    ///
    /// - Throws: ``BundleError`` with code `.corruptIndex` when the bundle has no manifest, it does not match the
    ///   index's digest of it, or an entry cannot be decoded.
    /// - Parameter checkingDigest: false for a tool that compares a manifest whose digest differs anyway (`check`,
    ///   to name what differs); it must say that the digest differs itself (``deflatedManifestMatchesDigest(_:limit:)``).
    package func manifestEntries(checkingDigest: Bool = true) throws -> ManifestEntries {
        // A delta's manifest is rebuilt whole from its base's and its patch: it is decoded whole.
        if manifestPatch != nil || base != nil { return ManifestEntries(whole: try manifest()) }
        guard let entry = metadata[BundleFormat.manifestEntryName] else {
            throw BundleError(.corruptIndex, "the bundle has no manifest.json", entry: BundleFormat.manifestEntryName)
        }
        guard entry.method == 8 else { return ManifestEntries(whole: try manifest()) }
        // Checked first, inflated into SHA-256 alone (``manifestBytes()`` does the same before it inflates).
        let limit = manifestLimitForEntries
        if checkingDigest {
            try checkDeflatedManifestDigest(entry, limit: limit)
        } else {
            guard entry.uncompressedSize <= limit, entry.compressedSize <= limit else {
                throw BundleError(
                    .hostile, "\(entry.name) claims \(entry.uncompressedSize) bytes, over the limit of \(limit) for \(entryCount) entries", entry: entry.name)
            }
        }
        let dataOffset = try Self.metadataDataOffset(entry, in: file, bodyArea: directory.centralDirectoryOffset)
        return ManifestEntries(
            stream: try InflateStream(entry: entry.name), file: file, dataOffset: dataOffset, compressedSize: entry.compressedSize,
            size: entry.uncompressedSize)
    }
}

/// The entries of a bundle's `manifest.json`, decoded one at a time as the manifest is inflated
/// (``MountedBundle/manifestEntries()``): a scan of the JSON finds the top-level `entries` array and each of its
/// elements, which is decoded on its own.
package final class ManifestEntries {
    private let whole: [ManifestEntry]?
    /// A manifest decoded whole: its fields but the entries.
    private var wholeManifest: Manifest?
    private var wholeNext = 0
    private let stream: InflateStream?
    private let file: BundleFile?
    private let dataOffset: UInt64
    private let compressedSize: UInt64
    private let size: UInt64
    private var fed: UInt64 = 0
    /// Inflated bytes not scanned yet.
    private var pending: [UInt8] = []
    private var position = 0
    private var scanner = Scanner()
    private let decoder = JSONDecoder()

    /// An element of `entries` may be no longer than this: an entry's headers are bounded (128 KiB a block) and its
    /// request body (64 KiB), so a larger one is hostile.
    static let elementLimit = 16 << 20

    /// The whole manifest's fields but its entries (format, version, generator, rules, totals), once ``next()`` has
    /// given nil.
    package func remainder() throws -> Manifest {
        if let manifest = wholeManifest { return manifest }
        guard scanner.finished else { throw BundleError(.invalidArgument, "the manifest's entries are not all read") }
        do {
            return try decoder.decode(Manifest.self, from: Data(scanner.rest))
        } catch {
            throw BundleError(.corruptIndex, "manifest.json cannot be decoded: \(error)", entry: BundleFormat.manifestEntryName)
        }
    }

    fileprivate init(whole manifest: Manifest) {
        whole = manifest.entries
        var rest = manifest
        rest.entries = []
        wholeManifest = rest
        (stream, file, dataOffset, compressedSize, size) = (nil, nil, 0, 0, 0)
    }

    fileprivate init(stream: InflateStream, file: BundleFile, dataOffset: UInt64, compressedSize: UInt64, size: UInt64) {
        whole = nil
        (self.stream, self.file, self.dataOffset, self.compressedSize, self.size) = (stream, file, dataOffset, compressedSize, size)
    }

    /// The next entry, or nil after the last.
    package func next() throws -> ManifestEntry? {
        if let whole {
            guard wholeNext < whole.count else { return nil }
            defer { wholeNext += 1 }
            return whole[wholeNext]
        }
        guard let element = try nextElement() else { return nil }
        return try decode(ManifestEntry.self, element)
    }

    /// What was sent for `key`: its entry's `request`, nil when it has none or the manifest has no entry for the key
    /// (``seek(_:)``: keys in increasing order). What the exports read of the manifest: decoding every entry whole
    /// was two fifths of a WARC export's reading thread.
    package func request(forKey key: String) throws -> ManifestRequest? { try seek(key)?.request }

    /// The entry for `key`, nil when the manifest has none (``seek(_:)``: keys in increasing order), decoded whole.
    /// What a refresh reads of the entries it carries over and fetches again, without the manifest decoded whole.
    package func entry(forKey key: String) throws -> ManifestEntry? {
        guard let found = try seek(key) else { return nil }
        return try found.entry ?? decode(ManifestEntry.self, found.element)
    }

    /// An element as ``seek(_:)`` reads it: its key, its request when its bytes may hold one (`"request"`, or a `\u`
    /// escape, which could spell a key), its bytes for a whole decode later, and, from a manifest decoded whole, the
    /// entry itself.
    private struct Keyed {
        var key: String
        var request: ManifestRequest?
        var element: [UInt8]
        var entry: ManifestEntry?
    }

    /// Where ``seek(_:)`` stands, whether it started, and the last key asked for.
    private var keyed: Keyed?
    private var keyedStarted = false
    private var lastAsked: String?

    /// The element for `key`, or nil. Keys must be asked for in increasing order of their UTF-8 bytes, the order of the
    /// index and of the manifest the writer writes: the entries before `key` are passed over, having had only their key
    /// (and request) decoded, and a key asked after a greater one is refused rather than answered nil.
    private func seek(_ key: String) throws -> Keyed? {
        if let lastAsked, key.utf8.lexicographicallyPrecedes(lastAsked.utf8) {
            throw BundleError(.invalidArgument, "manifest entries asked out of key order: \(key) after \(lastAsked)")
        }
        lastAsked = key
        if !keyedStarted {
            keyedStarted = true
            keyed = try nextKeyed()
        }
        while let current = keyed, current.key.utf8.lexicographicallyPrecedes(key.utf8) { keyed = try nextKeyed() }
        return keyed?.key == key ? keyed : nil
    }

    /// An element's key alone, and with its request: the fields the exports read (their values are decoded as a
    /// whole entry's are, the others not made into values at all).
    private struct KeyOnly: Decodable { var key: String }
    private struct KeyAndRequest: Decodable {
        var key: String
        var request: ManifestRequest?
    }

    private static let requestMark = Array("\"request\"".utf8)
    private static let unicodeEscape = Array("\\u".utf8)
    private static let volatileMark = Array("\"volatile\"".utf8)

    private func nextKeyed() throws -> Keyed? {
        if whole != nil { return try next().map { Keyed(key: $0.key, request: $0.request, element: [], entry: $0) } }
        guard let element = try nextElement() else { return nil }
        if element.containsBytes(Self.requestMark) || element.containsBytes(Self.unicodeEscape) {
            let found = try decode(KeyAndRequest.self, element)
            return Keyed(key: found.key, request: found.request, element: element)
        }
        return Keyed(key: try decode(KeyOnly.self, element).key, element: element)
    }

    /// An element of `entries` decoded as `type`; one that does not decode is a damaged index.
    private func decode<T: Decodable>(_ type: T.Type, _ element: [UInt8]) throws -> T {
        do {
            return try decoder.decode(type, from: Data(element))
        } catch {
            throw BundleError(.corruptIndex, "an entry of manifest.json cannot be decoded: \(error)", entry: BundleFormat.manifestEntryName)
        }
    }

    /// What an entry says beyond its index record that verify sends and compares: its declared request, and the
    /// fields of its JSON body that change on every answer with the digest of the body without them.
    package struct Declaring: Decodable, Sendable {
        package var key: String
        package var request: ManifestRequest?
        package var volatile: [String]?
        package var stableSha256: String?
    }

    /// The next entry that may say more than the index does, a declared request or volatile fields (its bytes hold
    /// `"request"` or `"volatile"`, or a `\u` escape), with only those fields decoded; the others are passed over
    /// without being decoded. Nil after the last. What verify reads of a manifest: the entries it needs, not a whole
    /// decoded manifest (a dictionary of every entry of a 100,000-entry bundle took 228 MB), and of those not their
    /// response's fields, which the index holds (decoding them was two fifths of a verify of 1,000,000 imported
    /// entries, whose every request is recorded).
    package func nextDeclaring() throws -> Declaring? {
        if whole != nil {
            while let entry = try next() {
                if entry.request != nil || entry.volatile != nil {
                    return Declaring(key: entry.key, request: entry.request, volatile: entry.volatile, stableSha256: entry.stableSha256)
                }
            }
            return nil
        }
        while let element = try nextElement() {
            guard element.containsBytes(Self.requestMark) || element.containsBytes(Self.volatileMark) || element.containsBytes(Self.unicodeEscape)
            else { continue }
            let entry = try decode(Declaring.self, element)
            if entry.request != nil || entry.volatile != nil { return entry }
        }
        return nil
    }

    /// The manifest's fields but its entries (``remainder()``), the entries not yet read scanned past without being
    /// decoded: what a listing of a large bundle takes from the manifest, whose rows come from the index.
    package func remainderSkippingEntries() throws -> Manifest {
        if let whole { wholeNext = whole.count }
        while try nextElement() != nil {}
        return try remainder()
    }

    /// The JSON of the next element of `entries`, or nil after the last.
    private func nextElement() throws -> [UInt8]? {
        guard let stream, let file else { return nil }
        let name = BundleFormat.manifestEntryName
        while true {
            // The scan runs on a local scanner (moved out and back, not copied): each byte's step on this class's own
            // property paid an exclusivity check, which took a sixth of a scan.
            var scan = Scanner()
            swap(&scan, &scanner)
            var step = Scanner.Step.more
            var at = position
            pending.withUnsafeBufferPointer { bytes in
                while at < bytes.count, case .more = step {
                    step = scan.take(bytes[at])
                    at += 1
                }
            }
            position = at
            swap(&scan, &scanner)
            switch step {
            case .more: break
            case .tooLong: throw BundleError(.hostile, "an entry of manifest.json is longer than \(Self.elementLimit) bytes", entry: name)
            case .malformed: throw BundleError(.corruptIndex, "manifest.json is not the JSON of a manifest", entry: name)
            case .element: return scanner.takeElement()
            }
            if stream.ended {
                guard scanner.finished else { throw BundleError(.corruptIndex, "manifest.json ends before its entries do", entry: name) }
                return nil
            }
            if stream.needsInput && fed < compressedSize {
                let count = Int(min(64 << 10, compressedSize - fed))
                try stream.feed(try file.read(at: dataOffset + fed, count: count, what: name))
                fed += UInt64(count)
            }
            do {
                pending = try stream.pull(max: 64 << 10, limit: size)
            } catch let error as BundleError where error.code == .corruptBody {
                // A damaged metadata stream is a damaged manifest, not a body.
                throw BundleError(.corruptIndex, "\(name): \(error.message)", entry: name)
            }
            position = 0
            // Every byte fed, and nothing more comes out: the stream stops short of its end.
            if pending.isEmpty && stream.needsInput && fed >= compressedSize && !stream.ended {
                throw BundleError(.corruptIndex, "manifest.json's deflate stream ends early", entry: name)
            }
        }
    }

    /// A scan of a manifest's JSON a byte at a time: where the top-level `entries` array is, and each of its elements.
    private struct Scanner {
        enum Step { case more, element, tooLong, malformed }

        /// Nesting: 1 inside the top-level object, 2 inside an array or object at its top level.
        private var depth = 0
        private var inString = false
        private var escaped = false
        /// The last string read at depth 1 (a key, when a colon follows), and whether one is being read.
        private var key: [UInt8] = []
        private var readingKey = false
        private var lastKey: [UInt8] = []
        /// Inside the entries array (at depth 2), and the element being gathered (from its first byte).
        private var inEntries = false
        private var element: [UInt8] = []
        private var elementDepth = 0
        private(set) var finished = false
        /// Everything but the entries' elements (`"entries": []`): the manifest's other fields.
        private(set) var rest: [UInt8] = []

        private static let entriesKey = Array("entries".utf8)

        mutating func takeElement() -> [UInt8] {
            defer { element.removeAll(keepingCapacity: true) }
            return element
        }

        mutating func take(_ byte: UInt8) -> Step {
            if inEntries && (elementDepth > 0 || (byte != 0x2C && byte != 0x5D && !Self.isSpace(byte))) {
                element.append(byte)
                if element.count > ManifestEntries.elementLimit { return .tooLong }
            } else if !inEntries || (byte == 0x5D && elementDepth == 0) {
                // Out of the entries, and the bracket that closes them.
                rest.append(byte)
                if rest.count > ManifestEntries.elementLimit { return .tooLong }
            }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == 0x5C {
                    escaped = true
                } else if byte == 0x22 {
                    inString = false
                    if readingKey {
                        readingKey = false
                        lastKey = key
                    }
                    if inEntries && elementDepth == 0 { return .malformed }
                } else if readingKey {
                    key.append(byte)
                    if key.count > 64 { readingKey = false }
                }
                return .more
            }
            switch byte {
            case 0x22:
                inString = true
                if depth == 1 && !inEntries {
                    readingKey = true
                    key.removeAll(keepingCapacity: true)
                    lastKey.removeAll(keepingCapacity: true)
                }
            case 0x7B, 0x5B:
                if inEntries {
                    elementDepth += 1
                    return .more
                }
                if depth == 1 && byte == 0x5B && lastKey == Self.entriesKey { inEntries = true }
                depth += 1
            case 0x7D, 0x5D:
                if inEntries {
                    if elementDepth > 0 {
                        elementDepth -= 1
                        if elementDepth == 0 { return .element }
                        return .more
                    }
                    guard byte == 0x5D else { return .malformed }
                    inEntries = false
                    depth -= 1
                    return .more
                }
                guard depth > 0 else { return .malformed }
                depth -= 1
                if depth == 0 { finished = true }
            default:
                if inEntries && elementDepth == 0 && byte != 0x2C && !Self.isSpace(byte) { return .malformed }
            }
            return .more
        }

        private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
    }
}
