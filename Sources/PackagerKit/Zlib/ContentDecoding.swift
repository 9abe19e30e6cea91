internal import CZlib

/// Decodes a body sent with `Content-Encoding: gzip` or `deflate`, for reading links out of it.
///
/// Used only when bodies are stored as sent (`content-encoding: encoded`);
/// output stops at `limit` bytes, so a compression bomb costs no more than that.
enum ContentDecoding {
    static func decode(_ input: [UInt8], encoding: String, limit: Int) -> [UInt8]? {
        let coding = encoding.lowercased().trimmingCharacters(in: .whitespaces)
        guard coding == "gzip" || coding == "x-gzip" || coding == "deflate" else { return nil }
        var stream = z_stream()
        // deflate in HTTP is a zlib stream; gzip has its own header; auto-detection takes both.
        guard czlib_inflate_init_auto(&stream) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        return input.withUnsafeBytes { source -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: source.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(source.count)
            while output.count < limit {
                let status = chunk.withUnsafeMutableBytes { buffer -> Int32 in
                    stream.next_out = buffer.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(buffer.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                output.append(contentsOf: chunk[0..<produced])
                if status == Z_STREAM_END { break }
                guard status == Z_OK, produced > 0 || stream.avail_in > 0 else { return output.isEmpty ? nil : output }
            }
            return output
        }
    }
}
