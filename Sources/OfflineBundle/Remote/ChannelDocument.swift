import Crypto
import Foundation

/// A release channel's document: which release a fleet serves now, the deltas that lead to it from recent releases,
/// a version one above the last document's, and when it stops being current. It travels signed by the release key in
/// an envelope (``ChannelEnvelope``); `packager channel write` makes it and ``ReleaseChannel`` follows it.
///
/// Release objects are immutable (named by their digest, say), so every object URL may be cached forever; only the
/// channel's URL is revalidated. A rollback is a new version that names an older release.
public struct ChannelDocument: Codable, Sendable, Equatable {
    /// What the envelope's `payloadType` says of a channel document.
    public static let payloadType = "application/vnd.packager.channel+json"
    /// What ``type`` says.
    public static let typeName = "packager-channel/1"

    /// Always ``typeName``.
    public var type: String
    /// One above the previous document's; a follower refuses a document whose version is lower than the one it holds.
    public var version: UInt64
    /// When the document was made (RFC 3339, UTC).
    public var issued: String
    /// When it stops being current (RFC 3339, UTC): a follower that sees no newer one past it warns that the channel
    /// may be frozen, and moves to no release that an expired document names.
    public var expires: String
    /// The release served now.
    public var release: Release
    /// Deltas from recent releases to ``release``.
    public var deltas: [Delta]

    /// A release: where it is, and what it is.
    public struct Release: Codable, Sendable, Equatable {
        /// Its URL, absolute or relative to the channel's.
        public var url: String
        /// The bundle digest (64 lowercase hex digits), which its archive comment and its index must match.
        public var digest: String
        /// Its size in bytes.
        public var size: UInt64

        public init(url: String, digest: String, size: UInt64) {
            self.url = url
            self.digest = digest
            self.size = size
        }
    }

    /// A delta to the release from an earlier one.
    public struct Delta: Codable, Sendable, Equatable {
        /// Its URL, absolute or relative to the channel's.
        public var url: String
        /// The digest of the delta bundle.
        public var digest: String
        /// The digest of the release it applies to.
        public var base: String
        /// Its size in bytes.
        public var size: UInt64

        public init(url: String, digest: String, base: String, size: UInt64) {
            self.url = url
            self.digest = digest
            self.base = base
            self.size = size
        }
    }

    public init(version: UInt64, issued: Date, expires: Date, release: Release, deltas: [Delta] = []) {
        type = Self.typeName
        self.version = version
        self.issued = Self.timestamp(issued)
        self.expires = Self.timestamp(expires)
        self.release = release
        self.deltas = deltas
    }

    /// `date` as the document writes it: RFC 3339 in UTC, to the second.
    public static func timestamp(_ date: Date) -> String {
        let t = HTTPDates.civil(Int(date.timeIntervalSince1970.rounded(.down)))
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", t.year, t.month, t.day, t.hour, t.minute, t.second)
    }

    /// ``expires`` as a date; nil when it does not parse (such a document is refused).
    public var expiryDate: Date? { Self.date(expires) }

    static func date(_ text: String) -> Date? { HTTPDates.parseRFC3339(text) }

    /// Whether the document is past its expiry at `now`.
    public func expired(at now: Date = Date()) -> Bool { (expiryDate ?? .distantPast) <= now }

    /// The checks a document passes whatever its signature: its type, digests of 64 lowercase hex digits, a
    /// timestamp that parses. Throws ``BundleError`` (`.signature`) naming what is wrong.
    func validate(source: String) throws {
        guard type == Self.typeName else { throw BundleError(.signature, "\(source) is a document of type '\(type)', not \(Self.typeName)") }
        guard expiryDate != nil, Self.date(issued) != nil else {
            throw BundleError(.signature, "\(source): 'issued' and 'expires' must be RFC 3339 times such as 2026-12-01T00:00:00Z")
        }
        for digest in [release.digest] + deltas.flatMap({ [$0.digest, $0.base] }) where !Self.isDigest(digest) {
            throw BundleError(.signature, "\(source): '\(digest)' is not a bundle digest (64 lowercase hex digits)")
        }
        guard !release.url.isEmpty, deltas.allSatisfy({ !$0.url.isEmpty }) else { throw BundleError(.signature, "\(source) names a release without a URL") }
    }

