import NIOCore
import NIOHPACK

/// HTTP/2's frames as bytes (RFC 9113 §4, §6): the frame header read and written, and the connection's own frames
/// (SETTINGS, PING, GOAWAY, RST_STREAM, WINDOW_UPDATE) written, for ``HTTP2Connection``.
enum HTTP2Wire {
    /// What a client sends first (RFC 9113 §3.4).
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Frame types (RFC 9113 §6).
    enum FrameType {
        static let data: UInt8 = 0x0
        static let headers: UInt8 = 0x1
        static let priority: UInt8 = 0x2
        static let rstStream: UInt8 = 0x3
        static let settings: UInt8 = 0x4
        static let pushPromise: UInt8 = 0x5
        static let ping: UInt8 = 0x6
        static let goAway: UInt8 = 0x7
        static let windowUpdate: UInt8 = 0x8
        static let continuation: UInt8 = 0x9
    }

    /// Frame flags.
    enum Flag {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    /// Settings' identifiers (RFC 9113 §6.5.2).
    enum Setting {
        static let headerTableSize: UInt16 = 0x1
        static let enablePush: UInt16 = 0x2
        static let maxConcurrentStreams: UInt16 = 0x3
        static let initialWindowSize: UInt16 = 0x4
        static let maxFrameSize: UInt16 = 0x5
        static let maxHeaderListSize: UInt16 = 0x6
    }

    /// The largest window either side may have (RFC 9113 §6.9.1).
    static let maxWindow = Int(Int32.max)
    /// The frame size every endpoint takes until told more (RFC 9113 §4.2).
    static let defaultMaxFrameSize = 16_384
    /// The initial window of a stream and of the connection (RFC 9113 §6.9.2).
    static let defaultWindow = 65_535

    /// A frame's first nine bytes.
    struct FrameHeader: Equatable {
        var length: Int
        var type: UInt8
        var flags: UInt8
        /// The stream, its reserved bit cleared (RFC 9113 §4.1: ignored when received).
        var stream: UInt32

        func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
    }

    /// The header at the start of `bytes`, nil when fewer than nine bytes are there.
    static func header(at bytes: ByteBuffer) -> FrameHeader? {
        guard bytes.readableBytes >= 9 else { return nil }
        let at = bytes.readerIndex
        let length = Int(bytes.getInteger(at: at, as: UInt16.self)!) << 8 | Int(bytes.getInteger(at: at + 2, as: UInt8.self)!)
        let type = bytes.getInteger(at: at + 3, as: UInt8.self)!
        let flags = bytes.getInteger(at: at + 4, as: UInt8.self)!
        let stream = bytes.getInteger(at: at + 5, as: UInt32.self)! & 0x7fff_ffff
        return FrameHeader(length: length, type: type, flags: flags, stream: stream)
    }

    /// Writes a frame header.
    static func writeHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32, into buffer: inout ByteBuffer) {
        // The length's 24 bits and the type in one integer; the flags and the stream in the first five bytes of another,
        // whose last three are taken back.
        buffer.writeInteger(UInt32(truncatingIfNeeded: length) << 8 | UInt32(type))
        buffer.writeInteger(UInt64(flags) << 56 | UInt64(stream & 0x7fff_ffff) << 24)
        buffer.moveWriterIndex(to: buffer.writerIndex - 3)
    }

    /// Sets the length of the frame whose header starts at `start`, its payload being what follows to the writer index.
    static func setLength(ofFrameAt start: Int, in buffer: inout ByteBuffer) {
        let length = buffer.writerIndex - start - 9
        buffer.setInteger(UInt16(truncatingIfNeeded: length >> 8), at: start)
        buffer.setInteger(UInt8(truncatingIfNeeded: length), at: start + 2)
    }

    static func writeSettings(_ settings: [(UInt16, UInt32)], into buffer: inout ByteBuffer) {
        writeHeader(length: settings.count * 6, type: FrameType.settings, flags: 0, stream: 0, into: &buffer)
        for (id, value) in settings {
            buffer.writeInteger(id)
            buffer.writeInteger(value)
        }
    }

    static func writeSettingsAck(into buffer: inout ByteBuffer) {
        writeHeader(length: 0, type: FrameType.settings, flags: Flag.ack, stream: 0, into: &buffer)
    }

    static func writePingAck(_ opaque: UInt64, into buffer: inout ByteBuffer) {
        writeHeader(length: 8, type: FrameType.ping, flags: Flag.ack, stream: 0, into: &buffer)
        buffer.writeInteger(opaque)
    }

    static func writeGoAway(lastStream: UInt32, code: HTTP2ErrorCodeValue, into buffer: inout ByteBuffer) {
        writeHeader(length: 8, type: FrameType.goAway, flags: 0, stream: 0, into: &buffer)
        buffer.writeInteger(lastStream & 0x7fff_ffff)
        buffer.writeInteger(code.rawValue)
    }

