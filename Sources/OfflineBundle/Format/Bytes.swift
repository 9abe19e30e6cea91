// Little-endian byte helpers shared by the ZIP and index code.

extension UnsafeRawBufferPointer {
    @inline(__always)
    func u16(_ offset: Int) -> UInt16 { UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self)) }
    @inline(__always)
    func u32(_ offset: Int) -> UInt32 { UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    @inline(__always)
    func u64(_ offset: Int) -> UInt64 { UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
}

extension Array where Element == UInt8 {
    @inline(__always)
    package mutating func appendLE(_ value: UInt16) { Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) } }
    @inline(__always)
    package mutating func appendLE(_ value: UInt32) { Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) } }
    @inline(__always)
    package mutating func appendLE(_ value: UInt64) { Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) } }

    package func u16(_ offset: Int) -> UInt16 { withUnsafeBytes { $0.u16(offset) } }
    package func u32(_ offset: Int) -> UInt32 { withUnsafeBytes { $0.u32(offset) } }
    package func u64(_ offset: Int) -> UInt64 { withUnsafeBytes { $0.u64(offset) } }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// Lowercase hexadecimal spelling of bytes.
package func hexString<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Lowercase hexadecimal of a byte array (the common case, without generic dispatch).
package func hexString(_ bytes: [UInt8]) -> String {
    String(unsafeUninitializedCapacity: bytes.count * 2) { out in
        for (i, b) in bytes.enumerated() {
            out[2 * i] = hexDigits[Int(b >> 4)]
            out[2 * i + 1] = hexDigits[Int(b & 0xF)]
        }
        return bytes.count * 2
    }
}

/// Parses lowercase or uppercase hexadecimal; nil when the text is not hex of even length.
package func bytesFromHex(_ text: String) -> [UInt8]? {
    let utf8 = Array(text.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(utf8.count / 2)
    var i = 0
    while i < utf8.count {
        guard let hi = hexValue(utf8[i]), let lo = hexValue(utf8[i + 1]) else { return nil }
        out.append(hi << 4 | lo)
        i += 2
    }
    return out
}

@inline(__always)
package func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}
