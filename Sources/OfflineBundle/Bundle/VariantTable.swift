import Foundation
import HTTPTypes

/// A bundle's request variants (docs/FORMAT.md §5.4), by URL: for each URL with qualified entries, every candidate
/// H19 chooses among, its qualifiers parsed and what negotiation compares read out of its headers once. Built at mount
/// in a bundle with request qualifiers; a request then costs a hash, a dictionary probe and a comparison per candidate.
final class VariantTable: Sendable {
    struct Group: Sendable {
        /// The URL's canonical bytes.
        let url: [UInt8]
        let candidates: [RequestQualifiers.Candidate]
    }

    /// The groups, and an open-addressing table over them by the FNV-1a hash of the URL's canonical bytes (the index's
    /// own hash): a slot holds a group's position, -1 when empty; probed linearly from the hash's low bits.
    private let groups: [Group]
    private let hashes: [UInt64]
    private let slots: [Int32]

    init(_ index: BundleIndex) {
        var byURL: [[UInt8]: [Int]] = [:]
        for (entry, urlLength) in index.qualifiedKeys() {
            let url = index.withKeyBytes(entry) { Array($0.prefix(urlLength)) }
            byURL[url, default: []].append(entry)
        }
        var groups: [Group] = []
        var hashes: [UInt64] = []
        for (url, qualified) in byURL.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let h = url.withUnsafeBytes { IndexLayout.hash($0) }
            let plain = url.withUnsafeBytes { index.find(canonicalKey: $0, hash: h) }
            let candidates = ((plain.map { [$0] } ?? []) + qualified).compactMap { i -> RequestQualifiers.Candidate? in
                guard let qualifiers = RequestQualifiers.split(key: index.entryKey(i)).qualifiers else { return nil }
                let headers = index.entryHeaders(i)
                return RequestQualifiers.Candidate(
                    entry: i, qualifiers: qualifiers, contentType: headers.first { $0.name == "content-type" }?.value,
                    contentLanguage: headers.first { $0.name == "content-language" }?.value)
            }
            groups.append(Group(url: url, candidates: candidates))
            hashes.append(h)
        }
        var slots = [Int32](repeating: -1, count: IndexLayout.slotCount(forEntries: groups.count))
        let mask = slots.count - 1
        for (g, h) in hashes.enumerated() {
            var s = Int(truncatingIfNeeded: h) & mask
            while slots[s] >= 0 { s = (s + 1) & mask }
            slots[s] = Int32(g)
        }
        self.groups = groups
        self.hashes = hashes
        self.slots = slots
    }

    /// The URL's group, when it has qualified entries.
    func group(_ url: UnsafeRawBufferPointer, hash: UInt64) -> Group? {
        slots.withUnsafeBufferPointer { slots -> Group? in
            let mask = slots.count - 1
            var s = Int(truncatingIfNeeded: hash) & mask
            while true {
                let g = Int(slots[s])
                if g < 0 { return nil }
                if hashes[g] == hash {
                    let found = groups[g].url.withUnsafeBytes {
                        $0.count == url.count && (url.isEmpty || memcmp($0.baseAddress!, url.baseAddress!, url.count) == 0)
                    }
                    if found { return groups[g] }
                }
                s = (s + 1) & mask
            }
        }
    }
}
