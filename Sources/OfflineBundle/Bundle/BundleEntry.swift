/// One request key of a mounted bundle and the response recorded for it.
///
/// Entries are cheap values; headers and the key are decoded from the index
/// when asked for, and the body is read only through ``MountedBundle/body(of:)``.
public struct BundleEntry: Sendable {
    /// Where a body is and what it is.
    public struct Body: Sendable, Equatable {
        /// Position in the bundle's body table.
        package var index: Int
        /// SHA-256 of the (inflated) body, lowercase hex. Also the body's ZIP entry name after `bodies/`.
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

    /// The canonical request key.
    public var key: String { bundle.key(ofEntryAt: position) }

    /// The stored response headers, names lowercased, in recorded order.
    public var headers: [(name: String, value: String)] { bundle.headers(ofEntryAt: position) }

    /// The first stored header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}
