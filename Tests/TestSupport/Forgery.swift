import Crypto
import Foundation
import OfflineBundle

/// Rewrites a stored metadata entry (`index.bin`, `signature.json`, `manifest.json`) of the bundle at `path` in
/// place and fixes its CRC-32 in the local and central headers, so that only the lie remains for the reader to find
/// (a damaged CRC would stop it earlier, before the check a test means to reach).
///
/// `transform` must keep the length; the entry must be stored (method 0), as the writer stores metadata.
public func forgeMetadataEntry(_ name: String, in path: String, _ transform: (inout [UInt8]) -> Void) throws {
    let bundle = try MountedBundle(path: path)
    guard let entry = bundle.metadata[name], entry.method == 0 else { throw POSIXError(.EINVAL) }
    var bytes = try MountedBundle.readMetadataEntry(entry, from: bundle.file, limit: 1 << 32, bodyArea: bundle.directory.centralDirectoryOffset)
    let length = bytes.count
    transform(&bytes)
    precondition(bytes.count == length, "a forged entry keeps its length")
    let crc = CRC32.checksum(bytes)
    var file = try Data(contentsOf: URL(fileURLWithPath: path))
    let local = Int(entry.localHeaderOffset)
    let nameLength = Int(file[local + 26]) | (Int(file[local + 27]) << 8)
    let extraLength = Int(file[local + 28]) | (Int(file[local + 29]) << 8)
    let dataStart = local + 30 + nameLength + extraLength
    file.replaceSubrange(dataStart..<(dataStart + bytes.count), with: bytes)
    withUnsafeBytes(of: crc.littleEndian) { file.replaceSubrange((local + 14)..<(local + 18), with: $0) }
    let central = Int(bundle.directory.centralDirectoryOffset) + entry.recordOffset
    withUnsafeBytes(of: crc.littleEndian) { file.replaceSubrange((central + 16)..<(central + 20), with: $0) }
    try file.write(to: URL(fileURLWithPath: path))
}

/// Sets the bundle digest in the ZIP comment of the bundle at `path` to SHA-256 of its current `index.bin`, as a
/// forger who rewrote the index would, so that only the signature can still tell.
public func forgeBundleDigest(in path: String) throws {
    let bundle = try MountedBundle(path: path)
    let digest = Array(SHA256.hash(data: bundle.index.bytes)).map { String(format: "%02x", $0) }.joined()
    var file = try Data(contentsOf: URL(fileURLWithPath: path))
    guard let at = file.range(of: Data((BundleFormat.commentPrefix + "sha256:").utf8), options: .backwards) else { throw POSIXError(.EINVAL) }
    file.replaceSubrange(at.upperBound..<(at.upperBound + 64), with: Data(digest.utf8))
    try file.write(to: URL(fileURLWithPath: path))
}

/// Rewrites the `signedDigest` of the bundle's `signature.json` to the digest its ZIP comment now records, as a forger
/// would after rewriting the index: then only the Ed25519 signature itself can tell.
public func forgeSignedDigest(in path: String) throws {
    let bundle = try MountedBundle(path: path)
    let digest = Array(bundle.digest.utf8)
    try forgeMetadataEntry(BundleFormat.signatureEntryName, in: path) { bytes in
        let marker = Array("\"signedDigest\" : \"sha256:".utf8)
        guard let at = bytes.firstRange(of: marker) else { preconditionFailure("no signedDigest in signature.json") }
        bytes.replaceSubrange(at.upperBound..<(at.upperBound + 64), with: digest)
    }
}
