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

    /// A key from the file at `path`: 32 raw bytes, or their base64 (what `packager keygen` writes).
    ///
    /// - Throws: ``BundleError`` with code `.io` when the file cannot be read, `.invalidArgument` when it holds
    ///   no 32-byte key.
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BundleError(.io, "cannot read the public key file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let key = data.count == 32 ? Array(data) : Data(base64Encoded: text).map(Array.init), key.count == 32 else {
            throw BundleError(.invalidArgument, "\(path) does not hold a 32-byte Ed25519 public key (raw or base64)")
        }
        self.bytes = key
    }
}
