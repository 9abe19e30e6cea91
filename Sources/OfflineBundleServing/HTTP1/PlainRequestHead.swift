// A request head read straight off a connection's bytes, strictly: what the front of an HTTP/1.1 connection needs to
// answer a plain GET from the response cache without NIO's decoder (CachedAnswerFront).

/// One HTTP/1.1 request head at the start of some bytes, read by a grammar narrower than RFC 9112's: a request this
/// reading accepts is read the same by NIO's decoder (llhttp), and anything it does not accept goes to that decoder.
///
/// Accepted: a method of token characters, a target of visible ASCII starting with `/`, `HTTP/1.1` or `HTTP/1.0`, and
/// header fields of a token name, a colon, optional spaces and a value of visible ASCII, spaces and tabs, every line
/// ended by CRLF.
struct PlainRequestHead {
    /// What the bytes start with.
    enum Reading {
        /// No blank line yet: the head goes on in bytes not yet received.
        case incomplete
        /// A head this grammar does not read, or one followed by a body (Content-Length, Transfer-Encoding) or a change
        /// of protocol (Upgrade): the connection's bytes are for NIO's decoder from here on.
        case other
        /// A whole request without a body, `length` bytes long.
        case request(PlainRequestHead)
    }

    /// The bytes of the head, up to and with its blank line.
    var length = 0
    /// GET, in HTTP/1.1.
    var isGet11 = false
    /// Where the target, the first Host value and the Accept-Encoding value lie in the bytes.
    var target = 0..<0
    var host: Range<Int>?
    var acceptEncoding: Range<Int>?
    /// Fields that make an answer other than the kept one (a second Host or Accept-Encoding, a condition, a range) or
    /// that ask for something of the connection (Connection other than `keep-alive`, Expect).
    var unusual = false
    private var hosts = 0
    private var encodings = 0

    /// Whether a kept answer may answer it as it stands: a GET in HTTP/1.1 with one Host, at most one Accept-Encoding,
    /// and no field that changes the answer or the connection (the response cache's plain requests).
    var answerable: Bool { isGet11 && hosts == 1 && encodings <= 1 && !unusual }

    /// The longest head kept while it is incomplete: past it, the bytes go to NIO's decoder, whose own limits apply.
    static let maxLength = 8 << 10

    /// Reads the head `bytes` start with; `searched` bytes are known to hold no blank line yet (from an earlier call on
    /// the same head), and are not searched again.
    static func read(_ bytes: UnsafeRawBufferPointer, searched: Int = 0) -> Reading {
        // The first line feed not after a carriage return ends the search: the decoder may read a bare one as the end of
        // a line, where this reading would wait for more.
        var index = max(0, searched - 3)
        let count = bytes.count
        while index < count {
            if bytes[index] == 10 {
                guard index > 0, bytes[index - 1] == 13 else { return .other }
                if index >= 3, bytes[index - 2] == 10, bytes[index - 3] == 13 {
                    var head = PlainRequestHead()
                    head.length = index + 1
                    return head.parse(bytes[..<(index + 1)]) ? .request(head) : .other
                }
            }
            index += 1
        }
        return count > maxLength ? .other : .incomplete
    }

    /// Reads the head in `bytes` (which ends with CRLF CRLF); false where the grammar does not accept it, or where a body
    /// or an upgrade follows it.
    private mutating func parse(_ bytes: Slice<UnsafeRawBufferPointer>) -> Bool {
        var index = bytes.startIndex
        let end = bytes.endIndex
        // The method, a token, then one space.
        let methodStart = index
        while index < end, Self.isToken(bytes[index]) { index += 1 }
        guard index > methodStart, index < end, bytes[index] == 0x20 else { return false }
        let isGet = index - methodStart == 3 && bytes[methodStart] == 0x47 && bytes[methodStart + 1] == 0x45 && bytes[methodStart + 2] == 0x54
        index += 1
        // The target, in origin form.
        let targetStart = index
        guard index < end, bytes[index] == 0x2F else { return false }
        while index < end, bytes[index] > 0x20, bytes[index] < 0x7F { index += 1 }
        target = targetStart..<index
        guard index < end, bytes[index] == 0x20 else { return false }
        index += 1
        // HTTP/1.1 or HTTP/1.0, then CRLF.
        guard end - index >= 10 else { return false }
        guard bytes[index] == 0x48, bytes[index + 1] == 0x54, bytes[index + 2] == 0x54, bytes[index + 3] == 0x50, bytes[index + 4] == 0x2F,
            bytes[index + 5] == 0x31, bytes[index + 6] == 0x2E
        else { return false }
        let minor = bytes[index + 7]
        guard minor == 0x31 || minor == 0x30, bytes[index + 8] == 13, bytes[index + 9] == 10 else { return false }
        isGet11 = isGet && minor == 0x31
        index += 10
        // Fields, up to the blank line.
        while true {
            guard index + 1 < end else { return false }
            if bytes[index] == 13 && bytes[index + 1] == 10 { break }
            let nameStart = index
            while index < end, Self.isToken(bytes[index]) { index += 1 }
            guard index > nameStart, index < end, bytes[index] == 0x3A else { return false }
            let name = nameStart..<index
            index += 1
            while index < end, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 }
            let valueStart = index
            while index < end, bytes[index] >= 0x20 && bytes[index] < 0x7F || bytes[index] == 0x09 { index += 1 }
            guard index + 1 < end, bytes[index] == 13, bytes[index + 1] == 10 else { return false }
            let value = valueStart..<index
            index += 2
            guard take(name: name, value: value, in: bytes) else { return false }
        }
        return true
    }

    /// Takes one field into account; false for one after which the bytes are not another head (a body, an upgrade).
    private mutating func take(name: Range<Int>, value: Range<Int>, in bytes: Slice<UnsafeRawBufferPointer>) -> Bool {
        func named(_ lowercase: StaticString) -> Bool {
            guard name.count == lowercase.utf8CodeUnitCount else { return false }
            return lowercase.withUTF8Buffer { wanted in
                for offset in 0..<name.count {
                    let byte = bytes[name.lowerBound + offset]
                    if (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) != wanted[offset] { return false }
                }
                return true
            }
        }
        switch name.count {
        case 4 where named("host"):
            if hosts == 0 { host = value }
            hosts += 1
        case 15 where named("accept-encoding"):
            acceptEncoding = value
            encodings += 1
        case 14 where named("content-length"): return false
        case 17 where named("transfer-encoding"): return false
        case 7 where named("upgrade"): return false
        case 5 where named("range"): unusual = true
        case 13 where named("if-none-match"): unusual = true
        case 17 where named("if-modified-since"): unusual = true
        // `keep-alive` is what HTTP/1.1 does anyway (browsers send it all the same); any other option asks for
        // something of the connection.
        case 10 where named("connection"): if !Self.isKeepAlive(bytes[value]) { unusual = true }
        case 6 where named("expect"): unusual = true
        default: break
        }
        return true
    }

    /// Whether `value` is `keep-alive`, in any case.
    static func isKeepAlive(_ value: Slice<UnsafeRawBufferPointer>) -> Bool {
        let wanted: StaticString = "keep-alive"
        guard value.count == wanted.utf8CodeUnitCount else { return false }
        return wanted.withUTF8Buffer { wanted in
            zip(value, wanted).allSatisfy { byte, want in (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == want }
        }
    }

    /// RFC 9110 §5.6.2's tchar.
    static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }
}
