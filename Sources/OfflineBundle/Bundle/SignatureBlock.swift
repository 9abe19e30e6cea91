import Crypto
import Foundation

/// The optional `signature.json` entry: an Ed25519 signature over the bundle digest.
public struct SignatureBlock: Codable, Sendable, Equatable {
    /// Always `ed25519` (format versions 1 and 2).
    public var algorithm: String
    /// The signer's public key, 32 raw bytes in base64. Informative: a loader trusts its own configured key.
    public var publicKey: String
    /// `sha256:` followed by the bundle digest in lowercase hex.
    public var signedDigest: String
    /// The 64-byte Ed25519 signature over ``BundleFormat/signedMessage(bundleDigestHex:)``, in base64.
    public var signature: String

    /// Creates a block.
    public init(algorithm: String = "ed25519", publicKey: String, signedDigest: String, signature: String) {
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.signedDigest = signedDigest
        self.signature = signature
    }

    /// Verifies a signature block's JSON for a bundle with digest `bundleDigestHex` against `publicKey`.
    ///
    /// - Throws: ``BundleError`` with code `.signature` saying what failed.
    package static func verify(json: [UInt8], bundleDigestHex: String, publicKey: [UInt8]) throws {
        let block: SignatureBlock
        do {
            block = try JSONDecoder().decode(SignatureBlock.self, from: Data(json))
        } catch {
            throw BundleError(.signature, "signature.json is not a valid signature block")
        }
        guard block.algorithm == "ed25519" else {
            throw BundleError(.signature, "the bundle is signed with \(block.algorithm); only ed25519 is supported")
        }
        guard block.signedDigest == "sha256:" + bundleDigestHex else {
            throw BundleError(.signature, "the signature was made over another bundle digest: the bundle was altered after signing")
        }
        let key: Curve25519.Signing.PublicKey
        do {
            key = try Curve25519.Signing.PublicKey(rawRepresentation: publicKey)
        } catch {
            throw BundleError(.invalidArgument, "the required public key is not a 32-byte Ed25519 key")
        }
        guard let signature = Data(base64Encoded: block.signature) else {
            throw BundleError(.signature, "the signature is not valid base64")
        }
        if let signer = Data(base64Encoded: block.publicKey), Array(signer) != publicKey {
            guard key.isValidSignature(signature, for: BundleFormat.signedMessage(bundleDigestHex: bundleDigestHex)) else {
                throw BundleError(.signature, "the bundle was signed by another key, not the required one")
            }
        }
        guard key.isValidSignature(signature, for: BundleFormat.signedMessage(bundleDigestHex: bundleDigestHex)) else {
            throw BundleError(.signature, "the signature does not verify with the required public key: the bundle was tampered with or re-signed")
        }
    }
}
