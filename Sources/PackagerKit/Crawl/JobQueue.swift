import Foundation
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One host's jobs, first in first out: up to ``memoryLimit`` of them in memory, the ones queued behind those in a
/// scratch file, read back in order as the ones in memory are taken.
///
/// A breadth-first crawl finds pages faster than it fetches them: on a site of 50,000 pages most of them wait in the
/// queue at some point, and held in memory they were the crawl's largest growing cost (about 200 bytes a job).
///
/// The file is read and written with blocking calls, from the frontier's actor: 64 KiB at a time in each direction,
/// on a local scratch file, for 2,048 jobs.
struct JobQueue {
    typealias Job = Frontier.Job

    /// Jobs held in memory, oldest first from `head`; a taken slot is cleared at once.
    private var memory: [Job?] = []
    private var head = 0
    /// Jobs in the file (or in `pending`, not yet written), all queued after those in memory.
    private var spilled = 0
    private var pending: [UInt8] = []
    private var fd: Int32 = -1
    private var written: UInt64 = 0
    private var readOffset: UInt64 = 0
    private let path: String?
    let memoryLimit: Int
    /// Spilled jobs that could not be read back (the scratch file failed): the crawl reports them, and fails.
    private(set) var lost = 0

    /// - Parameters:
    ///   - path: the scratch file for jobs beyond `memoryLimit`; nil keeps them all in memory.
    init(path: String?, memoryLimit: Int = 2048) {
        self.path = path
        self.memoryLimit = max(1, memoryLimit)
    }

    var count: Int { memory.count - head + spilled }

    mutating func push(_ job: Job) {
        if spilled == 0 && memory.count - head < memoryLimit || path == nil {
            memory.append(job)
            return
        }
        pending += Self.encode(job)
        spilled += 1
        if pending.count >= 64 << 10 { flush() }
    }

    mutating func pop() -> Job? {
        if head == memory.count, spilled > 0 { refill() }
        guard head < memory.count else { return nil }
        let job = memory[head]
        memory[head] = nil
        head += 1
        if head == memory.count {
            memory.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > memory.count {
            memory.removeFirst(head)
            head = 0
        }
        return job
    }

    /// Closes and removes the scratch file.
    mutating func removeFile() {
        if fd >= 0 {
            close(fd)
            if let path { unlink(path) }
            fd = -1
        }
    }

    /// Writes `pending` to the file; when the file cannot be written, the jobs stay in `pending` (in memory).
    private mutating func flush() {
        guard let path, !pending.isEmpty else { return }
        if fd < 0 {
            fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
        }
        let offset = written
        guard pending.withUnsafeBytes({ FileIO.write(fd, $0, at: offset) }) == nil else { return }
        written += UInt64(pending.count)
        pending.removeAll(keepingCapacity: true)
    }

    /// Reads up to `memoryLimit` spilled jobs back into memory, oldest first.
    private mutating func refill() {
        var bytes = [UInt8]()
        let fromFile = readOffset < written
        if fromFile {
            // 256 KiB from the file at a time; a record cut at the end is read again next time, and a record longer
            // than a read (a long redirect chain of long URLs) is read on its own.
            guard let read = readFile(Int(min(written - readOffset, 256 << 10))) else { return loseSpilled() }
            bytes = read
            if Self.decode(bytes, at: 0) == nil, bytes.count >= 4 {
                let length = 4 + Int(bytes[0..<4].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) })
                guard length > bytes.count, readOffset + UInt64(length) <= written, let whole = readFile(length) else { return loseSpilled() }
                bytes = whole
            }
        } else {
            swap(&bytes, &pending)
        }
        var at = 0
        while memory.count < memoryLimit, spilled > 0 {
            guard let record = Self.decode(bytes, at: at) else {
                // Only the end of a read can cut a record: the first one of a read is whole, or damaged.
                if at == 0 { return loseSpilled() }
                break
            }
            memory.append(record.job)
            spilled -= 1
            at = record.next
        }
        if fromFile {
            readOffset += UInt64(at)
        } else {
            pending = Array(bytes[at...])
        }
        if spilled == 0 {
            // Drained: the file goes, and a later spill starts a new one.
            removeFile()
            written = 0
            readOffset = 0
        }
    }

    /// `length` bytes of the file from `readOffset`, or nil when they cannot be read.
    private func readFile(_ length: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: length)
        let offset = readOffset
        guard bytes.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: offset) }) == .done(length) else { return nil }
        return bytes
    }

    /// Gives up the spilled jobs, counted as lost.
    private mutating func loseSpilled() {
        lost += spilled
        spilled = 0
        pending = []
        written = 0
        readOffset = 0
    }

    // MARK: - Records

    /// A job as a 32-bit length, then its fields: strings as a 32-bit length and their UTF-8 bytes.
    static func encode(_ job: Job) -> [UInt8] {
        var out = ScratchRecordWriter()
        let start = out.beginLength()
        out.string(job.url)
        out.string(job.key)
        out.string(job.host)
        out.integer(job.role.bit)
        out.integer(Int64(job.depth))
        out.integer(UInt8((job.referrer == nil ? 0 : 1) | (job.declared ? 2 : 0)))
        if let referrer = job.referrer { out.string(referrer) }
        out.integer(UInt32(job.redirectChain.count))
        for hop in job.redirectChain { out.string(hop) }
        out.endLength(start)
        return out.bytes
    }

    /// The job whose record starts at `start`, and where the next one starts; nil when the bytes end before it does,
    /// or it is damaged.
    static func decode(_ bytes: [UInt8], at start: Int) -> (job: Job, next: Int)? {
        var reader = ScratchRecordReader(bytes, at: start)
        guard let length = reader.integer(UInt32.self), reader.at + Int(length) <= bytes.count else { return nil }
        let end = reader.at + Int(length)
        guard let url = reader.string(), let key = reader.string(), let host = reader.string(), let roleBit = reader.integer(UInt8.self),
            let role = CrawlScope.Role(bit: roleBit), let depth = reader.integer(Int64.self), let flags = reader.integer(UInt8.self)
        else { return nil }
        var referrer: String?
        if flags & 1 != 0 {
            guard let text = reader.string() else { return nil }
            referrer = text
        }
        // Each hop reads a string or fails, so a damaged count ends with the record.
        guard let hops = reader.integer(UInt32.self) else { return nil }
        var chain = [String]()
        for _ in 0..<hops {
            guard let hop = reader.string() else { return nil }
            chain.append(hop)
        }
        guard reader.at == end else { return nil }
        let job = Job(url: url, key: key, host: host, role: role, depth: Int(depth), referrer: referrer, redirectChain: chain, declared: flags & 2 != 0)
        return (job, end)
    }
}
