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

    /// By the FNV-1a hash of the URL's canonical bytes (the index's own hash).
    private let groups: [UInt64: [Group]]

    init(_ index: BundleIndex) {
        var byURL: [[UInt8]: [Int]] = [:]
        for (entry, urlLength) in index.qualifiedKeys() {
            let url = index.withKeyBytes(entry) { Array($0.prefix(urlLength)) }
            byURL[url, default: []].append(entry)
        }
        var groups: [UInt64: [Group]] = [:]
        for (url, qualified) in byURL {
            let h = url.withUnsafeBytes { IndexLayout.hash($0) }
            let plain = url.withUnsafeBytes { index.find(canonicalKey: $0, hash: h) }
            let candidates = ((plain.map { [$0] } ?? []) + qualified).compactMap { i -> RequestQualifiers.Candidate? in
                guard let qualifiers = RequestQualifiers.split(key: index.entryKey(i)).qualifiers else { return nil }
                let headers = index.entryHeaders(i)
                return RequestQualifiers.Candidate(
                    entry: i, qualifiers: qualifiers, contentType: headers.first { $0.name == "content-type" }?.value,
                    contentLanguage: headers.first { $0.name == "content-language" }?.value)
            }
            groups[h, default: []].append(Group(url: url, candidates: candidates))
        }
        self.groups = groups
    }

    /// The URL's group, when it has qualified entries.
    func group(_ url: UnsafeRawBufferPointer, hash: UInt64) -> Group? {
        guard let found = groups[hash] else { return nil }
        for group in found where group.url.count == url.count {
            if url.isEmpty || group.url.withUnsafeBytes({ memcmp($0.baseAddress!, url.baseAddress!, url.count) == 0 }) { return group }
        }
        return nil
    }
}
