/// The bytes of one record in a scratch file: integers little-endian, strings as a 32-bit length and their UTF-8
/// bytes. The crawl's entries and its queue are kept this way.
struct ScratchRecordWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func integer<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }

    mutating func string(_ value: String) {
        integer(UInt32(value.utf8.count))
        bytes += value.utf8
    }

    /// Writes a 32-bit placeholder for a length; ``endLength(_:)`` fills it in with the bytes written after it.
    mutating func beginLength() -> Int {
        integer(UInt32(0))
        return bytes.count
    }

    mutating func endLength(_ start: Int) {
        withUnsafeBytes(of: UInt32(bytes.count - start).littleEndian) { bytes.replaceSubrange((start - 4)..<start, with: $0) }
    }
}

/// Reads what a ``ScratchRecordWriter`` wrote; each read is nil past the end of the bytes.
struct ScratchRecordReader {
    let bytes: [UInt8]
    private(set) var at: Int

    init(_ bytes: [UInt8], at start: Int = 0) {
        self.bytes = bytes
        at = start
    }

    var atEnd: Bool { at == bytes.count }

    mutating func integer<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        guard at + MemoryLayout<T>.size <= bytes.count else { return nil }
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes[at..<(at + MemoryLayout<T>.size)]) }
        at += MemoryLayout<T>.size
        return T(littleEndian: value)
    }

    mutating func string() -> String? {
        guard let length = integer(UInt32.self), at + Int(length) <= bytes.count else { return nil }
        defer { at += Int(length) }
        return String(decoding: bytes[at..<(at + Int(length))], as: UTF8.self)
    }
}
