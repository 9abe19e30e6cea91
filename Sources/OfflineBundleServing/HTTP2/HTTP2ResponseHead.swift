import Foundation
import NIOCore
import NIOHPACK

/// The HTTP/1.1 response heads ``BundleChannelHandler`` writes, read back as HTTP/2 fields.
enum HTTP2ResponseHead {
    /// The fields whose values change from answer to answer: sent without indexing (RFC 7541 §6.2.2), so they never
    /// push the repeating ones out of the connection's HPACK table. (`date` is indexed: it is the same for a second.)
    private static let volatile: Set<String> = ["etag", "content-length", "last-modified", "age", "expires", "content-range", "location"]

    /// The index of the byte after the head's blank line (CR LF CR LF), if it came.
    static func endOfHead(_ bytes: ByteBuffer) -> Int? {
        bytes.withUnsafeReadableBytes { raw -> Int? in
            guard raw.count >= 4 else { return nil }
            var index = 3
            while index < raw.count {
                if raw[index] == 0x0A && raw[index - 1] == 0x0D && raw[index - 2] == 0x0A && raw[index - 3] == 0x0D { return index + 1 }
                index += 1
            }
            return nil
        }
    }

    /// The `:status` and fields of a head the handler wrote (names lowercased, HTTP/1.1's connection fields dropped),
    /// its status, and its Content-Length (0 when it has none).
    static func parse(_ head: ByteBuffer) -> (HPACKHeaders, Int, Int)? {
        head.withUnsafeReadableBytes { raw -> (HPACKHeaders, Int, Int)? in
            let bytes = raw.bindMemory(to: UInt8.self)
            // "HTTP/1.1 200 …"
            guard bytes.count >= 12 else { return nil }
            var code = 0
            for index in 9..<12 {
                guard (0x30...0x39).contains(bytes[index]) else { return nil }
                code = code * 10 + Int(bytes[index] - 0x30)
            }
            var fields = HPACKHeaders()
            fields.reserveCapacity(12)
            fields.add(name: ":status", value: String(code))
            var length = 0
            var start = 0
            while start < bytes.count, bytes[start] != 0x0A { start += 1 }
            start += 1
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != 0x0A { end += 1 }
                let line = UnsafeBufferPointer(rebasing: bytes[start..<(end > start && bytes[end - 1] == 0x0D ? end - 1 : end)])
                start = end + 1
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                var valueStart = colon + 1
                while valueStart < line.count, line[valueStart] == 0x20 { valueStart += 1 }
                let nameBytes = UnsafeBufferPointer(rebasing: line[..<colon])
                // HTTP/2 field names are lowercase (RFC 9113 §8.2.1); the handler writes them so, and this keeps it true.
                let name =
                    nameBytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
                    ? String(decoding: nameBytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                    : String(decoding: nameBytes, as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(rebasing: line[valueStart...]), as: UTF8.self)
                switch name {
                case "connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection": continue
                case "content-length": length = Int(value) ?? 0
                default: break
                }
                fields.add(name: name, value: value, indexing: volatile.contains(name) ? .nonIndexable : .indexable)
            }
            return (fields, code, length)
        }
    }
}
