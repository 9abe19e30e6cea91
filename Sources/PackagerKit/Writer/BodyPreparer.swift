import Crypto
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

/// Hashes and compresses bodies in parallel.
struct BodyPreparer {
    let options: BundleWriter.Options
    let spool: OverflowFile
    let memory: MemoryBudget

    /// One result per entry, in order; nil for entries without a body.
    func prepare(_ entries: [BundleWriter.Entry]) throws -> [PreparedBody?] {
        let results = ResultSlots(count: entries.count)
        let memory = self.memory
        let level = Int32(options.compressionLevel)
        let spool = self.spool
        let workers = max(1, min(options.concurrency, entries.count))
        let next = NIOLockedValueBox(0)
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while case let i = next.withLockedValue({ n -> Int in
                defer { n += 1 }
                return n
            }), i < entries.count, !results.failed {
                let entry = entries[i]
                guard let source = entry.body else { continue }
                do {
                    results.set(i, try Self.prepare(source, entry: entry, level: level, spool: spool, memory: memory))
                } catch {
                    results.fail(error)
                }
            }
        }
        if let error = results.error { throw error }
        return results.values
    }

    private static func prepare(
        _ source: BundleWriter.BodySource, entry: BundleWriter.Entry, level: Int32, spool: OverflowFile, memory: MemoryBudget
    ) throws
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
                    memory.take(deflated.count) ? .memory(deflated) : .spool(offset: try spool.append(deflated))
                return PreparedBody(
                    digest: digest, crc32: crc, storedCRC32: CRC32.checksum(deflated), size: UInt64(raw.count), storedSize: UInt64(deflated.count),
                    compression: .deflate, storage: storage)
            }
            // Small stored bodies stay in memory, so the bytes written are the bytes hashed, and the file is not read twice.
            let storage: PreparedBody.Storage =
                raw.count <= BodyContents.smallFileLimit && memory.take(raw.count) ? .memory(Array(raw)) : .source(source)
            return PreparedBody(
                digest: digest, crc32: crc, storedCRC32: crc, size: UInt64(raw.count), storedSize: UInt64(raw.count), compression: .stored,
                storage: storage)
        }
    }
}
