import Crypto
import Foundation

/// An Ed25519 public key that a bundle must be signed by, as `packager keygen` writes it (`NAME.pub`).
///
/// ```swift
/// let releaseKey = try BundlePublicKey(contentsOf: "release.pub")
/// let loader = try OfflineLoader(path: "docs.bundle.zip", publicKey: releaseKey.bytes)
/// ```
public struct BundlePublicKey: Sendable, Equatable {
    /// The 32 raw bytes of the key.
    public let bytes: [UInt8]

    /// A key from its 32 raw bytes.
    ///
    /// - Throws: ``BundleError`` with code `.invalidArgument` when there are not 32 bytes.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 32 else { throw BundleError(.invalidArgument, "an Ed25519 public key has 32 bytes, not \(bytes.count)") }
        self.bytes = bytes
    }

    /// The first line of the public key file `packager keygen` writes, before the key's base64.
    public static let fileLabel = "# packager Ed25519 public key: mount and check bundles with it (--public-key)"
    /// The first line of the private key file `packager keygen` writes: a public key file with it is refused.
    package static let privateFileLabel = "# packager Ed25519 private key: sign with it (--sign-key); keep it secret"

    /// A key from the file at `path`: what `packager keygen` writes (a label line, then the key's base64), or 32 raw
    /// bytes, or their base64 alone.
    ///
    /// - Throws: ``BundleError`` with code `.io` when the file cannot be read, `.invalidArgument` when it holds
    ///   no 32-byte key, or is labelled as a private key (a private key file must not be handed out as a public one).
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BundleError(.io, "cannot read the public key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        if text.hasPrefix(Self.privateFileLabel) {
            throw BundleError(
                .invalidArgument,
                "\(path) is a private key (packager keygen's .key file): give the public key, its .pub file, and keep the private one secret")
        }
        let key = data.count == 32 ? Array(data) : Data(base64Encoded: Self.keyText(text)).map(Array.init)
        guard let key, key.count == 32 else {
            throw BundleError(.invalidArgument, "\(path) does not hold a 32-byte Ed25519 public key (raw or base64)")
        }
        self.bytes = key
    }

    /// The base64 of a key file's text: its lines that are not comments, joined.
    package static func keyText(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("#") }.joined().trimmingCharacters(in: .whitespaces)
    }

    /// A short name for the key, the same wherever it is printed: `ed25519:` and the first 16 hex digits of the
    /// SHA-256 of its 32 bytes.
    public var fingerprint: String { Self.fingerprint(of: bytes) }

    package static func fingerprint(of bytes: [UInt8]) -> String {
        "ed25519:" + hexString(Array(SHA256.hash(data: bytes)).prefix(8))
    }
}
