import Foundation

/// A deflate stream as stored, ready to be framed as gzip.
public struct DeflatedBody: Sendable {
    /// The raw deflate stream (RFC 1951).
    public var data: Data
    /// CRC-32 of the inflated bytes.
    public var crc32: UInt32
    /// Size of the inflated bytes.
    public var size: UInt64

    /// The 10-byte gzip member header that precedes ``data`` (no name, no timestamp, OS unknown).
    public static let gzipHeader = Data([0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff])

    /// The 8-byte gzip trailer that follows ``data``: CRC-32 and size modulo 2^32, little-endian.
    public var gzipTrailer: Data { Self.gzipTrailer(crc32: crc32, size: size) }

    /// The gzip trailer of a member whose inflated bytes have this CRC-32 and size.
    public static func gzipTrailer(crc32: UInt32, size: UInt64) -> Data {
        var trailer = Data()
        withUnsafeBytes(of: crc32.littleEndian) { trailer.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: size).littleEndian) { trailer.append(contentsOf: $0) }
        return trailer
    }

    /// The complete gzip member.
    public var gzip: Data { Self.gzipHeader + data + gzipTrailer }
}

/// Checks a body's local header against what the index says of it.
package enum LocalHeader {
    package static func check(
        _ bytes: [UInt8], sha256: [UInt8], version: UInt32, method: UInt16, crc32: UInt32, storedSize: UInt64, size: UInt64, headerLength: Int
    ) throws {
        let expectedName =
            version == 1 ? BundleFormat.v1BodyPrefix + hexString(sha256) : BundleFormat.bodyPrefix + hexString(sha256.prefix(IndexLayout.bodyNameDigits / 2))
        guard bytes.count >= ZipConstants.localHeaderSize, bytes.u32(0) == ZipConstants.localHeaderSignature else {
            throw BundleError(.corruptDirectory, "the local header is damaged (bad signature)", entry: expectedName)
        }
        let nameLength = Int(bytes.u16(26))
        let extraLength = Int(bytes.u16(28))
        guard ZipConstants.localHeaderSize + nameLength + extraLength == headerLength else {
            throw BundleError(.corruptDirectory, "the local header's length disagrees with the index", entry: expectedName)
        }
        // Version 2 names a body `b/` + a prefix of its digest's hex, 16 digits or more (§2.1); version 1 `bodies/` + all 64.
        let name = bytes[30..<(30 + nameLength)]
        let nameHolds =
            version == 1
            ? name.elementsEqual(expectedName.utf8)
            : (nameLength >= expectedName.utf8.count && nameLength <= 66 && name.starts(with: BundleFormat.bodyPrefix.utf8)
                && name.dropFirst(2).elementsEqual(hexString(sha256).utf8.prefix(nameLength - 2)))
        guard nameHolds else {
            throw BundleError(.corruptDirectory, "the local header names another entry", entry: expectedName)
        }
        guard bytes.u16(8) == method else {
            throw BundleError(.corruptDirectory, "the local header's compression method disagrees with the index", entry: expectedName)
        }
        let crc = bytes.u32(14)
        let c = bytes.u32(18)
        let u = bytes.u32(22)
        guard crc == crc32, c == 0xFFFF_FFFF || UInt64(c) == storedSize, u == 0xFFFF_FFFF || UInt64(u) == size else {
            throw BundleError(.corruptDirectory, "the local header's CRC or sizes disagree with the index", entry: expectedName)
        }
    }
}

/// The checks of a body's bytes against its index record (docs/FORMAT.md §8.2), for whole reads and streamed ones.
package enum BodyCheck {
    /// The CRC-32 of the stored stream (format 2).
    package static func storedCRC(_ crc: UInt32, of record: IndexBodyRecord, name: String) throws {
        guard crc == record.storedCRC32 else {
            throw BundleError(
                .corruptBody, String(format: "stored stream CRC-32 is %08x, the index records %08x: the body is damaged", crc, record.storedCRC32),
                entry: name)
        }
    }

    /// The CRC-32 of the inflated body (step 5).
    package static func contentCRC(_ crc: UInt32, of record: IndexBodyRecord, name: String) throws {
        guard crc == record.crc32 else {
            throw BundleError(.corruptBody, String(format: "body CRC-32 is %08x, the index records %08x: the body is damaged", crc, record.crc32), entry: name)
        }
    }

    /// The SHA-256 of the inflated body (step 6).
    package static func digest(_ digest: [UInt8], of record: IndexBodyRecord, name: String) throws {
        guard digest == record.sha256 else {
            throw BundleError(.corruptBody, "body SHA-256 is \(hexString(digest)): the body is damaged or was replaced", entry: name)
        }
    }
}
