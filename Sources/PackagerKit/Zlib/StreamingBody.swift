internal import CZlib
import Crypto
import Foundation
import OfflineBundle

/// A large body read from its file in chunks: hashed, checksummed and (when its type is worth it) deflated as it is
/// read, so memory is a chunk and the compressed stream, never the body. The writer maps smaller bodies whole and
/// deflates them with libdeflate, which needs the whole input; past ``threshold`` a body could be a decompression
/// bomb's output (a 4.5 MB download that decodes to 256 MiB), and mapping it would cost its size in resident memory.
///
/// The stream is zlib's raw deflate at the writer's level (at most 9, zlib's highest), with the default 32 KiB window:
/// the same bytes in give the same stream out, so bundles stay reproducible.
enum StreamingBody {
    /// Bodies from files at least this large are read in chunks.
    static let threshold = 16 << 20
    static let chunkSize = 1 << 20

    struct Result {
        var digest: BodyDigest
        var crc32: UInt32
        var size: UInt64
        /// The raw deflate stream, when the body was deflated and came out smaller; nil to store it as it is.
        var deflated: [UInt8]?
    }

    /// Reads the regular file open at `fd` (`size` bytes, as `fstat` said) to its end.
    static func read(_ fd: Int32, size: Int, path: String, deflateAt level: Int?) throws -> Result {
        var sha = SHA256()
        var crc: UInt32 = 0
        var stream = z_stream()
        var deflating = false
        if let level {
            guard czlib_deflate_init_raw(&stream, Int32(min(max(level, 1), 9))) == Z_OK else {
                throw PackagerError(.io, "zlib could not start deflating \(path)", subject: path)
            }
            deflating = true
        }
        defer { if level != nil { deflateEnd(&stream) } }
        var output = [UInt8]()
        var input = [UInt8](repeating: 0, count: chunkSize)
        var scratch = [UInt8](repeating: 0, count: chunkSize)
        var done = 0
        /// Deflates `count` bytes of `input` (none with `Z_FINISH`), appending what comes out; false once the stream is
        /// no smaller than the body, which is then stored.
        func deflate(_ count: Int, flush: Int32) throws -> Bool {
            try input.withUnsafeMutableBytes { inBuffer in
                try scratch.withUnsafeMutableBytes { outBuffer in
                    stream.next_in = inBuffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                    stream.avail_in = UInt32(count)
                    while true {
                        stream.next_out = outBuffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
                        stream.avail_out = UInt32(outBuffer.count)
                        let status = CZlib.deflate(&stream, flush)
                        guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                            throw PackagerError(.io, "zlib failed deflating \(path) (\(status))", subject: path)
                        }
                        output.append(contentsOf: UnsafeRawBufferPointer(rebasing: outBuffer[0..<(outBuffer.count - Int(stream.avail_out))]))
                        if flush == Z_FINISH ? status == Z_STREAM_END : (stream.avail_in == 0 && stream.avail_out > 0) { break }
                    }
                }
            }
            return output.count < size
        }
        while done < size {
            let want = min(chunkSize, size - done)
            let got = input.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(done)) }
            guard got > 0 else {
                throw PackagerError(.io, "\(path) changed while it was read (it ends at \(done) of \(size) bytes)", subject: path)
            }
            input.withUnsafeBytes { raw in
                let chunk = UnsafeRawBufferPointer(rebasing: raw[0..<got])
                sha.update(bufferPointer: chunk)
                crc = FastCRC32.checksum(chunk, continuing: crc)
            }
            if deflating, try !deflate(got, flush: Z_NO_FLUSH) {
                deflating = false
                output = []
            }
            done += got
        }
        if deflating, try !deflate(0, flush: Z_FINISH) { deflating = false }
        return Result(digest: BodyDigest(sha.finalize()), crc32: crc, size: UInt64(size), deflated: deflating ? output : nil)
    }
}
