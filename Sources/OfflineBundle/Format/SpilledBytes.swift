#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bytes appended one after the other, held in memory up to a limit and past it in a temporary file (unlinked as
/// soon as it is made), read back by range: a part of `index.bin` whose size grows with the entries (the keys, the
/// header blocks, the fixed-size records), so that a writer of a large bundle does not hold it while it builds the
/// rest. Without a folder it stays in memory.
package final class SpilledBytes {
    /// Where the temporary file goes; nil: memory only.
    private let folder: String?
    private let memoryLimit: Int
    /// Every byte while in memory; once spilled, those appended since the last write to the file.
    private var buffer: [UInt8] = []
    private var fd: Int32 = -1
    /// Bytes in the file.
    private var written = 0
    /// Bytes appended.
    package private(set) var count = 0

    /// Bytes written to the file at a time, once spilled.
    private static let writeSize = 256 << 10

    package init(folder: String?, memoryLimit: Int) {
        self.folder = folder
        self.memoryLimit = memoryLimit
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether the bytes went to a file.
    package var spilled: Bool { fd >= 0 }

    /// Appends `bytes`.
    package func append(_ bytes: some Collection<UInt8>) throws {
        buffer.append(contentsOf: bytes)
        count += bytes.count
        if fd < 0 {
            guard let folder, buffer.count > memoryLimit else { return }
            try open(in: folder)
        }
        if buffer.count >= Self.writeSize { try flush() }
    }

    /// The bytes in `range` (of those appended).
    package func bytes(in range: Range<Int>) throws -> [UInt8] {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "a range past the bytes appended")
        if fd < 0 { return Array(buffer[range]) }
        var out = [UInt8](repeating: 0, count: range.count)
        // The part in the file, then the part still in the buffer.
        let inFile = max(0, min(range.upperBound, written) - range.lowerBound)
        if inFile > 0 {
            let outcome = out.withUnsafeMutableBytes {
                FileIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<inFile]), at: UInt64(range.lowerBound))
            }
            guard outcome == .done(inFile) else { throw BundleError(.io, "cannot read back the index's bytes kept in a temporary file") }
        }
        if inFile < range.count {
            let from = max(range.lowerBound, written) - written
            out.replaceSubrange(inFile..<range.count, with: buffer[from..<(from + range.count - inFile)])
        }
        return out
    }

    /// Whether the bytes in `range` are `other`.
    package func equals(_ range: Range<Int>, _ other: [UInt8]) throws -> Bool {
        guard range.count == other.count else { return false }
        if fd < 0 { return buffer[range].elementsEqual(other) }
        return try bytes(in: range) == other
    }

    /// Calls `body` with every byte appended, in order, a piece at a time.
    package func forEachPiece(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard fd >= 0 else { return try buffer.withUnsafeBytes(body) }
        var piece = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        while offset < written {
            let n = min(piece.count, written - offset)
            let outcome = piece.withUnsafeMutableBytes { FileIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), at: UInt64(offset)) }
            guard outcome == .done(n) else { throw BundleError(.io, "cannot read back the index's bytes kept in a temporary file") }
            try piece.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
        }
        try buffer.withUnsafeBytes(body)
    }

    /// Makes the temporary file, unlinked at once, and writes what the buffer holds into it.
    private func open(in folder: String) throws {
        let made = FileIO.unlinkedFile(in: folder, prefix: "index-part")
        guard made >= 0 else { throw BundleError(.io, "cannot make a temporary file in \(folder) for the index", underlying: SystemCallError(errno)) }
        fd = made
        try flush()
    }

    private func flush() throws {
        let failure = buffer.withUnsafeBytes { FileIO.write(fd, $0, at: UInt64(written)) }
        if let failure { throw BundleError(.io, "cannot write the index's bytes to a temporary file", underlying: SystemCallError(failure)) }
        written += buffer.count
        // What was held in memory before the spill goes; the buffer keeps only the room of one write.
        if buffer.capacity > 2 * Self.writeSize {
            buffer = []
            buffer.reserveCapacity(Self.writeSize)
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }
}

/// A piece of `index.bin` as ``IndexAccumulator/finish(manifestSHA256:rules:createdAt:)`` gives it: bytes, or bytes
/// kept in a temporary file.
package enum IndexPiece {
    case bytes([UInt8])
    case spilled(SpilledBytes)

    package var count: Int {
        switch self {
        case .bytes(let bytes): bytes.count
        case .spilled(let spilled): spilled.count
        }
    }

    /// Calls `body` with the piece's bytes, in order, a part at a time.
    package func forEachPart(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch self {
        case .bytes(let bytes): try bytes.withUnsafeBytes(body)
        case .spilled(let spilled): try spilled.forEachPiece(body)
        }
    }
}

extension Array where Element == IndexPiece {
    /// The pieces one after the other, in one array.
    package func joinedBytes() throws -> [UInt8] {
        var joined: [UInt8] = []
        joined.reserveCapacity(reduce(0) { $0 + $1.count })
        for piece in self { try piece.forEachPart { joined.append(contentsOf: $0) } }
        return joined
    }
}
