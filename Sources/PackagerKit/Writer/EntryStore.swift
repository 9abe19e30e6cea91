import Foundation
import OfflineBundle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A crawl's entries, each encoded into a scratch file as it is recorded and read back one at a time when the bundle
/// is written.
///
/// What is kept per entry besides its record is where the record lies and the prepared body (digest, sizes, where the
/// stream is), both in memory up to a megabyte or two and in files of the scratch folder past it (``ScratchArray``),
/// and its body while it waits to be prepared: a crawl of 50,000 pages held 20 MB of entries and their headers in
/// memory before, and an import of any size now holds the same memory for them.
final class EntryStore: Sendable {
    private struct State {
        var fd: Int32 = -1
        /// Records not yet written to the file.
        var pending: [UInt8] = []
        var written: UInt64 = 0
        /// Where each entry's record starts.
        var offsets: ScratchArray<UInt64>
        /// Bodies not yet prepared, by entry.
        var bodies: [Int: BundleWriter.BodySource] = [:]
        var prepared: PreparedBodies
        /// Why the file could not be written; reading any entry then fails with it.
        var failure: String?
        /// The stretch of the file read last, from `windowStart`, and the entry read last: entries read in order (the
        /// writer's passes) cost a read per ``windowSize``, not one per entry (a tenth of an import's writing).
        var window: [UInt8] = []
        var windowStart: UInt64 = 0
        var lastRead = -2
    }

    private let path: String
    private let state: Mutex<State>
    /// Records are gathered to this size before they are written.
    static let flushSize = 64 << 10
    /// How much of the file is read at once for entries read in order.
    static let windowSize = 256 << 10

