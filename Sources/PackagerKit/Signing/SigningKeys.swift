import Crypto
import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Ed25519 key files: `PREFIX.key` (the private key, base64, readable by its owner only) and `PREFIX.pub` (base64).
public enum SigningKeys {
    /// Writes a new key pair; refuses to overwrite either file.
    ///
    /// - Returns: the paths of the private and public key files.
    @discardableResult
    public static func generate(prefix: String) throws -> (privateKey: String, publicKey: String) {
        let key = Curve25519.Signing.PrivateKey()
        let privatePath = prefix + ".key"
        let publicPath = prefix + ".pub"
        for path in [privatePath, publicPath] where FileManager.default.fileExists(atPath: path) {
            throw PackagerError(.invalidInput, "\(path) exists; keys are never overwritten")
        }
        // Created 0600 from the start, so the private key is never readable by others, not even briefly.
        let fd = open(privatePath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw PackagerError(.io, "cannot create \(privatePath)", cause: SystemCallError(errno)) }
        let text = Array((BundlePublicKey.privateFileLabel + "\n" + key.rawRepresentation.base64EncodedString() + "\n").utf8)
        let failure = text.withUnsafeBytes { FileIO.write(fd, $0) }
        close(fd)
        if let failure { throw PackagerError(.io, "cannot write \(privatePath)", cause: SystemCallError(failure)) }
        let publicText = Data((BundlePublicKey.fileLabel + "\n" + key.publicKey.rawRepresentation.base64EncodedString() + "\n").utf8)
        guard FileManager.default.createFile(atPath: publicPath, contents: publicText) else {
            throw PackagerError(.io, "cannot write \(publicPath)")
        }
        return (privatePath, publicPath)
    }

    /// Reads a private key from a file (base64 or 32 raw bytes), or else from base64 text in an environment variable.
    ///
    /// - Returns: nil when neither is given.
    public static func privateKey(
        file: String?, environment variable: String? = nil, in environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> Curve25519.Signing.PrivateKey? {
        let data: Data
        let source: String
        if let file {
            guard let contents = FileManager.default.contents(atPath: file) else {
                throw PackagerError(.invalidInput, "cannot read the signing key file \(file)")
            }
            data = contents
            source = file
        } else if let variable, let value = environment[variable], !value.isEmpty {
            data = Data(value.utf8)
            source = "$" + variable
        } else {
            return nil
        }
        let whole = String(decoding: data, as: UTF8.self)
        // A public key is 32 bytes too, and would sign: refused when its file says what it is (keygen's label), or
        // its name does.
        if whole.hasPrefix(BundlePublicKey.fileLabel) || (file?.hasSuffix(".pub") == true && !whole.hasPrefix(BundlePublicKey.privateFileLabel)) {
            throw PackagerError(
                .invalidInput, "\(source) is a public key (packager keygen's .pub file): sign with the private key, its .key file")
        }
        let text = BundlePublicKey.keyText(whole)
        guard let raw = data.count == 32 ? data : Data(base64Encoded: text), raw.count == 32,
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else { throw PackagerError(.invalidInput, "\(source) does not hold a 32-byte Ed25519 private key (base64)") }
        return key
    }
}
