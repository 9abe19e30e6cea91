import Crypto
import Foundation

/// What a remote bundle's fetched bytes must pass before they are kept or read: each body whole, its local header as
/// the index records it and its content hashing to the SHA-256 the index names (the index itself hashes to the bundle
/// digest, checked at mount). CRC-32 is no check against a server, which can make bytes that match it.
///
/// A fetch is widened to whole bodies (``align(_:)``), so each body it brings is hashed once, as it arrives; bytes of
/// the body area that no whole, checked body covers are never kept. Bytes past the body area (`index.bin`,
/// `manifest.json`, `signature.json`, the central directory) are checked by their readers, on every mount.
package struct RemoteBodyCheck: Sendable {
    private let index: BundleIndex
    /// Where the body area ends: `index.bin`'s local header.
    package let bodyAreaEnd: UInt64
    private let maxBodySize: UInt64

    package init(index: BundleIndex, bodyAreaEnd: UInt64, maxBodySize: UInt64) {
        self.index = index
        self.bodyAreaEnd = bodyAreaEnd
        self.maxBodySize = maxBodySize
    }

    /// A body's extent: its local header and stored bytes.
    package static func extent(_ record: IndexBodyRecord) -> Range<UInt64> { record.localHeaderOffset..<(record.dataOffset + record.storedSize) }

    /// The bodies that `range` touches, as indexes (bodies lie in the body area in index order, apart: checked at mount).
    package func bodies(touching range: Range<UInt64>) -> Range<Int> {
        guard !range.isEmpty, range.lowerBound < bodyAreaEnd else { return 0..<0 }
        // The first body that ends after the range starts.
        var low = 0
        var high = index.bodyCount
        while low < high {
            let mid = (low + high) / 2
            if Self.extent(index.body(at: mid)).upperBound <= range.lowerBound { low = mid + 1 } else { high = mid }
        }
        var end = low
        while end < index.bodyCount && index.body(at: end).localHeaderOffset < range.upperBound { end += 1 }
        return low..<end
    }

    package func record(_ i: Int) -> IndexBodyRecord { index.body(at: i) }

    /// The bodies the index names.
    package var bodyCount: Int { index.bodyCount }

    /// `range` widened to the whole bodies it touches.
    package func align(_ range: Range<UInt64>) -> Range<UInt64> {
        let touched = bodies(touching: range)
        guard let first = touched.first, let last = touched.last else { return range }
        return min(range.lowerBound, index.body(at: first).localHeaderOffset)..<max(range.upperBound, Self.extent(index.body(at: last)).upperBound)
    }

    /// A body's name in messages.
    package func name(_ record: IndexBodyRecord) -> String {
        index.formatVersion == 1
            ? BundleFormat.v1BodyPrefix + hexString(record.sha256)
            : BundleFormat.bodyPrefix + hexString(record.sha256.prefix(IndexLayout.bodyNameDigits / 2))
    }

    /// What `bytes`, fetched from `offset`, hold that may be kept: the part past the body area, and each whole body in
    /// them that passes its checks; and the first body that failed, with why.
    package func check(_ bytes: [UInt8], at offset: UInt64) -> (passed: [Range<UInt64>], failed: (range: Range<UInt64>, error: BundleError)?) {
        let span = offset..<(offset + UInt64(bytes.count))
        var passed: [Range<UInt64>] = []
        var failed: (range: Range<UInt64>, error: BundleError)?
        for i in bodies(touching: span) {
            let record = index.body(at: i)
            let extent = Self.extent(record)
            guard extent.lowerBound >= span.lowerBound, extent.upperBound <= span.upperBound else { continue }
            do {
                let digest = try StreamedBodyCheck(record: record, check: self)
                let from = Int(extent.lowerBound - offset)
                try digest.feed(bytes[from..<(from + extent.count)])
                try digest.finish()
                passed.append(extent)
            } catch {
                if failed == nil { failed = (extent, error as? BundleError ?? BundleError(.corruptBody, "\(error)", entry: name(record))) }
            }
        }
        if span.upperBound > bodyAreaEnd { passed.append(max(span.lowerBound, bodyAreaEnd)..<span.upperBound) }
        return (passed, failed)
    }

    fileprivate func checkHeader(_ header: [UInt8], of record: IndexBodyRecord) throws {
        try LocalHeader.check(
            header, sha256: record.sha256, version: index.formatVersion, method: record.compression.rawValue, crc32: record.crc32,
            storedSize: record.storedSize, size: record.size, headerLength: Int(record.dataOffset - record.localHeaderOffset))
    }

    fileprivate var bodySizeLimit: UInt64 { maxBodySize }
}

/// One body's fetched bytes checked as they come, in order from its local header: the header against the index, then
/// the content (inflated, piece by piece, when stored deflated) against its recorded size and SHA-256.
package final class StreamedBodyCheck {
    private let record: IndexBodyRecord
    private let check: RemoteBodyCheck
    private let name: String
    private let headerLength: Int
    private var header: [UInt8] = []
    private var storedSeen: UInt64 = 0
    private var contentSeen: UInt64 = 0
    private var digest = SHA256()
    private var inflater: InflateStream?

    package init(record: IndexBodyRecord, check: RemoteBodyCheck) throws {
        self.record = record
        self.check = check
        name = check.name(record)
        headerLength = Int(record.dataOffset - record.localHeaderOffset)
        guard record.size <= check.bodySizeLimit else {
            throw BundleError(.hostile, "body claims \(record.size) bytes, over the limit of \(check.bodySizeLimit)", entry: name)
        }
        if record.compression == .deflate { inflater = try InflateStream(entry: name) }
    }

    /// The body's next bytes (its local header first, then its stored stream).
    package func feed(_ bytes: ArraySlice<UInt8>) throws {
        var rest = bytes
        if header.count < headerLength {
            let take = min(headerLength - header.count, rest.count)
            header += rest.prefix(take)
            rest = rest.dropFirst(take)
            if header.count == headerLength { try check.checkHeader(header, of: record) }
        }
        guard !rest.isEmpty else { return }
        storedSeen += UInt64(rest.count)
        guard storedSeen <= record.storedSize else { throw BundleError(.corruptBody, "the body runs past its recorded size", entry: name) }
        guard let inflater else {
            content(Array(rest))
            return
        }
        try inflater.feed(Array(rest))
        while true {
            let piece = try inflater.pull(max: 256 << 10, limit: record.size)
            if piece.isEmpty { break }
            content(piece)
        }
    }

    private func content(_ bytes: [UInt8]) {
        contentSeen += UInt64(bytes.count)
        digest.update(data: bytes)
    }

    /// Checks what was fed as the whole body.
    package func finish() throws {
        guard header.count == headerLength, storedSeen == record.storedSize else {
            throw BundleError(.corruptBody, "the body was fetched short", entry: name)
        }
        if let inflater, !inflater.ended, record.size > 0 || storedSeen > 0 {
            throw BundleError(.corruptBody, "the deflate stream is damaged (it ends early)", entry: name)
        }
        guard contentSeen == record.size else {
            throw BundleError(.corruptBody, "the body holds \(contentSeen) bytes, not the \(record.size) recorded", entry: name)
        }
        try BodyCheck.digest(Array(digest.finalize()), of: record, name: name)
    }
}
