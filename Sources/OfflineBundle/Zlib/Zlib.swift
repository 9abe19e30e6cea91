internal import CZlib

/// CRC-32 (the ZIP and gzip polynomial), through zlib.
package enum CRC32 {
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        var value = UInt(crc)
        var pointer = base.assumingMemoryBound(to: UInt8.self)
        var remaining = bytes.count
        // zlib's length parameter is 32-bit; feed large buffers in slices.
        while remaining > 0 {
            let n = min(remaining, 1 << 30)
            value = crc32(value, pointer, UInt32(n))
            pointer += n
            remaining -= n
        }
        return UInt32(truncatingIfNeeded: value)
    }

    package static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}

/// Inflates a raw deflate stream whose inflated size is known in advance.
package enum RawInflate {
    /// Inflates `input` into exactly `expectedSize` bytes.
    ///
    /// Throws when the stream is damaged, when it would produce more or fewer
    /// bytes than `expectedSize`, or when input is left over: a body whose
    /// recorded sizes lie is refused instead of being cut or padded. Memory
    /// grows with the bytes actually inflated, never with the size the file
    /// claims: a header that claims 4 GiB over a few bytes of stream costs a
    /// few kilobytes before it is refused.
    package static func inflate(_ input: UnsafeRawBufferPointer, expectedSize: Int, entry: String) throws -> [UInt8] {
        var stream = z_stream()
        guard czlib_inflate_init_raw(&stream) == Z_OK else {
            throw BundleError(.io, "zlib could not start inflating", entry: entry)
        }
        defer { inflateEnd(&stream) }
        // One spare byte lets us notice a stream that inflates to more than it claims.
        let capacity = expectedSize + 1
        // A first guess bounded by what was read (deflate rarely beats 8:1 on real content), inflated into in place;
        // past it the array grows a chunk at a time.
        // (zlib counts output in 32 bits: a larger guess is left to the loop below.)
        let guess = min(capacity, Int(UInt32.max), max(64 << 10, input.count.multipliedReportingOverflow(by: 8).partialValue))
        var consumed = 0
        var status: Int32 = Z_OK
        var output = [UInt8](unsafeUninitializedCapacity: guess) { buffer, count in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
            stream.avail_in = UInt32(min(input.count, Int(UInt32.max)))
            stream.next_out = buffer.baseAddress
            stream.avail_out = UInt32(buffer.count)
            status = CZlib.inflate(&stream, Z_NO_FLUSH)
            consumed = min(input.count, Int(UInt32.max)) - Int(stream.avail_in)
            count = buffer.count - Int(stream.avail_out)
        }
        guard status == Z_OK && output.count < capacity else {
            return try finish(status: status, produced: output, consumed: consumed, input: input, expectedSize: expectedSize, entry: entry, stream: stream)
        }
        let chunkSize = 256 << 10
        var chunk = [UInt8](repeating: 0, count: min(chunkSize, capacity))
        chunk.withUnsafeMutableBytes { scratch in
            var inPos = consumed
            while true {
                let inChunk = min(input.count - inPos, Int(UInt32.max))
                let outChunk = min(capacity - output.count, scratch.count)
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self).advanced(by: inPos))
                stream.avail_in = UInt32(inChunk)
                stream.next_out = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
                stream.avail_out = UInt32(outChunk)
                status = CZlib.inflate(&stream, Z_NO_FLUSH)
                let usedIn = inChunk - Int(stream.avail_in)
                let usedOut = outChunk - Int(stream.avail_out)
                inPos += usedIn
                output.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[0..<usedOut]))
                if status != Z_OK { break }
                if usedIn == 0 && usedOut == 0 {
                    status = Z_BUF_ERROR
                    break
                }
                if output.count >= capacity { break }
            }
            consumed = inPos
        }
        return try finish(status: status, produced: output, consumed: consumed, input: input, expectedSize: expectedSize, entry: entry, stream: stream)
    }

    /// The inflated bytes once the stream stopped with `status`, or why they are refused.
    private static func finish(
        status: Int32, produced output: [UInt8], consumed: Int, input: UnsafeRawBufferPointer, expectedSize: Int, entry: String, stream: z_stream
    ) throws -> [UInt8] {
        let produced = output.count
        if produced > expectedSize {
            throw BundleError(.hostile, "the body inflates past its recorded size of \(expectedSize) bytes", entry: entry)
        }
        if status == Z_STREAM_END {
            guard produced == expectedSize else {
                throw BundleError(.corruptBody, "the body inflates to \(produced) bytes, not the \(expectedSize) recorded", entry: entry)
            }
            guard consumed == input.count else {
                throw BundleError(.corruptBody, "the deflate stream ends \(input.count - consumed) bytes before its recorded compressed size", entry: entry)
            }
            return output
        }
        let reason = stream.msg.map { String(cString: $0) } ?? "the stream ends early"
        throw BundleError(.corruptBody, "the deflate stream is damaged (\(reason))", entry: entry)
    }
}

