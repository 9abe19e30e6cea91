import Crypto
import Foundation
import OfflineBundle
import Synchronization

/// The responses a build fetched, kept beside its output until a build of it succeeds, so a build interrupted by any
/// means (SIGKILL, power loss, a full disk, Ctrl-C, a failed run) resumes: the next build of the same declaration and
/// output takes each response it finds here instead of fetching it, and fetches only the rest (what was in flight
/// included). The bundle is a function of the set of responses (keys sorted, bodies in digest order), so a resumed
/// build writes what an uninterrupted one writes.
///
/// The journal is a folder `.NAME.packager-journal` beside the output `NAME` (0700): `log`, records appended as
/// responses are stored (`u32 length`, `u32 CRC-32`, the payload; the first is a header naming the journal's format,
/// packager's version and the declaration's fingerprint), and `*.body`, hard links of the spool files of bodies
/// that went to a file. A record cut off by the interruption, and everything after it, is dropped; a body file whose
/// size or CRC-32 is not what its record says is fetched again. A journal of another declaration, another version or
/// another format, or a damaged one, is ignored with a line saying so, and emptied. A build holds an `flock` on the
/// folder while it uses it. Writing the journal never fails a build: a full disk stops it with a line.
final class BuildJournal: Sendable {
    /// What a build says about its journal (the CLI prints it).
    enum Notice: Sendable {
        case resuming(responses: Int, bytes: Int64, droppedTail: Bool)
        case ignored(reason: String)
        case freshStart
        case inUse
        case stopped(reason: String)
        case kept(responses: Int, bytes: Int64)
    }

    static let formatVersion: UInt32 = 1
    static let magic = "packager-build-journal"

    /// One kept response, as read back.
    struct Record: Equatable {
        enum Body: Equatable {
            case none
            case inline([UInt8])
            /// A file in the journal's folder, its size and CRC-32.
            case file(name: String, crc: UInt32)
        }

        var key: String
        var status: Int
        var httpVersion: String
        var fetchedAt: Date
        var attempts: Int
        var headers: [Header]
        var bodySize: Int64
        var body: Body

        struct Header: Equatable {
            var name: String
            var value: String
        }
    }

    private struct State {
        var end: UInt64
        /// Kept records not yet replayed in this run, by key: where they lie in `log`.
        var index: [String: (offset: UInt64, length: Int, bodySize: Int64)] = [:]
        var kept = 0
        var keptBytes: Int64 = 0
        var stopped = false
        var lastSync = Date()
        var unsynced: [String] = []
        var size: Int64 = 0
    }

    let folder: String
    private let descriptor: Int32
    private let log: Int32
    private let limit: Int64
    private let notice: @Sendable (Notice) -> Void
    private let state: Mutex<State>

    /// The journal's folder for the bundle at `output`.
    static func folder(forOutput output: String) -> String {
        let url = URL(fileURLWithPath: output)
        return url.deletingLastPathComponent().path + "/." + url.lastPathComponent + ".packager-journal"
    }

    /// What a journal must match to be resumed from: the declaration as the build runs it (the command line's changes
    /// included), its request bodies, packager's version and the journal's format.
    static func fingerprint(_ declaration: Declaration) -> String {
        var hash = SHA256()
        hash.update(data: Data("\(magic) \(formatVersion) \(PackagerVersion.string)\n".utf8))
        hash.update(data: Data(String(reflecting: declaration).utf8))
        // `Data` describes itself by its length only.
        for request in declaration.requests { hash.update(data: request.body ?? Data()) }
        return hexString(Array(hash.finalize()))
    }

    private init(folder: String, descriptor: Int32, log: Int32, state: State, limit: Int64, notice: @escaping @Sendable (Notice) -> Void) {
        self.folder = folder
        self.descriptor = descriptor
        self.log = log
        self.state = Mutex(state)
        self.limit = limit
        self.notice = notice
    }

    /// Whether ``close()`` ran: the descriptors are closed once.
    private let closed = Atomic<Bool>(false)

    deinit { close() }

