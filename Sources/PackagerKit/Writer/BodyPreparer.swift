import Crypto
import Dispatch
import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A body hashed and compressed, waiting to be written.
struct PreparedBody: Sendable {
    enum Storage: Sendable {
        case memory([UInt8])
        case spool(offset: UInt64)
        case source(BundleWriter.BodySource)
    }
    var digest: [UInt8]
    var crc32: UInt32
    var size: UInt64
    var storedSize: UInt64
    var compression: BodyCompression
    var storage: Storage
}

extension PreparedBody.Storage {
    /// Copies the stored bytes to the output; for stored files, re-checks the CRC so a file changed meanwhile is caught.
    func copy(to output: AtomicOutput, storedSize: UInt64, expectedCRC: UInt32?, spool: Spool, buffer: inout [UInt8]) throws {
        switch self {
        case .memory(let bytes):
            try output.write(bytes)
        case .spool(let offset):
            var done: UInt64 = 0
            while done < storedSize {
                let n = Int(min(UInt64(buffer.count), storedSize - done))
                try buffer.withUnsafeMutableBytes { try spool.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), at: offset + done) }
                try buffer.withUnsafeBytes { try output.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                done += UInt64(n)
            }
        case .source(.data(let data)):
            try data.withUnsafeBytes { try output.write($0) }
        case .source(.file(let path)):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw PackagerError(.io, "cannot open \(path)", subject: path)
            }
            defer { try? handle.close() }
            var crc: UInt32 = 0
            var done: UInt64 = 0
            while done < storedSize {
                let chunk = try handle.read(upToCount: Int(min(UInt64(buffer.count), storedSize - done))) ?? Data()
                guard !chunk.isEmpty else { throw PackagerError(.io, "\(path) shrank while the bundle was written", subject: path) }
                try chunk.withUnsafeBytes { raw in
                    crc = CRC32.checksum(raw, continuing: crc)
                    try output.write(raw)
                }
                done += UInt64(chunk.count)
            }
            if let expectedCRC, crc != expectedCRC {
                throw PackagerError(.io, "\(path) changed while the bundle was written", subject: path)
            }
        }
    }
}

/// One temporary file that holds compressed bodies beyond the memory budget.
final class Spool: @unchecked Sendable {
    private let lock = NSLock()
    private let path: String
    private var fd: Int32 = -1
    private var end: UInt64 = 0
    private let folder: String

    init(folder: String) throws {
        self.folder = folder
        AbandonedFiles.remove(in: folder, prefix: ".packager-spool-")
        self.path = folder + "/.packager-spool-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    }

    deinit {
        if fd >= 0 {
            close(fd)
            unlink(path)
            TemporaryFiles.shared.unregister(path)
        }
    }

    /// Appends bytes and returns where they start.
    func append(_ bytes: [UInt8]) throws -> UInt64 {
        let offset: UInt64 = try lock.withLock {
            if fd < 0 {
                fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw PackagerError(.io, "cannot create a spool file in \(folder): \(String(cString: strerror(errno)))") }
                AbandonedFiles.hold(fd)
                TemporaryFiles.shared.register(path)
            }
            defer { end += UInt64(bytes.count) }
            return end
        }
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw PackagerError(.io, "cannot write the spool file: \(String(cString: strerror(errno)))")
                }
                done += n
            }
        }
        return offset
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw PackagerError(.io, "cannot read back the spool file") }
            done += n
        }
    }
}

/// Hashes and compresses bodies in parallel.
struct BodyPreparer {
    let options: BundleWriter.Options
    let spool: Spool

