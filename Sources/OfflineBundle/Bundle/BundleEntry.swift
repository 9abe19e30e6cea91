import Foundation
import HTTPTypes

/// One request key of a mounted bundle and the response recorded for it.
///
/// Entries are cheap values; headers and the key are decoded from the index
/// when asked for, and the body is read only through ``MountedBundle/body(of:)``.
public struct BundleEntry: Sendable {
    /// Where a body is and what it is.
    public struct Body: Sendable, Equatable {
        /// Position in the bundle's body table.
        package var index: Int
        /// SHA-256 of the (inflated) body, lowercase hex. Also the body's ZIP entry name after `b/`.
        public var sha256: String
        /// Size in bytes of the body.
        public var size: UInt64
        /// Size in bytes as stored in the ZIP entry.
        public var storedSize: UInt64
        /// How the ZIP entry stores it.
        public var compression: BodyCompression
        /// CRC-32 of the body.
        public var crc32: UInt32
    }

    /// Position of the entry in key order.
    public let position: Int
    let bundle: MountedBundle
    /// The HTTP status recorded.
    public let status: Int
    /// Whether the entry was recorded, substituted or blocked.
    public let kind: EntryKind
    /// The body, or nil when the response had none (blocked entries, redirects, 304s).
    public let body: Body?
    /// Whether the entry's ETag was synthesized by the writer from the body's digest (`packager pack`, substituted
    /// files) rather than sent by an origin. A synthesized ETag is no validator of the origin's: `verify` never
    /// compares it with one.
    public let etagSynthesized: Bool
    /// Whether the entry's Last-Modified was made by the writer rather than sent by an origin.
    public let lastModifiedSynthesized: Bool
    /// When the response was fetched (nil for packed files and version-1 bundles).
    public let fetchedAt: Date?
    /// The `Date` the origin sent with the response, when it sent one.
    public let originDate: Date?

    /// The canonical request key.
    public var key: String { bundle.key(ofEntryAt: position) }

    /// The response's header fields, in recorded order; a synthesized ETag comes last. A stored name that is not a
    /// valid field name (only a hand-made bundle holds one) is left out.
    public var fields: HTTPFields { HTTPFields(pairs: headers) }

    /// The response headers, names lowercased, in recorded order; a synthesized ETag comes last.
    package var headers: [(name: String, value: String)] {
        var headers = bundle.headers(ofEntryAt: position)
        if let etag = synthesizedETag {
            // The flag wins over a stored ETag a hand-made bundle might also carry: one validator, never two.
            headers.removeAll { $0.name == "etag" }
            headers.append((name: "etag", value: etag))
        }
        return headers
    }

    /// The ETag derived from the body's digest, when the entry's ETag is synthesized.
    public var synthesizedETag: String? {
        guard etagSynthesized, let body else { return nil }
        return "\"" + body.sha256.prefix(32) + "\""
    }

    /// The first stored header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}

extension BundleEntry {
    /// How long the origin said the response stays fresh (RFC 9111 §4.2.1): `Cache-Control: max-age` (zero for
    /// `no-cache` or `no-store`), else `Expires` minus `Date`; nil when it said neither. At most 10^15 seconds.
    public var freshnessLifetime: Duration? { lifetimeSeconds.map(Self.duration) }

    /// A time in seconds as a Duration, within 0 and 10^15 seconds (a `max-age` of 10^300 is a very long time, not a
    /// trap).
    private static func duration(_ seconds: Double) -> Duration { .seconds(min(max(seconds, 0), 1e15)) }

    private var lifetimeSeconds: Double? {
        let directives = (header("cache-control") ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if directives.contains("no-cache") || directives.contains("no-store") { return 0 }
        if let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }),
            let seconds = Double(maxAge.dropFirst(8).trimmingCharacters(in: CharacterSet(charactersIn: "\""))), seconds.isFinite
        {
            return max(0, seconds)
        }
        guard let expiresText = header("expires") else { return nil }
        // An Expires that is not a date means already expired (RFC 9111 §5.3).
        guard let expires = HTTPDates.parse(expiresText) else { return 0 }
        let date = header("date").flatMap(HTTPDates.parse) ?? originDate ?? fetchedAt
        return date.map { max(0, expires.timeIntervalSince($0)) }
    }

    /// The response's age at `now` (RFC 9111 §4.2.3): the age it had when fetched (its `Age`, or how far its `Date`
    /// lagged the fetch) plus the time since; nil when the fetch time was not recorded. At most 10^15 seconds.
    public func age(at now: Date) -> Duration? {
        Self.age(fetchedAt: fetchedAt, originDate: originDate, recordedAge: header("age"), now: now).map(Self.duration)
    }

    /// The age of a response fetched at `fetchedAt`, sent with `originDate` and an `Age` of `recordedAge`.
    package static func age(fetchedAt: Date?, originDate: Date?, recordedAge: String?, now: Date) -> TimeInterval? {
        guard let fetchedAt else { return nil }
        let apparent = originDate.map { max(0, fetchedAt.timeIntervalSince($0)) } ?? 0
        // delta-seconds (RFC 9111 §1.2.2): digits only; anything else is no stored age.
        let digits = recordedAge.map { $0.trimmingCharacters(in: .whitespaces) }
        let recorded = digits.flatMap { !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } ? Double($0) : nil } ?? 0
        return max(apparent, recorded) + max(0, now.timeIntervalSince(fetchedAt))
    }
}