    /// Closes the log and lets go of the folder's lock, so another build (or another open in this process) may take
    /// the journal. Reading or writing it afterwards is not allowed; called again, it does nothing.
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(log)
        Glibc.close(descriptor)
    }

    /// Opens (or starts) the journal of `output`; `fresh` discards what it holds. Never throws: a journal that cannot
    /// be opened is said, and the build runs without one.
    static func open(output: String, fingerprint: String, fresh: Bool, limit: Int64, notice: @escaping @Sendable (Notice) -> Void) -> BuildJournal? {
        let folder = folder(forOutput: output)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            notice(.stopped(reason: "cannot make \(folder): \(String(cString: strerror(errno)))"))
            return nil
        }
        let descriptor = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else {
            notice(.stopped(reason: "cannot open \(folder): \(String(cString: strerror(errno)))"))
            return nil
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(descriptor)
            notice(.inUse)
            return nil
        }
        let logPath = folder + "/log"
        var state = State(end: 0)
        var log = Glibc.open(logPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        var reuse = false
        if log >= 0 {
            var info = stat()
            fstat(log, &info)
            if fresh {
                notice(.freshStart)
            } else if info.st_size < 8 {
                // Killed before its header was written: nothing to say.
            } else {
                switch scan(log, size: UInt64(info.st_size), fingerprint: fingerprint) {
                case .failure(let reason):
                    notice(.ignored(reason: reason.reason))
                case .success(let scanned):
                    state = scanned.state
                    reuse = true
                    if !state.index.isEmpty {
                        notice(.resuming(responses: state.index.count, bytes: state.keptBytes, droppedTail: scanned.droppedTail))
                    }
                    removeOrphans(in: folder, keeping: scanned.files)
                }
            }
            if !reuse { Glibc.close(log) }
        }
        if !reuse {
            emptyFolder(folder)
            log = Glibc.open(logPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard log >= 0 else {
                Glibc.close(descriptor)
                notice(.stopped(reason: "cannot write \(logPath): \(String(cString: strerror(errno)))"))
                return nil
            }
            var header = ScratchRecordWriter()
            header.integer(UInt8(0))
            header.string(magic)
            header.integer(formatVersion)
            header.string(PackagerVersion.string)
            header.string(fingerprint)
            let frame = Self.frame(header.bytes)
            guard writeAll(log, frame, at: 0) == nil else {
                Glibc.close(log)
                Glibc.close(descriptor)
                notice(.stopped(reason: "cannot write \(logPath): \(String(cString: strerror(errno)))"))
                return nil
            }
            fsync(log)
            fsync(descriptor)
            state = State(end: UInt64(frame.count))
        }
        return BuildJournal(folder: folder, descriptor: descriptor, log: log, state: state, limit: limit, notice: notice)
    }

    /// `payload` framed: its length, its CRC-32, itself.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var out = ScratchRecordWriter(capacity: payload.count + 8)
        out.integer(UInt32(payload.count))
        out.integer(CRC32.checksum(payload))
        return out.bytes + payload
    }

    private struct Scanned {
        var state: State
        var droppedTail: Bool
        var files: Set<String>
    }

    /// Reads the header and every whole record after it; the first record cut off or damaged ends the log there.
    private static func scan(_ log: Int32, size: UInt64, fingerprint: String) -> Result<Scanned, ScanFailure> {
        func frame(at offset: UInt64) -> [UInt8]? {
            guard offset + 8 <= size, let head = readExactly(log, at: offset, count: 8) else { return nil }
            var reader = ScratchRecordReader(head)
            guard let length = reader.integer(UInt32.self), let crc = reader.integer(UInt32.self), offset + 8 + UInt64(length) <= size,
                let payload = readExactly(log, at: offset + 8, count: Int(length)), CRC32.checksum(payload) == crc
            else { return nil }
            return payload
        }
        guard let header = frame(at: 0) else { return .failure(.init("it is damaged")) }
        var reader = ScratchRecordReader(header)
        guard reader.integer(UInt8.self) == 0, reader.string() == magic, let version = reader.integer(UInt32.self) else {
            return .failure(.init("it is damaged"))
        }
        guard version == formatVersion else { return .failure(.init("it is in journal format \(version); this packager writes \(formatVersion)")) }
        guard let writtenBy = reader.string(), let written = reader.string(), reader.atEnd else { return .failure(.init("it is damaged")) }
        guard writtenBy == PackagerVersion.string else {
            return .failure(.init("it was written by packager \(writtenBy); this is packager \(PackagerVersion.string)"))
        }
        guard written == fingerprint else { return .failure(.init("it was left by another declaration, or other options")) }
        var state = State(end: UInt64(header.count + 8))
        var files: Set<String> = []
        while let payload = frame(at: state.end), let record = decode(payload) {
            if let earlier = state.index[record.key] { state.keptBytes -= earlier.bodySize }
            state.index[record.key] = (state.end, payload.count + 8, record.bodySize)
            state.keptBytes += record.bodySize
            if case .file(let name, _) = record.body { files.insert(name) }
            state.end += UInt64(payload.count + 8)
        }
        let dropped = state.end < size
        if dropped { _ = ftruncate(log, off_t(state.end)) }
        state.kept = state.index.count
        state.size = Int64(state.end) + state.keptBytes
        return .success(Scanned(state: state, droppedTail: dropped, files: files))
    }

    struct ScanFailure: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    private static func emptyFolder(_ folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] { unlink(folder + "/" + name) }
    }

    private static func removeOrphans(in folder: String, keeping: Set<String>) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasSuffix(".body") && !keeping.contains(name) {
            unlink(folder + "/" + name)
        }
    }

    // MARK: Records

    static func encode(_ record: Record) -> [UInt8] {
        var out = ScratchRecordWriter(capacity: 256)
        out.integer(UInt8(1))
        out.string(record.key)
        out.integer(Int32(record.status))
        out.string(record.httpVersion)
        out.integer(record.fetchedAt.timeIntervalSince1970.bitPattern)
        out.integer(UInt32(record.attempts))
        out.integer(UInt32(record.headers.count))
        for header in record.headers {
            out.string(header.name)
            out.string(header.value)
        }
        out.integer(record.bodySize)
        switch record.body {
        case .none:
            out.integer(UInt8(0))
        case .inline(let bytes):
            out.integer(UInt8(1))
            out.integer(UInt32(bytes.count))
            var all = out.bytes
            all += bytes
            return all
        case .file(let name, let crc):
            out.integer(UInt8(2))
            out.string(name)
            out.integer(crc)
        }
        return out.bytes
    }

    static func decode(_ payload: [UInt8]) -> Record? {
        var reader = ScratchRecordReader(payload)
        guard reader.integer(UInt8.self) == 1, let key = reader.string(), let status = reader.integer(Int32.self), let version = reader.string(),
            let time = reader.integer(UInt64.self), let attempts = reader.integer(UInt32.self), let count = reader.integer(UInt32.self),
            Int(count) <= payload.count
        else { return nil }
        var headers: [Record.Header] = []
        for _ in 0..<count {
            guard let name = reader.string(), let value = reader.string() else { return nil }
            headers.append(.init(name: name, value: value))
        }
        guard let size = reader.integer(Int64.self), size >= 0, let kind = reader.integer(UInt8.self) else { return nil }
        let body: Record.Body
        switch kind {
        case 0: body = .none
        case 1:
            guard let length = reader.integer(UInt32.self), Int64(length) == size, reader.at + Int(length) == payload.count else { return nil }
            body = .inline(Array(payload[reader.at...]))
            return Record(
                key: key, status: Int(status), httpVersion: version, fetchedAt: Date(timeIntervalSince1970: Double(bitPattern: time)),
                attempts: Int(attempts), headers: headers, bodySize: size, body: body)
        case 2:
            guard let name = reader.string(), !name.contains("/"), name.hasSuffix(".body"), let crc = reader.integer(UInt32.self) else { return nil }
            body = .file(name: name, crc: crc)
        default: return nil
        }
        guard reader.atEnd else { return nil }
        return Record(
            key: key, status: Int(status), httpVersion: version, fetchedAt: Date(timeIntervalSince1970: Double(bitPattern: time)),
            attempts: Int(attempts), headers: headers, bodySize: size, body: body)
    }

    // MARK: Use

    /// Keeps a response the crawl fetched and stored (headers that must never be stored are left out). A file body is
    /// kept by a hard link, so the crawl may delete its spool file.
    func record(key: String, response: Fetcher.Response) {
        guard !state.withLock({ $0.stopped }) else { return }
        let headers = response.headers.filter { !HeaderPolicy.neverStored.contains($0.name) }.map { Record.Header(name: $0.name, value: $0.value) }
        var body = Record.Body.none
        var linked: String?
        switch response.body {
        case .none: break
        case .memory(let data): body = .inline([UInt8](data))
        case .file(let path):
            let name = String(UInt64.random(in: 0...UInt64.max), radix: 16) + ".body"
            guard let crc = Self.crc(ofFile: path), link(path, folder + "/" + name) == 0 else {
                stop("cannot keep a body in \(folder): \(String(cString: strerror(errno)))")
                return
            }
            linked = folder + "/" + name
            body = .file(name: name, crc: crc)
        }
        let record = Record(
            key: key, status: response.status, httpVersion: response.httpVersion, fetchedAt: response.fetchedAt, attempts: response.attempts,
            headers: headers, bodySize: response.bodySize, body: body)
        let frame = Self.frame(Self.encode(record))
        let failure: String? = state.withLock { state in
            guard !state.stopped else { return "" }
            guard state.size + Int64(frame.count) + response.bodySize <= limit else {
                return "the journal reached \(state.size) bytes; a resumed build fetches the rest again"
            }
            // The bundle needs the disk more than the journal does.
            if let free = Self.freeBytes(folder), free - Int64(frame.count) - response.bodySize < Self.spaceKept {
                return "\(folder) is on a disk with \(free >> 20) MiB free, which the bundle needs; a resumed build fetches the rest again"
            }
            if let error = Self.writeAll(log, frame, at: state.end) {
                _ = ftruncate(log, off_t(state.end))
                return "cannot write \(folder)/log: \(String(cString: strerror(error))); a resumed build fetches the rest again"
            }
            state.end += UInt64(frame.count)
            state.size += Int64(frame.count) + (linked == nil ? 0 : response.bodySize)
            state.kept += 1
            state.keptBytes += response.bodySize
            if let linked { state.unsynced.append(linked) }
            if Date().timeIntervalSince(state.lastSync) >= 1 { syncLocked(&state) }
            return nil
        }
        if let failure {
            if let linked { unlink(linked) }
            if !failure.isEmpty { stop(failure) }
        }
    }

    /// A kept response for `key`, taken as if fetched now: its body in memory within `memory`'s budget, or as a
    /// link of the kept file at `spoolPath`. Nil when none is kept, or what is kept fails its checks (it is then
    /// fetched). Each key is taken once a run.
    func replay(_ key: String, spoolPath: String, memory: MemoryBudget?) -> Fetcher.Response? {
        guard let place = state.withLock({ $0.index.removeValue(forKey: key) }),
            let bytes = Self.readExactly(log, at: place.offset, count: place.length)
        else { return nil }
        var reader = ScratchRecordReader(bytes)
        guard let length = reader.integer(UInt32.self), let crc = reader.integer(UInt32.self), Int(length) + 8 == bytes.count else { return nil }
        let payload = Array(bytes[8...])
        guard CRC32.checksum(payload) == crc, let record = Self.decode(payload), record.key == key else { return nil }
        let body: Fetcher.Body
        switch record.body {
        case .none: body = .none
        case .inline(let bytes):
            let sink = BodySink(spoolPath: spoolPath, memory: memory)
            do {
                try bytes.withUnsafeBytes { try sink.write($0) }
            } catch {
                sink.discard()
                return nil
            }
            body = sink.finish()
        case .file(let name, let crc):
            let path = folder + "/" + name
            var info = stat()
            guard stat(path, &info) == 0, Int64(info.st_size) == record.bodySize, Self.crc(ofFile: path) == crc, link(path, spoolPath) == 0 else {
                return nil
            }
            body = .file(spoolPath)
        }
        return Fetcher.Response(
            status: record.status, headers: record.headers.map { ($0.name, $0.value) }, body: body, bodySize: record.bodySize,
            fetchedAt: record.fetchedAt, attempts: record.attempts, httpVersion: record.httpVersion)
    }

    /// Responses kept now (those this run found and those it added), and their body bytes.
    var kept: (responses: Int, bytes: Int64) { state.withLock { ($0.kept, $0.keptBytes) } }

    /// Makes what was written durable (the body files before the log that names them).
    func sync() { state.withLock { syncLocked(&$0) } }

    private func syncLocked(_ state: inout State) {
        for path in state.unsynced {
            let file = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            if file >= 0 {
                fsync(file)
                Glibc.close(file)
            }
        }
        state.unsynced = []
        fdatasync(log)
        state.lastSync = Date()
    }

    /// Removes the journal: the bundle it served is written.
    func remove() {
        Self.emptyFolder(folder)
        rmdir(folder)
        close()
    }

    private func stop(_ reason: String) {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        if first { notice(.stopped(reason: reason)) }
    }

    /// What the journal leaves free on its disk, for the scratch files and the bundle.
    static let spaceKept: Int64 = 256 << 20

    /// Bytes free to this user on the disk of `path`.
    private static func freeBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Writes all of `bytes` at `offset`: nil, or the errno.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: UInt64) -> Int32? {
        bytes.withUnsafeBytes { FileIO.write(fd, $0, at: offset) }
    }

    /// `count` bytes at `offset`, or nil when the file ends first or cannot be read.
    private static func readExactly(_ fd: Int32, at offset: UInt64, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        let outcome = bytes.withUnsafeMutableBytes { FileIO.read(fd, into: $0, at: offset) }
        return outcome == .done(count) ? bytes : nil
    }

    private static func crc(ofFile path: String) -> UInt32? {
        guard let file = try? BundleFile(path: path) else { return nil }
        var crc: UInt32 = 0
        var at: UInt64 = 0
        while at < file.size {
            let count = Int(min(1 << 20, file.size - at))
            guard let bytes = try? file.read(at: at, count: count, what: "a kept body") else { return nil }
            crc = CRC32.checksum(bytes, continuing: crc)
            at += UInt64(count)
        }
        return crc
    }
}