    /// One result per entry, in order; nil for entries without a body.
    func prepare(_ entries: [BundleWriter.Entry]) throws -> [PreparedBody?] {
        let results = ResultSlots(count: entries.count, budget: options.memoryBudget)
        let level = Int32(options.compressionLevel)
        let spool = self.spool
        let workers = max(1, min(options.concurrency, entries.count))
        let next = ResultSlots.Counter()
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while let i = next.take(below: entries.count), !results.failed {
                let entry = entries[i]
                guard let source = entry.body else { continue }
                do {
                    results.set(i, try Self.prepare(source, entry: entry, level: level, spool: spool, results: results))
                } catch {
                    results.fail(error)
                }
            }
        }
        if let error = results.error { throw error }
        return results.values
    }

    private static func prepare(_ source: BundleWriter.BodySource, entry: BundleWriter.Entry, level: Int32, spool: Spool, results: ResultSlots) throws
        -> PreparedBody
    {
        let contents = try BodyContents(source)
        let contentType = entry.headers.first { $0.name.lowercased() == "content-type" }?.value ?? ""
        let encoded = entry.headers.contains { $0.name.lowercased() == "content-encoding" && $0.value.lowercased() != "identity" }
        let compressible = !encoded && MediaTypes.isCompressible(contentType)
        return try contents.withUnsafeBytes { raw -> PreparedBody in
            let digest = Array(SHA256.hash(data: raw))
            let crc = CRC32.checksum(raw)
            if compressible, raw.count > 0, let deflated = try RawDeflate.deflate(raw, level: level) {
                let storage: PreparedBody.Storage =
                    results.reserveMemory(deflated.count) ? .memory(deflated) : .spool(offset: try spool.append(deflated))
                return PreparedBody(
                    digest: digest, crc32: crc, size: UInt64(raw.count), storedSize: UInt64(deflated.count), compression: .deflate, storage: storage)
            }
            // Small stored bodies stay in memory, so the bytes written are the bytes hashed, and the file is not read twice.
            let storage: PreparedBody.Storage =
                raw.count <= BodyContents.smallFileLimit && results.reserveMemory(raw.count) ? .memory(Array(raw)) : .source(source)
            return PreparedBody(
                digest: digest, crc32: crc, size: UInt64(raw.count), storedSize: UInt64(raw.count), compression: .stored, storage: storage)
        }
    }
}

/// A body's bytes while it is hashed and compressed: small files are read with one `read`, large ones mapped.
enum BodyContents {
    /// Files up to this size are read into memory; larger ones are mapped (mapping and unmapping many small files costs more than reading them).
    static let smallFileLimit = 1 << 20

    case bytes([UInt8])
    case data(Data)

    init(_ source: BundleWriter.BodySource) throws {
        switch source {
        case .data(let data): self = .data(data)
        case .file(let path):
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw PackagerError(.io, "cannot read \(path): \(String(cString: strerror(errno)))", subject: path) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw PackagerError(.io, "cannot read \(path): \(String(cString: strerror(errno)))", subject: path) }
            let size = Int(info.st_size)
            if (info.st_mode & S_IFMT) != S_IFREG || size == 0 {
                // A FIFO, a /proc file, or a file whose size the system does not know: read it to the end.
                self = .bytes(try Self.readToEnd(fd, path: path))
                return
            }
            if size > Self.smallFileLimit {
                do {
                    self = .data(try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped))
                } catch {
                    throw PackagerError(.io, "cannot read \(path): \(error.localizedDescription)", subject: path)
                }
                return
            }
            var failure: Int32 = 0
            let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                count = 0
                while count < size {
                    let n = read(fd, buffer.baseAddress! + count, size - count)
                    if n < 0, errno == EINTR { continue }
                    if n < 0 { failure = errno }
                    if n <= 0 { break }
                    count += n
                }
            }
            if failure != 0 { throw PackagerError(.io, "cannot read \(path): \(String(cString: strerror(failure)))", subject: path) }
            if bytes.count < size { throw PackagerError(.io, "\(path) shrank while it was read", subject: path) }
            self = .bytes(bytes)
        }
    }

    private static func readToEnd(_ fd: Int32, path: String) throws -> [UInt8] {
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { throw PackagerError(.io, "cannot read \(path): \(String(cString: strerror(errno)))", subject: path) }
            if n == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch self {
        case .bytes(let bytes): return try bytes.withUnsafeBytes(body)
        case .data(let data): return try data.withUnsafeBytes(body)
        }
    }
}

/// Thread-safe result slots for the parallel preparation.
final class ResultSlots: @unchecked Sendable {
    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func take(below limit: Int) -> Int? {
            lock.withLock {
                guard value < limit else { return nil }
                defer { value += 1 }
                return value
            }
        }
    }

    private let lock = NSLock()
    private var slots: [PreparedBody?]
    private var budget: Int
    private(set) var error: (any Error)?

    init(count: Int, budget: Int) {
        slots = Array(repeating: nil, count: count)
        self.budget = budget
    }

    var failed: Bool { lock.withLock { error != nil } }
    var values: [PreparedBody?] { lock.withLock { slots } }

    func set(_ i: Int, _ value: PreparedBody) { lock.withLock { slots[i] = value } }
    func fail(_ e: any Error) { lock.withLock { if error == nil { error = e } } }
    func reserveMemory(_ n: Int) -> Bool {
        lock.withLock {
            guard budget >= n else { return false }
            budget -= n
            return true
        }
    }
}