/// A raw deflate stream inflated piece by piece, for bodies sent in chunks: memory is a chunk of input and one of
/// output, whatever the body's size or compression ratio.
package final class InflateStream {
    private var stream = z_stream()
    private let entry: String
    private var input: [UInt8] = []
    private var inputPosition = 0
    /// Bytes produced so far, and whether the stream has ended.
    package private(set) var produced: UInt64 = 0
    package private(set) var ended = false

    package init(entry: String) throws {
        self.entry = entry
        guard czlib_inflate_init_raw(&stream) == Z_OK else { throw BundleError(.io, "zlib could not start inflating", entry: entry) }
    }

    deinit { inflateEnd(&stream) }

    /// Whether every byte fed so far has been taken.
    package var needsInput: Bool { inputPosition >= input.count }

    /// The next piece of the stored stream; only when ``needsInput``.
    package func feed(_ bytes: [UInt8]) throws {
        if ended && !bytes.isEmpty { throw BundleError(.corruptBody, "the deflate stream ends before its recorded compressed size", entry: entry) }
        input = bytes
        inputPosition = 0
    }

    /// Up to `max` bytes of output from what was fed; empty when more input is needed or the stream has ended.
    /// Output past `limit` bytes in all is refused as hostile.
    package func pull(max: Int, limit: UInt64) throws -> [UInt8] {
        if ended { return [] }
        var output = [UInt8](repeating: 0, count: max)
        let available = input.count - inputPosition
        let (status, usedIn, usedOut) = input.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { out -> (Int32, Int, Int) in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress?.assumingMemoryBound(to: UInt8.self).advanced(by: inputPosition))
                stream.avail_in = UInt32(available)
                stream.next_out = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                stream.avail_out = UInt32(out.count)
                let status = CZlib.inflate(&stream, Z_NO_FLUSH)
                return (status, available - Int(stream.avail_in), out.count - Int(stream.avail_out))
            }
        }
        inputPosition += usedIn
        produced += UInt64(usedOut)
        guard produced <= limit else { throw BundleError(.hostile, "the body inflates past its recorded size of \(limit) bytes", entry: entry) }
        if status == Z_STREAM_END {
            ended = true
            if inputPosition < input.count {
                throw BundleError(.corruptBody, "the deflate stream ends before its recorded compressed size", entry: entry)
            }
        } else if status != Z_OK && !(status == Z_BUF_ERROR && usedOut == 0) {
            let reason = stream.msg.map { String(cString: $0) } ?? "error \(status)"
            throw BundleError(.corruptBody, "the deflate stream is damaged (\(reason))", entry: entry)
        }
        output.removeLast(max - usedOut)
        return output
    }
}

/// Raw deflate (RFC 1951) through zlib, for the few bodies a delta rebuilds from patches at mount (the writer deflates
/// with libdeflate; the runtime links zlib only).
package enum ZlibDeflate {
    /// `pieces`, one after the other, deflated at `level` as one stream (the same bytes as ``deflate(_:level:)`` of
    /// them joined: zlib's stream does not depend on how its input is cut), without joining them.
    package static func deflate(pieces: [[UInt8]], level: Int32) throws -> [UInt8] {
        // No piece is one empty piece: the stream still ends.
        let pieces = pieces.isEmpty ? [[]] : pieces
        var stream = z_stream()
        guard czlib_deflate_init_raw(&stream, level) == Z_OK else { throw BundleError(.io, "zlib could not start deflating") }
        defer { deflateEnd(&stream) }
        var output = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 256 << 10)
        for (n, piece) in pieces.enumerated() {
            let last = n == pieces.count - 1
            try piece.withUnsafeBytes { raw in
                stream.next_in = UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: UInt8.self))
                stream.avail_in = UInt32(raw.count)
                while true {
                    let (status, produced) = chunk.withUnsafeMutableBytes { out -> (Int32, Int) in
                        stream.next_out = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
                        stream.avail_out = UInt32(out.count)
                        let status = CZlib.deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH)
                        return (status, out.count - Int(stream.avail_out))
                    }
                    guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                        throw BundleError(.io, "zlib could not deflate (status \(status))")
                    }
                    output.append(contentsOf: chunk[0..<produced])
                    if last ? status == Z_STREAM_END : (stream.avail_in == 0 && produced < chunk.count) { break }
                }
            }
        }
        return output
    }

    /// `input` deflated at `level`.
    package static func deflate(_ input: [UInt8], level: Int32 = 6) throws -> [UInt8] { try deflate(pieces: [input], level: level) }
}
