import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The bodies that the other bundles of a cache folder hold, found by their content: what makes the next release of
/// a bundle cost the bytes that changed, not the whole release. A cache folder keeps, beside each bundle's sparse file,
/// a list of its bodies (`<digest>-<size>.bodies`: each body's SHA-256 and where its local header and stored bytes
/// lie). At its first read that misses, a mount reads the lists of the folder's most recently used bundles, keeps the places of the bodies its own
/// index names, and a read that misses copies a body from a bundle that holds it before it asks the server.
///
/// Nothing borrowed is trusted: a body is copied only after its bytes there passed the checks a fetched body passes
/// (its local header as the new index records it, its content hashing to the SHA-256 the index names); a body that
/// fails them is forgotten in the bundle that held it, and fetched.
package final class BodyDonors: Sendable {
    /// Where a body lies in another bundle of the folder.
    private struct Place: Sendable {
        var bundle: Int
        var extent: Range<UInt64>
    }

    /// The other bundles: the base of their files' names (`<folder>/<digest>-<size>`) and their size.
    private let bundles: [(base: String, size: UInt64)]
    private let places: [ContentKey: Place]
    /// The other bundles' stores, opened when first borrowed from (nil once one could not be opened).
    private let opened: Mutex<[Int: RangeStore?]>

    /// A body's content digest, as a key.
    package struct ContentKey: Hashable, Sendable {
        let a: UInt64, b: UInt64, c: UInt64, d: UInt64
        init(_ sha256: some Collection<UInt8>) {
            let bytes = Array(sha256)
            (a, b, c, d) = (bytes.u64(0), bytes.u64(8), bytes.u64(16), bytes.u64(24))
        }
    }

    /// The most other bundles whose lists a mount reads (the most recently used first).
    static let maxBundles = 8
    private static let recordSize = 48
    private static let magic = Array("packager-bodies/1\n".utf8)

    /// The places, among the folder's other bundles (not `ownBase`), of the bodies `check`'s index names; nil when
    /// no other bundle there holds any of them.
    package static func find(folder: String, ownBase: String, check: RemoteBodyCheck) -> BodyDonors? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return nil }
        var candidates: [(base: String, size: UInt64, lastUse: Int)] = []
        for name in names where name.hasSuffix(".bodies") {
            let base = "\(folder)/\(name.dropLast(7))"
            guard base != ownBase, let size = name.dropLast(7).split(separator: "-").last.flatMap({ UInt64($0) }) else { continue }
            candidates.append((base, size, RangeStore.lastUse(base: base)))
        }
        guard !candidates.isEmpty else { return nil }
        var wanted = Set<ContentKey>()
        for i in 0..<check.bodyCount { wanted.insert(ContentKey(check.record(i).sha256)) }
        var bundles: [(base: String, size: UInt64)] = []
        var places: [ContentKey: Place] = [:]
        for candidate in candidates.sorted(by: { $0.lastUse > $1.lastUse }).prefix(maxBundles) {
            guard let records = readList(candidate.base + ".bodies", size: candidate.size) else { continue }
            let number = bundles.count
            var any = false
            for (key, extent) in records where wanted.contains(key) && places[key] == nil {
                places[key] = Place(bundle: number, extent: extent)
                any = true
            }
            if any { bundles.append((candidate.base, candidate.size)) }
        }
        guard !places.isEmpty else { return nil }
        return BodyDonors(bundles: bundles, places: places)
    }

    private init(bundles: [(base: String, size: UInt64)], places: [ContentKey: Place]) {
        self.bundles = bundles
        self.places = places
        opened = Mutex([:])
    }

    /// Writes the list of the bodies of `check`'s index beside the bundle's files (`base` + `.bodies`), unless it is
    /// there: whole to a file of its own (mode 0600, made new without following a link), then renamed into place.
    package static func writeList(base: String, check: RemoteBodyCheck) {
        writeList(base: base, bodies: (0..<check.bodyCount).lazy.map { check.record($0) })
    }

    /// Writes the list of `bodies` (records whose offsets are in the file named `base` + `.data`) unless it is there.
    package static func writeList(base: String, bodies: some Collection<IndexBodyRecord>) {
        let target = base + ".bodies"
        var info = stat()
        if lstat(target, &info) == 0 { return }
        var bytes = magic
        bytes.reserveCapacity(magic.count + bodies.count * recordSize)
        for record in bodies {
            let extent = RemoteBodyCheck.extent(record)
            bytes += record.sha256.prefix(32)
            bytes.appendLE(extent.lowerBound)
            bytes.appendLE(UInt64(extent.count))
        }
        RangeStore.replace(target, with: bytes)
    }

    /// A list's records, each lying inside a bundle of `size` bytes; nil when it is not a list (a link, another user's
    /// file, another format, or cut short).
    private static func readList(_ path: String, size: UInt64) -> [(ContentKey, Range<UInt64>)]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid(), info.st_size <= 1 << 30,
            (Int(info.st_size) - magic.count) % recordSize == 0
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        guard case .done(let count) = bytes.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: 0) }), count == bytes.count,
            bytes.starts(with: magic)
        else { return nil }
        var records: [(ContentKey, Range<UInt64>)] = []
        records.reserveCapacity((count - magic.count) / recordSize)
        for start in stride(from: magic.count, to: count, by: recordSize) {
            let offset = bytes.u64(start + 32)
            let length = bytes.u64(start + 40)
            guard offset <= size, length <= size - offset, length > 0 else { continue }
            records.append((ContentKey(bytes[start..<(start + 32)]), offset..<(offset + length)))
        }
        return records
    }

    /// The store of the other bundle `number`, opened once (never made: a bundle the folder no longer has lends nothing).
    private func store(_ number: Int) -> RangeStore? {
        opened.withLock { opened in
            if let store = opened[number] { return store }
            let bundle = bundles[number]
            let store = try? RangeStore(existing: bundle.base, size: bundle.size)
            opened[number] = .some(store)
            return store
        }
    }

    /// Copies into `keep` (at the body's place in the bundle being read) each body of `range` it lacks that another
    /// bundle holds and whose bytes there pass `check`; returns the bytes copied.
    package func lend(
        _ range: Range<UInt64>, check: RemoteBodyCheck, lacks: (Range<UInt64>) -> Bool,
        keep: (ArraySlice<UInt8>, UInt64) -> Bool
    ) -> UInt64 {
        var copied: UInt64 = 0
        for i in check.bodies(touching: range) {
            let record = check.record(i)
            let extent = RemoteBodyCheck.extent(record)
            guard lacks(extent), let place = places[ContentKey(record.sha256)], place.extent.count == extent.count,
                let donor = store(place.bundle), donor.holds(place.extent)
            else { continue }
            do {
                let body = try StreamedBodyCheck(record: record, check: check)
                try donor.pieces(place.extent) { piece, _ in try body.feed(piece) }
                try body.finish()
            } catch {
                // Damaged where it lies (or not what its list says): forgotten there, and fetched.
                donor.forget(place.extent)
                continue
            }
            var kept = true
            try? donor.pieces(place.extent) { piece, offset in
                guard keep(piece, extent.lowerBound + (offset - place.extent.lowerBound)) else {
                    kept = false
                    throw CancellationError()
                }
            }
            if kept { copied += UInt64(extent.count) }
        }
        return copied
    }
}
