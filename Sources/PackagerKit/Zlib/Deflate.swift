internal import CZlib
import OfflineBundle

/// Raw deflate (RFC 1951) through zlib, for ZIP method 8 entries.
enum RawDeflate {
    /// Deflates `input` in one go. Returns nil when the result would not be smaller than the input.
    static func deflate(_ input: UnsafeRawBufferPointer, level: Int32 = 6) throws -> [UInt8]? {
        var stream = z_stream()
        guard czlib_deflate_init_raw(&stream, level) == Z_OK else {
            throw PackagerError(.internal, "zlib could not start deflating")
        }
        defer { deflateEnd(&stream) }
        guard input.count < Int(UInt32.max) else { return try deflateLarge(input, stream: &stream) }
        let bound = Int(deflateBound(&stream, UInt(input.count)))
        var output = [UInt8](repeating: 0, count: bound)
        let produced: Int = output.withUnsafeMutableBytes { out in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
            stream.avail_in = UInt32(input.count)
            stream.next_out = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            stream.avail_out = UInt32(bound)
            let status = CZlib.deflate(&stream, Z_FINISH)
            return status == Z_STREAM_END ? bound - Int(stream.avail_out) : -1
        }
        guard produced >= 0 else { throw PackagerError(.internal, "zlib failed to deflate a body") }
        guard produced < input.count else { return nil }
        output.removeSubrange(produced...)
        return output
    }

    private static func deflateLarge(_ input: UnsafeRawBufferPointer, stream: inout z_stream) throws -> [UInt8]? {
        var output = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        while true {
            let n = min(input.count - offset, 1 << 30)
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset)
            stream.avail_in = UInt32(n)
            offset += n
            let flush = offset == input.count ? Z_FINISH : Z_NO_FLUSH
            var status: Int32 = Z_OK
            repeat {
                chunk.withUnsafeMutableBytes { out in
                    stream.next_out = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    stream.avail_out = UInt32(out.count)
                    status = CZlib.deflate(&stream, flush)
                    output.append(contentsOf: out[0..<(out.count - Int(stream.avail_out))])
                }
                guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                    throw PackagerError(.internal, "zlib failed to deflate a body")
                }
                if output.count >= input.count { return nil }
            } while stream.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END)
            if flush == Z_FINISH { break }
        }
        return output
    }
}