    static func writeRstStream(_ stream: UInt32, code: HTTP2ErrorCodeValue, into buffer: inout ByteBuffer) {
        writeHeader(length: 4, type: FrameType.rstStream, flags: 0, stream: stream, into: &buffer)
        buffer.writeInteger(code.rawValue)
    }

    static func writeWindowUpdate(_ stream: UInt32, increment: Int, into buffer: inout ByteBuffer) {
        writeHeader(length: 4, type: FrameType.windowUpdate, flags: 0, stream: stream, into: &buffer)
        buffer.writeInteger(UInt32(increment) & 0x7fff_ffff)
    }
}

/// HTTP/2's error codes (RFC 9113 §7), as they go on the wire.
struct HTTP2ErrorCodeValue: Equatable, Sendable {
    var rawValue: UInt32

    static let noError = Self(rawValue: 0x0)
    static let protocolError = Self(rawValue: 0x1)
    static let internalError = Self(rawValue: 0x2)
    static let flowControlError = Self(rawValue: 0x3)
    static let streamClosed = Self(rawValue: 0x5)
    static let frameSizeError = Self(rawValue: 0x6)
    static let refusedStream = Self(rawValue: 0x7)
    static let cancel = Self(rawValue: 0x8)
    static let compressionError = Self(rawValue: 0x9)
    static let enhanceYourCalm = Self(rawValue: 0xb)
}

/// Header blocks as an HPACK encoder that never uses its dynamic table writes them (RFC 7541): a field the static
/// table holds whole is its index, every other a literal without indexing (never indexed, when the field says so), its
/// name the static table's index when it holds the name, no Huffman coding. So a block depends on nothing sent before,
/// and a kept answer's block is the same bytes on every connection; the connection's first block, and the first after
/// the client changes its table's size, starts with a size update to 0 (§6.3), so the client's table stays empty.
enum HPACKLiterals {
    /// The dynamic table size update to 0 (RFC 7541 §6.3).
    static let tableSizeUpdateToZero: UInt8 = 0x20

    /// Writes `headers` as a header block.
    static func write(_ headers: HPACKHeaders, tableSizeUpdate: Bool, into buffer: inout ByteBuffer) {
        if tableSizeUpdate { buffer.writeInteger(tableSizeUpdateToZero) }
        for (name, value, indexing) in headers { write(name: name, value: value, neverIndexed: indexing == .neverIndexed, into: &buffer) }
    }

    /// The static table's index of `date` and of `age`.
    static let dateIndex = 33
    static let ageIndex = 21

    /// Writes a field whose name is the static table's `index`, as a literal without indexing.
    static func write(nameIndex index: Int, value: String, into buffer: inout ByteBuffer) {
        writeInteger(index, prefixBits: 4, flags: 0, into: &buffer)
        writeString(value, into: &buffer)
    }

    /// Writes one field.
    static func write(name: String, value: String, neverIndexed: Bool = false, into buffer: inout ByteBuffer) {
        if name == ":status", let index = statusIndex[value] {
            buffer.writeInteger(UInt8(0x80 | index))
            return
        }
        let prefix: UInt8 = neverIndexed ? 0x10 : 0x00
        if let index = nameIndex[name] {
            writeInteger(index, prefixBits: 4, flags: prefix, into: &buffer)
        } else {
            buffer.writeInteger(prefix)
            writeString(name, into: &buffer)
        }
        writeString(value, into: &buffer)
    }

    /// An integer with an N-bit prefix (RFC 7541 §5.1).
    static func writeInteger(_ value: Int, prefixBits: Int, flags: UInt8, into buffer: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            buffer.writeInteger(flags | UInt8(value))
            return
        }
        buffer.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }

    /// A string literal, not Huffman-coded (RFC 7541 §5.2).
    static func writeString(_ text: String, into buffer: inout ByteBuffer) {
        var text = text
        text.withUTF8 { bytes in
            writeInteger(bytes.count, prefixBits: 7, flags: 0, into: &buffer)
            buffer.writeBytes(bytes)
        }
    }

    /// The `:status` values the static table holds whole (RFC 7541 Appendix A).
    private static let statusIndex: [String: Int] = ["200": 8, "204": 9, "206": 10, "304": 11, "400": 12, "404": 13, "500": 14]

    /// The static table's names (RFC 7541 Appendix A), each at its first index.
    private static let nameIndex: [String: Int] = {
        let names = [
            ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status", ":status", ":status", ":status",
            ":status", ":status", ":status", "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
            "access-control-allow-origin", "age", "allow", "authorization", "cache-control", "content-disposition",
            "content-encoding", "content-language", "content-length", "content-location", "content-range", "content-type", "cookie",
            "date", "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
            "if-unmodified-since", "last-modified", "link", "location", "max-forwards", "proxy-authenticate", "proxy-authorization",
            "range", "referer", "refresh", "retry-after", "server", "set-cookie", "strict-transport-security", "transfer-encoding",
            "user-agent", "vary", "via", "www-authenticate",
        ]
        var index: [String: Int] = [:]
        for (offset, name) in names.enumerated() where index[name] == nil { index[name] = offset + 1 }
        return index
    }()
}
