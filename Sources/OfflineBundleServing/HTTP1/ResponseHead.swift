import HTTPTypes
import NIOCore
import NIOHTTP1

/// HTTP/1.1 response heads, written as bytes.
enum ResponseHead {
    /// The status line and a line per field (Age left out: it changes per request), plus `Server` when given.
    static func fixed(status: Int, fields: HTTPFields, serverName: String?, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 512)
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(status))
        buffer.writeStaticString(" ")
        buffer.writeString(HTTPResponseStatus(statusCode: status).reasonPhrase)
        buffer.writeStaticString("\r\n")
        for field in fields where field.name != .age { line(&buffer, field.name.canonicalName, field.value) }
        if let serverName { line(&buffer, "server", serverName) }
        return buffer
    }

    /// `name: value` and CRLF. Field values from `HTTPFields` are legal already; any other control byte (a CR or LF
    /// from a route's prefix, say) is written as a space, so no value can end the head or add a field.
    static func line(_ buffer: inout ByteBuffer, _ name: String, _ value: String) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        buffer.writeString(safe(value))
        buffer.writeStaticString("\r\n")
    }

    /// `value`, with any control byte but a tab written as a space.
    static func safe(_ value: String) -> String {
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) { return value }
        return String(decoding: value.utf8.map { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 ? $0 : 0x20 }, as: UTF8.self)
    }
}