    init(path: String) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        state = Mutex(State(offsets: ScratchArray(folder: folder, memoryLimit: 1 << 20, pageBytes: 16 << 10), prepared: PreparedBodies(folder: folder)))
    }

    deinit {
        state.withLock { state in
            if state.fd >= 0 {
                close(state.fd)
                unlink(path)
            }
        }
    }

    var count: Int { state.withLock { $0.offsets.count } }

    /// Records an entry; returns its index. A failure to write the file is reported when entries are read back.
    func append(_ entry: RecordedExchange) -> Int {
        let record = Self.encode(entry)
        return state.withLock { state in
            let index = state.offsets.count
            do {
                try state.offsets.append(state.written + UInt64(state.pending.count))
                try state.prepared.append(entry.prepared)
            } catch {
                // Counted all the same, so that indexes stay as given; reading back any entry fails.
                if state.failure == nil { state.failure = "\(error)" }
                return index
            }
            state.pending += record
            if let body = entry.body { state.bodies[index] = body }
            if state.pending.count >= Self.flushSize, state.failure == nil {
                do { try flush(&state) } catch { state.failure = "\(error)" }
            }
            return index
        }
    }

    /// The body of the entry at `index` was hashed and compressed: the store keeps that, and lets the received body go.
    func setPrepared(_ index: Int, _ prepared: PreparedBody) {
        state.withLock { state in
            // After the writer took the prepared bodies, nothing is kept here.
            guard index < state.prepared.count else { return }
            do { try state.prepared.set(prepared, at: index) } catch { if state.failure == nil { state.failure = "\(error)" } }
            state.bodies[index] = nil
        }
    }

    /// The prepared bodies, in the entries' order (nil where none is), handed over to the writer: the store no longer
    /// gives them with its entries.
    func takePrepared() -> PreparedBodies {
        state.withLock { state in
            let taken = state.prepared
            state.prepared = PreparedBodies(folder: nil)
            return taken
        }
    }

    /// The entry at `index`, read back.
    func entry(at index: Int) throws -> RecordedExchange {
        let (fd, offset, length, heldRecord, body, prepared) = try state.withLock {
            state -> (Int32, UInt64, Int, [UInt8]?, BundleWriter.BodySource?, PreparedBody?) in
            if let failure = state.failure { throw PackagerError(.io, "the crawl's entries could not be kept: \(failure)", subject: path) }
            let start: UInt64
            let end: UInt64
            let prepared: PreparedBody?
            do {
                start = try state.offsets.value(at: index)
                end = index + 1 < state.offsets.count ? try state.offsets.value(at: index + 1) : state.written + UInt64(state.pending.count)
                // Unless the writer took them.
                prepared = index < state.prepared.count ? try state.prepared.body(at: index) : nil
            } catch {
                throw PackagerError(.io, "cannot read back where the crawl's entries are", subject: path, cause: error)
            }
            let length = Int(end - start)
            let body = state.bodies[index]
            if start >= state.written {
                // Still in memory: copied out under the lock.
                let from = Int(start - state.written)
                return (-1, start, length, Array(state.pending[from..<(from + length)]), body, prepared)
            }
            if end > state.written { try flush(&state) }
            defer { state.lastRead = index }
            if start < state.windowStart || end > state.windowStart + UInt64(state.window.count) {
                // Out of the window: read on from here when the entries are read in order; else this one alone.
                guard index == state.lastRead + 1 else { return (state.fd, start, length, nil, body, prepared) }
                let size = Int(min(UInt64(max(Self.windowSize, length)), state.written - start))
                state.window = [UInt8](repeating: 0, count: size)
                state.windowStart = start
                let fd = state.fd
                guard state.window.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: start) }) == .done(size) else {
                    state.window = []
                    throw PackagerError(.io, "cannot read back the crawl's entries from \(path)")
                }
            }
            let from = Int(start - state.windowStart)
            return (-1, start, length, Array(state.window[from..<(from + length)]), body, prepared)
        }
        var record = heldRecord ?? []
        if heldRecord == nil {
            record = [UInt8](repeating: 0, count: length)
            let result = record.withUnsafeMutableBytes { FileIO.read(fd, into: $0, at: offset) }
            guard result == .done(length) else { throw PackagerError(.io, "cannot read back the crawl's entries from \(path)") }
        }
        guard var entry = Self.decode(record) else { throw PackagerError(.io, "the crawl's entry record \(index) in \(path) is damaged") }
        entry.body = body
        entry.prepared = prepared
        return entry
    }

    private func flush(_ state: inout State) throws {
        guard !state.pending.isEmpty else { return }
        if state.fd < 0 {
            state.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard state.fd >= 0 else { throw PackagerError(.io, "cannot create \(path)", subject: path, cause: SystemCallError(errno)) }
        }
        let offset = state.written
        if let error = state.pending.withUnsafeBytes({ FileIO.write(state.fd, $0, at: offset) }) {
            throw PackagerError(.io, "cannot write \(path)", subject: path, cause: SystemCallError(error))
        }
        state.written += UInt64(state.pending.count)
        state.pending.removeAll(keepingCapacity: true)
    }

    // MARK: - Records

    /// An entry without its body: the URL, status, kind, flags, times, source and headers, each string as a 32-bit
    /// length and its UTF-8 bytes, times as the bits of their seconds since 1970 (exactly as recorded).
    static func encode(_ entry: RecordedExchange) -> [UInt8] {
        var out = ScratchRecordWriter(
            capacity: 64 + entry.url.utf8.count + entry.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 8 })
        func time(_ date: Date?) {
            out.integer(UInt8(date == nil ? 0 : 1))
            out.integer(date?.timeIntervalSince1970.bitPattern ?? 0)
        }
        out.string(entry.url)
        out.integer(Int32(entry.status))
        out.string(entry.kind.description)
        let extras = entry.request != nil || !entry.volatile.isEmpty || entry.stableSHA256 != nil
        out.integer(UInt8((entry.lastModifiedSynthesized ? 1 : 0) | (entry.synthesizeETag ? 2 : 0) | (entry.source == nil ? 0 : 4) | (extras ? 8 : 0)))
        time(entry.fetchedAt)
        time(entry.originDate)
        if let source = entry.source { out.string(source) }
        out.integer(UInt32(entry.headers.count))
        for header in entry.headers {
            out.string(header.name)
            out.string(header.value)
        }
        if extras {
            // The request (method, headers, body, key headers; an absent value as one byte 0), the volatile pointers and
            // the stable digest.
            out.integer(UInt8(entry.request == nil ? 0 : 1))
            if let request = entry.request {
                out.string(request.method)
                out.integer(UInt32(request.headers.count))
                for header in request.headers {
                    out.string(header.name)
                    out.string(header.value ?? "")
                }
                // Bit 0: a body follows; bit 1: it is a secret; bit 2: the digest of a secret body not kept follows.
                let bodyBits = (request.body == nil ? 0 : 1) | (request.bodySecret ? 2 : 0) | (request.withheldBodyDigest == nil ? 0 : 4)
                out.integer(UInt8(bodyBits))
                if let body = request.body { out.string(body.base64EncodedString()) }
                if let digest = request.withheldBodyDigest { out.string(digest) }
                out.integer(UInt32(request.keyHeaders.count))
                for header in request.keyHeaders {
                    out.string(header.name)
                    out.integer(UInt8(header.value == nil ? 0 : 1))
                    if let value = header.value { out.string(value) }
                }
                out.string(request.paginate ?? "")
            }
            out.integer(UInt32(entry.volatile.count))
            for pointer in entry.volatile { out.string(pointer) }
            out.string(entry.stableSHA256 ?? "")
        }
        return out.bytes
    }

    static func decode(_ record: [UInt8]) -> RecordedExchange? {
        var reader = ScratchRecordReader(record)
        func time() -> Date?? {
            guard let present = reader.integer(UInt8.self), let bits = reader.integer(UInt64.self) else { return nil }
            return .some(present == 0 ? nil : Date(timeIntervalSince1970: Double(bitPattern: bits)))
        }
        guard let url = reader.string(), let status = reader.integer(Int32.self), let kindName = reader.string(), let kind = EntryKind(name: kindName),
            let flags = reader.integer(UInt8.self)
        else { return nil }
        guard let fetchedAt = time(), let originDate = time() else { return nil }
        var source: String?
        if flags & 4 != 0 {
            guard let text = reader.string() else { return nil }
            source = text
        }
        guard let count = reader.integer(UInt32.self) else { return nil }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(Int(min(count, 256)))
        for _ in 0..<count {
            guard let name = reader.string(), let value = reader.string() else { return nil }
            headers.append((name, value))
        }
        var entry = RecordedExchange(
            url: url, status: Int(status), kind: kind, headers: headers, body: nil, fetchedAt: fetchedAt, originDate: originDate, source: source,
            synthesizeETag: flags & 2 != 0, lastModifiedSynthesized: flags & 1 != 0)
        if flags & 8 != 0 {
            guard let hasRequest = reader.integer(UInt8.self) else { return nil }
            if hasRequest == 1 {
                guard let method = reader.string(), let headerCount = reader.integer(UInt32.self) else { return nil }
                var sent: [RecordedRequest.Header] = []
                for _ in 0..<headerCount {
                    guard let name = reader.string(), let value = reader.string() else { return nil }
                    sent.append(.init(name: name, value: value))
                }
                guard let bodyBits = reader.integer(UInt8.self) else { return nil }
                var body: Data?
                if bodyBits & 1 != 0 {
                    guard let text = reader.string(), let data = Data(base64Encoded: text) else { return nil }
                    body = data
                }
                var withheldDigest: String?
                if bodyBits & 4 != 0 {
                    guard let digest = reader.string() else { return nil }
                    withheldDigest = digest
                }
                guard let keyCount = reader.integer(UInt32.self) else { return nil }
                var keyHeaders: [RecordedRequest.Header] = []
                for _ in 0..<keyCount {
                    guard let name = reader.string(), let present = reader.integer(UInt8.self) else { return nil }
                    var value: String?
                    if present == 1 {
                        guard let text = reader.string() else { return nil }
                        value = text
                    }
                    keyHeaders.append(.init(name: name, value: value))
                }
                guard let paginate = reader.string() else { return nil }
                entry.request = RecordedRequest(method: method, headers: sent, body: body, keyHeaders: keyHeaders)
                entry.request?.paginate = paginate.isEmpty ? nil : paginate
                entry.request?.bodySecret = bodyBits & 2 != 0
                entry.request?.withheldBodyDigest = withheldDigest
            }
            guard let volatileCount = reader.integer(UInt32.self) else { return nil }
            for _ in 0..<volatileCount {
                guard let pointer = reader.string() else { return nil }
                entry.volatile.append(pointer)
            }
            guard let stable = reader.string() else { return nil }
            entry.stableSHA256 = stable.isEmpty ? nil : stable
        }
        guard reader.atEnd else { return nil }
        return entry
    }
}