    static func isDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// A signed envelope around a channel document, in the shape of DSSE (the Dead Simple Signing Envelope): the
/// document's JSON bytes in base64, their type, and Ed25519 signatures over the pre-authentication encoding of both
/// (`DSSEv1 <len> <type> <len> <bytes>`), so the signed bytes are the bytes sent, with no canonical JSON to agree on.
public struct ChannelEnvelope: Codable, Sendable, Equatable {
    /// ``ChannelDocument/payloadType``.
    public var payloadType: String
    /// The document's JSON bytes, base64.
    public var payload: String
    public var signatures: [Signature]

    /// One signature: the signing key's id (the SHA-256 of its 32 raw bytes, hex) and the signature, base64.
    public struct Signature: Codable, Sendable, Equatable {
        public var keyid: String
        public var sig: String

        public init(keyid: String, sig: String) {
            self.keyid = keyid
            self.sig = sig
        }
    }

    public init(payloadType: String, payload: String, signatures: [Signature]) {
        self.payloadType = payloadType
        self.payload = payload
        self.signatures = signatures
    }

    /// The bytes a signature covers: DSSE's pre-authentication encoding of `type` and `body`.
    public static func preAuthentication(type: String, body: [UInt8]) -> [UInt8] {
        Array("DSSEv1 \(type.utf8.count) \(type) \(body.count) ".utf8) + body
    }

    /// The id of a public key: the SHA-256 of its raw bytes, hex.
    public static func keyID(_ publicKey: [UInt8]) -> String { hexString(Array(SHA256.hash(data: publicKey))) }

    /// The most bytes an envelope may have.
    public static let maxBytes = 1 << 20

    /// The document in `bytes` (an envelope's JSON), once a signature by `publicKey` over it verifies.
    ///
    /// - Throws: ``BundleError`` with code `.signature` saying what failed (not an envelope, another type, no signature
    ///   by that key, a signature that does not verify, a document that is not valid), naming `source`.
    public static func open(_ bytes: [UInt8], publicKey: [UInt8], source: String) throws -> ChannelDocument {
        guard bytes.count <= maxBytes else { throw BundleError(.hostile, "\(source) is over \(maxBytes) bytes: not a channel document") }
        guard let envelope = try? JSONDecoder().decode(ChannelEnvelope.self, from: Data(bytes)) else {
            throw BundleError(.signature, "\(source) is not a signed channel document (JSON with payloadType, payload and signatures)")
        }
        guard envelope.payloadType == ChannelDocument.payloadType else {
            throw BundleError(.signature, "\(source) carries a payload of type '\(envelope.payloadType)', not \(ChannelDocument.payloadType)")
        }
        guard let body = Data(base64Encoded: envelope.payload) else { throw BundleError(.signature, "\(source): the payload is not base64") }
        let key: Curve25519.Signing.PublicKey
        do {
            key = try Curve25519.Signing.PublicKey(rawRepresentation: publicKey)
        } catch {
            throw BundleError(.invalidArgument, "the channel's public key is not a 32-byte Ed25519 key")
        }
        let message = preAuthentication(type: envelope.payloadType, body: Array(body))
        let id = keyID(publicKey)
        let verified = envelope.signatures.contains { signature in
            (signature.keyid.isEmpty || signature.keyid == id)
                && Data(base64Encoded: signature.sig).map { key.isValidSignature($0, for: message) } == true
        }
        guard verified else {
            throw BundleError(
                .signature,
                envelope.signatures.contains { $0.keyid == id }
                    ? "\(source): the signature does not verify with the channel's public key: the document was altered or re-signed"
                    : "\(source) is not signed by the channel's public key (key id \(id.prefix(16))…)")
        }
        let document: ChannelDocument
        do {
            document = try JSONDecoder().decode(ChannelDocument.self, from: body)
        } catch {
            throw BundleError(.signature, "\(source): the signed document is not a channel document: \(DecodingProblem.describe(error))")
        }
        try document.validate(source: source)
        return document
    }
}
