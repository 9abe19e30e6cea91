internal import CLibDeflate

/// Raw deflate (RFC 1951) for ZIP method 8 entries, through libdeflate.
///
/// libdeflate compresses a whole buffer at once, which is how the writer holds a body anyway (mapped or in memory),
/// and it is faster than zlib at the same size: on Debian's Python HTML its level 6 writes zlib level 6's size in half
/// the time (scripts/bench-deflate.sh, docs/BENCHMARKS.md). A compressor holds its tables, so each worker thread
/// keeps one.
final class Deflater {
    private let compressor: OpaquePointer
    /// Where streams are compressed before they are copied out at their own size: an array made with the input's
    /// capacity would keep that capacity for as long as the compressed body is held (a 290 KB page deflated to
    /// 43 KB would hold 290 KB).
    private var scratch: [UInt8] = []

    /// A compressor at `level`, 1 (fastest) to 12 (smallest).
    init(level: Int) throws {
        guard (1...12).contains(level), let compressor = libdeflate_alloc_compressor(Int32(level)) else {
            throw PackagerError(.invalidInput, "compression level \(level) is not between 1 and 12")
        }
        self.compressor = compressor
    }

    deinit { libdeflate_free_compressor(compressor) }

    /// Deflates `input`. Returns nil when the result would not be smaller than the input (the body is then stored).
    ///
    /// - Parameter once: the deflater deflates nothing after this: the stream is its buffer, not a copy of it (a large
    ///   index's deflated bytes are then held once).
    func deflate(_ input: UnsafeRawBufferPointer, once: Bool = false) -> [UInt8]? {
        guard input.count > 1, let base = input.baseAddress else { return nil }
        // An output buffer one byte short of the input: libdeflate answers 0 when the stream does not fit. It also gives
        // up on a stream that would end within its slack at the buffer's end, so a stream smaller by a few bytes may be
        // refused too: the body is then stored. The bundles' bytes depend on this call (docs/FORMAT.md §3.2).
        let capacity = input.count - 1
        // Not zero-filled: a large scratch is pages the kernel maps only once the compressor writes them, so a body that
        // deflates to little (a decompression bomb's 512 MiB of near-zeros) costs what its stream takes, not its size.
        if scratch.count < capacity {
            scratch = []
            scratch = [UInt8](unsafeUninitializedCapacity: max(capacity, 64 << 10)) { _, count in count = max(capacity, 64 << 10) }
        }
        let compressor = self.compressor
        let written = scratch.withUnsafeMutableBytes { libdeflate_deflate_compress(compressor, base, input.count, $0.baseAddress, capacity) }
        guard written > 0 else { return nil }
        if once {
            // Pages past the stream were never written, so never mapped: the buffer costs what the stream takes.
            var output: [UInt8] = []
            swap(&output, &scratch)
            output.removeSubrange(written...)
            return output
        }
        let output = Array(scratch[0..<written])
        // A large body's scratch is not kept for the small ones that follow.
        if scratch.count > 4 << 20 { scratch = [] }
        return output
    }
}

/// One-off raw deflate, for metadata entries and tests.
enum RawDeflate {
    /// Deflates `input` at `level`. Returns nil when the result would not be smaller than the input.
    static func deflate(_ input: UnsafeRawBufferPointer, level: Int32 = Int32(BundleWriter.defaultCompressionLevel)) throws -> [UInt8]? {
        try Deflater(level: Int(level)).deflate(input, once: true)
    }
}

/// CRC-32 (the ZIP polynomial) through libdeflate, for what the build side writes and copies (bodies, the index, the
/// manifest): it folds with carry-less multiplication where the CPU has it, a fraction of the time of the zlib 1.2
/// table loop the runtime uses (``CRC32``), and gives the same values, chained the same way (`continuing:`).
enum FastCRC32 {
    static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return libdeflate_crc32(crc, base, bytes.count)
    }

    static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
