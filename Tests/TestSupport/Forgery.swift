import Crypto
import Foundation
import OfflineBundle

/// Rewrites a metadata entry (`index.bin`, `signature.json`, `manifest.json`) of the bundle at `path` and fixes its
/// CRC-32 in the local and central headers, so that only the lie remains for the reader to find (a damaged CRC would
/// stop it earlier, before the check a test means to reach).
///
/// A stored entry is rewritten in place (`transform` must keep its length); a deflated one (version 3's `index.bin`)
/// is written back stored, as the format also allows, with the entries after it and the central directory moved.
public func forgeMetadataEntry(_ name: String, in path: String, _ transform: (inout [UInt8]) -> Void) throws {
    let bundle = try MountedBundle(path: path)
    guard let entry = bundle.metadata[name] else { throw POSIXError(.EINVAL) }
    var bytes = try MountedBundle.readMetadataEntry(entry, from: bundle.file, limit: 1 << 32, bodyArea: bundle.directory.centralDirectoryOffset)
    let length = bytes.count
    transform(&bytes)
    guard entry.method == 0 else {
        try replaceMetadataEntry(name, in: path, storing: bytes)
        return
    }
    precondition(bytes.count == length, "a forged stored entry keeps its length")
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

/// Replaces metadata entry `name` of the bundle at `path` by `bytes`, stored (method 0): the metadata entries from it
/// on are written again one after the other, then the central directory (its body records as they were) and the end
/// record, with the offsets and sizes that changed. For test bundles without ZIP64 records; the ZIP is read raw, so a
/// delta's entries (`delta.json`) can be replaced too.
public func replaceMetadataEntry(_ name: String, in path: String, storing bytes: [UInt8]) throws {
    try replaceMetadataEntry(name, in: path, data: bytes, method: 0, crc32: CRC32.checksum(bytes), size: bytes.count)
}

/// Replaces metadata entry `name` of the bundle at `path` by `data`, stored with `method` (8: a raw deflate stream of
/// `size` bytes whose CRC-32 is `crc32`), moving what follows it as ``replaceMetadataEntry(_:in:storing:)`` does.
public func replaceMetadataEntry(_ name: String, in path: String, data bytes: [UInt8], method: Int, crc32: UInt32, size: Int) throws {
    let file = try Data(contentsOf: URL(fileURLWithPath: path))
    func u16(_ at: Int) -> Int { Int(file[at]) | Int(file[at + 1]) << 8 }
    func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) | UInt32(u16(at + 2)) << 16 }
    func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xFF) } }
    // The central directory as the end record gives it (read raw: a delta does not mount alone).
    guard let eocd = (0...(file.count - 22)).reversed().first(where: { u32($0) == 0x0605_4b50 }) else { throw POSIXError(.EINVAL) }
    precondition(eocd < 20 || u32(eocd - 20) != 0x0706_4b50, "a test bundle without ZIP64 end records")
    let cdOffset = Int(u32(eocd + 16))
    let entryCount = u16(eocd + 10)
    struct Record {
        let name: String
        let localHeaderOffset: Int
        let method: Int
        let crc: UInt32
        let compressedSize: Int
        let size: Int
    }
    var records: [Record] = []
    var at = cdOffset
    for _ in 0..<entryCount {
        records.append(
            Record(
                name: String(decoding: file[(at + 46)..<(at + 46 + u16(at + 28))], as: UTF8.self), localHeaderOffset: Int(u32(at + 42)),
                method: u16(at + 10), crc: u32(at + 16), compressedSize: Int(u32(at + 20)), size: Int(u32(at + 24))))
        at += 46 + u16(at + 28) + u16(at + 30) + u16(at + 32)
    }
    guard let target = records.first(where: { $0.name == name }) else { throw POSIXError(.EINVAL) }
    let rewriteFrom = target.localHeaderOffset
    var out = Data(file[0..<rewriteFrom])
    var moved: [String: (offset: Int, method: Int, crc: UInt32, storedSize: Int, size: Int)] = [:]
    for entry in records.sorted(by: { $0.localHeaderOffset < $1.localHeaderOffset }) where entry.localHeaderOffset >= rewriteFrom {
        let local = entry.localHeaderOffset
        let start = out.count
        let nameBytes = Array(entry.name.utf8)
        if entry.name == name {
            var header = le32(0x0403_4b50) + le16(20) + le16(0) + le16(method) + le16(0) + le16(0x21) + le32(crc32)
            header += le32(UInt32(bytes.count)) + le32(UInt32(size)) + le16(nameBytes.count) + le16(0)
            out.append(contentsOf: header + nameBytes + bytes)
            moved[entry.name] = (start, method, crc32, bytes.count, size)
        } else {
            let end = local + 30 + u16(local + 26) + u16(local + 28) + entry.compressedSize
            out.append(file[local..<end])
            moved[entry.name] = (start, entry.method, entry.crc, entry.compressedSize, entry.size)
        }
    }
    let newCD = out.count
    var position = cdOffset
    for _ in 0..<entryCount {
        let length = 46 + u16(position + 28) + u16(position + 30) + u16(position + 32)
        var record = [UInt8](file[position..<(position + length)])
        let recordName = String(decoding: record[46..<(46 + u16(position + 28))], as: UTF8.self)
        if let change = moved[recordName] {
            record.replaceSubrange(42..<46, with: le32(UInt32(change.offset)))
            record.replaceSubrange(10..<12, with: le16(change.method))
            record.replaceSubrange(16..<20, with: le32(change.crc))
            record.replaceSubrange(20..<24, with: le32(UInt32(change.storedSize)))
            record.replaceSubrange(24..<28, with: le32(UInt32(change.size)))
        }
        out.append(contentsOf: record)
        position += length
    }
    precondition(position == eocd, "the end record follows the central directory")
    // Bodies lie where index.bin says: none may move.
    precondition(
        moved.keys.allSatisfy { $0 == name || !["b/", "p/", "bodies/"].contains(where: $0.hasPrefix) }, "only metadata entries follow the one rewritten")
    var end = [UInt8](file[position...])
    end.replaceSubrange(12..<16, with: le32(UInt32(out.count - newCD)))
    end.replaceSubrange(16..<20, with: le32(UInt32(newCD)))
    out.append(contentsOf: end)
    try out.write(to: URL(fileURLWithPath: path))
}
