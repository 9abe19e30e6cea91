internal import CZlib
import OfflineBundle

/// A raw deflate stream (zlib, levels up to 9) written into the overflow file as it is made, 64 KiB at a time: what is
/// too large to deflate in one piece with libdeflate (a large manifest, a large index) is never held deflated, nor
/// joined to be deflated. zlib's stream is the same whatever pieces it is fed in, so a delta makes it again (§12.1's
/// level bytes 0x81 to 0x89).
final class SpoolDeflater {
    /// What is deflated, for errors: `the manifest`, `the index`.
    private let what: String
    private let spool: OverflowFile
    private let stream: UnsafeMutablePointer<z_stream>
    private var output = [UInt8](repeating: 0, count: 64 << 10)
    /// Where the stream starts in the overflow file (nil until its first bytes are written).
    private(set) var start: UInt64?
    /// The stream's bytes written so far.
    private(set) var size: UInt64 = 0

    init(level: Int, spool: OverflowFile, what: String) throws {
        self.what = what
        self.spool = spool
        // zlib's stream is made before it is stored: an init that throws leaves the object unfinished, so `deinit`
        // does not end a stream that never started.
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard czlib_deflate_init_raw(stream, Int32(min(level, 9))) == Z_OK else {
            stream.deallocate()
            throw PackagerError(.io, "cannot start deflating \(what)")
        }
        self.stream = stream
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// Feeds `input` to the stream and writes what it gives out; with `finish`, ends the stream.
    func feed(_ input: UnsafeRawBufferPointer, finish: Bool) throws {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
        stream.pointee.avail_in = UInt32(input.count)
        defer { stream.pointee.next_in = nil }
        while true {
            let (status, produced) = output.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = UInt32(out.count)
                let status = deflate(stream, finish ? Z_FINISH : Z_NO_FLUSH)
                return (status, out.count - Int(stream.pointee.avail_out))
            }
            guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                throw PackagerError(.io, "deflating \(what) failed (zlib \(status))")
            }
            if produced > 0 {
                let offset = try spool.append(Array(output[0..<produced]))
                if start == nil { start = offset }
                // Nothing else appends while the stream is written: its pieces follow each other.
                guard offset == start! + size else { throw PackagerError(.io, "the deflate stream of \(what) was interleaved") }
                size += UInt64(produced)
            }
            if finish ? status == Z_STREAM_END : (stream.pointee.avail_in == 0 && produced < output.count) { break }
        }
    }
}
