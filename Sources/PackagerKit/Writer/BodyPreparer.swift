import Crypto
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

/// A worker's compressors: the writer's level for bodies under 1 MiB, and at most level 7 from 1 MiB up.
///
/// Measured with libdeflate 1.14 on 2 cores: levels 8 and up use lazier matching that slows to 3.2 times zlib's
/// speed on long repetitive text (the benchmark's 1 MiB pages: pack of 1 GiB went from 13 s to 45 s), so a large
/// body asked for at such a level gets level 7, which keeps zlib's speed there and still writes less than zlib. The
/// default level (6) is below that (docs/FORMAT.md §3).
struct Deflaters {
    static let largeBody = 1 << 20
    static let largeBodyLevel = 7
    let small: Deflater
    let large: Deflater
    /// The level asked for (bodies read in chunks, ``StreamingBody``, use it through zlib).
    let level: Int

    init(level: Int) throws {
        self.level = level
        small = try Deflater(level: level)
        large = try Deflater(level: min(level, Self.largeBodyLevel))
    }

    func deflate(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        (input.count >= Self.largeBody ? large : small).deflate(input)
    }
}

/// Hashes and compresses bodies in parallel.
struct BodyPreparer {
    /// A regular file of ``StreamingBody/threshold`` bytes or more, read in chunks (not mapped); nil for a smaller
    /// one, or one that is not a regular file, which ``BodyContents`` reads.
    static func streamed(_ path: String, compressible: Bool, level: Int) throws -> StreamingBody.Result? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) >= StreamingBody.threshold else { return nil }
        return try StreamingBody.read(fd, size: Int(info.st_size), path: path, deflateAt: compressible ? level : nil)
    }

    let options: BundleWriter.Options
    let spool: OverflowFile
    let memory: MemoryBudget

    /// One result for each entry that `entry` gives (from any thread), in order: the one in `ready`, or the entry's
    /// body prepared; nil for entries without a body. Entries with a ready result are not read.
    func prepare(_ ready: PreparedBodies, entry read: @Sendable (Int) throws -> RecordedExchange) throws -> PreparedBodies {
        let count = ready.count
        let missing = try (0..<count).filter { try ready.digest(at: $0) == nil }
        let results = ResultSlots(ready)
        let memory = self.memory
        let level = options.compressionLevel
        _ = try Deflater(level: level)  // a level out of range fails here, once, not in every worker
        let spool = self.spool
        let workers = max(1, min(options.concurrency, missing.count))
        let next = NIOLockedValueBox(0)
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            let deflaters: Deflaters
            do {
                deflaters = try Deflaters(level: level)
            } catch {
                return results.fail(error)
            }
            while case let n = next.withLockedValue({ n -> Int in
                defer { n += 1 }
                return n
            }), n < missing.count, !results.failed {
                let i = missing[n]
                let entry: RecordedExchange
                do {
                    entry = try read(i)
                } catch {
                    results.fail(error)
                    break
                }
                guard let source = entry.body else { continue }
                do {
                    results.set(i, try Self.prepare(source, entry: entry, deflaters: deflaters, spool: spool, memory: memory))
                } catch {
                    results.fail(error)
                }
            }
        }
        if let error = results.error { throw error }
        precondition(ready.count == count)
        return ready
    }

    /// Hashes one body and compresses it when its media type is worth it; the result is in memory within the
    /// budget, in the overflow file beyond it, or left in its source when stored.
    ///
    /// - Parameter copiesStoredFiles: a stored body read from a file of up to 1 MiB is kept in memory (within the
    ///   budget), so the bytes written are the bytes hashed and the file is not read twice. A crawl's pipeline
    ///   leaves them in their spool files instead: it holds bodies for the whole crawl.
    static func prepare(
        _ source: BundleWriter.BodySource, entry: RecordedExchange, deflaters: Deflaters, spool: OverflowFile, memory: MemoryBudget,
        copiesStoredFiles: Bool = true
    ) throws
        -> PreparedBody
    {
        let contentType = entry.headers.first { $0.name.lowercased() == "content-type" }?.value ?? ""
        let encoded = entry.headers.contains { $0.name.lowercased() == "content-encoding" && $0.value.lowercased() != "identity" }
        let compressible = !encoded && MediaTypes.isCompressible(contentType)
        if case .file(let path) = source, let large = try streamed(path, compressible: compressible, level: deflaters.level) {
            guard let deflated = large.deflated else {
                return PreparedBody(
                    digest: large.digest, crc32: large.crc32, storedCRC32: large.crc32, size: large.size, storedSize: large.size, compression: .stored,
                    storage: .source(source))
            }
            let storage: PreparedBody.Storage = memory.take(deflated.count) ? .memory(deflated) : .spool(offset: try spool.append(deflated))
            return PreparedBody(
                digest: large.digest, crc32: large.crc32, storedCRC32: FastCRC32.checksum(deflated), size: large.size,
                storedSize: UInt64(deflated.count), compression: .deflate, storage: storage)
        }
        let contents = try BodyContents(source)
        return try contents.withUnsafeBytes { raw -> PreparedBody in
            let digest = entry.bodySHA256 ?? BodyDigest(SHA256.hash(data: raw))
            let crc = FastCRC32.checksum(raw)
            if compressible, raw.count > 0, let deflated = deflaters.deflate(raw) {
                let storage: PreparedBody.Storage =
                    memory.take(deflated.count) ? .memory(deflated) : .spool(offset: try spool.append(deflated))
                return PreparedBody(
                    digest: digest, crc32: crc, storedCRC32: FastCRC32.checksum(deflated), size: UInt64(raw.count), storedSize: UInt64(deflated.count),
                    compression: .deflate, storage: storage)
            }
            // Small stored bodies stay in memory, so the bytes written are the bytes hashed, and the file is not read twice.
            let copies: Bool
            if case .file = source { copies = copiesStoredFiles } else { copies = true }
            let storage: PreparedBody.Storage
            if copies && raw.count <= BodyContents.smallFileLimit && memory.take(raw.count) {
                storage = .memory(Array(raw))
            } else if case .data = source, raw.count > 0 {
                // Bytes in memory that the budget has no room for go to the overflow file, as deflated ones do: kept as
                // their source, a recording's or a crawl's incompressible bodies would all stay in memory until the write.
                storage = .spool(offset: try spool.append(Array(raw)))
            } else {
                storage = .source(source)
            }
            return PreparedBody(
                digest: digest, crc32: crc, storedCRC32: crc, size: UInt64(raw.count), storedSize: UInt64(raw.count), compression: .stored,
                storage: storage)
        }
    }
}
