internal import CLibDeflate
internal import CZlib
import Crypto
import Foundation
import OfflineBundle

/// A WARC file (1.0 or 1.1, ISO 28500) read record by record: plain, or gzipped (a member per record, as WARC tools
/// write it, or several records to a member). Each record is checked as it is read: its header must end, its block
/// must be as long as its `Content-Length` says and be followed by the two line ends that close a record, and its
/// `WARC-Block-Digest` (SHA-1 in base32, SHA-256 in hex or base32, as tools write them) must match. What fails is
/// refused naming where it starts in the file: the gzip member's offset, or the record's own in a plain file.
struct WARCReader {
    struct Record {
        /// Where the record starts: its gzip member's offset in the file, or its own offset in a plain file.
        var offset: Int
        /// The record's named fields, names lowercased (a repeated name keeps its first value).
        var fields: [String: String]
        var block: Data
        var type: String { fields["warc-type"]?.lowercased() ?? "" }
        /// The block's HTTP message, parsed ahead (``WARCRecordStream``), for a request, response or revisit record.
        var message: Result<WARCImporter.HTTPMessage, WARCImporter.Unreadable>?
        /// Whether a response's payload is the one its `WARC-Payload-Digest` names, checked ahead; nil when not checked.
        var payloadMatches: Bool?
        /// The SHA-256 of the response's payload as stored (not dechunked), when its payload digest is a `sha256:` one
        /// that matched: the bundle's digest of the body when it is stored as it is.
        var payloadSHA256: BodyDigest?
        /// Where the record starts among its gzip member's inflated bytes (0 in a plain file): a record may begin inside
        /// a member that another record ends in, and is found again by both (``WARCReader/seek(to:within:)``).
        var within = 0
        /// Whether its gzip member was too large to inflate whole (``WARCReader/wholeLimit``): one member for many
        /// records, as `gzip` makes of a whole file, which reading again from its start would inflate again.
        var inLargeMember = false

        /// Parses the block's HTTP message and checks the payload digest, on the reader's thread: the importer's thread
        /// is the busier one.
        mutating func readAhead() {
            let type = self.type
            guard type == "response" || type == "revisit" || type == "request" else { return }
            do {
                let parsed = try WARCImporter.http(block)
                message = .success(parsed)
                if type == "response", let digest = fields["warc-payload-digest"] {
                    var sha256: BodyDigest?
                    payloadMatches = WARCImporter.payload(of: parsed, matches: digest, sha256: &sha256)
                    payloadSHA256 = sha256
                }
            } catch let problem as WARCImporter.Unreadable {
                message = .failure(problem)
            } catch {
                message = .failure(WARCImporter.Unreadable(reason: "\(error)"))
            }
        }
    }

    let name: String
    private let data: Data
    private let gzip: Bool
    /// Where the next gzip member starts in the file.
    private var position = 0
    /// Inflated bytes of the member sought (``seek(to:within:)``) to pass over before its record.
    private var skip = 0
    /// Whether the last member was inflated whole.
    private var lastMemberWhole = true
    /// The member being inflated a piece at a time, if one is (a copy of the reader shares it: one copy reads).
    private var streaming: MemberStream?
    /// Bytes read (inflated) and not yet taken by a record.
    private var pending = Data()
    private var pendingStart = 0
    /// Where in `pending` each member's bytes begin, the member's offset in the file, and how many of its inflated bytes
    /// were let go before `at` (taken by records, once the next member was needed).
    private var members: [(at: Int, offset: Int, skipped: Int)] = []
    /// Where a member is inflated to, a piece at a time (made once: zeroing it per member cost as much as inflating).
    private var chunk = [UInt8](repeating: 0, count: 256 << 10)
    /// How much of the mapped file was given back to the system: read once, its pages need not stay resident.
    private var released = 0
    /// Where a member is inflated whole (grown up to ``wholeLimit`` for a larger one), and what inflates it.
    private var whole = [UInt8](repeating: 0, count: 1 << 20)
    private let decompressor = Decompressor()

    /// libdeflate's decompressor, freed with the reader.
    final class Decompressor {
        let pointer: OpaquePointer?
        init() { pointer = libdeflate_alloc_decompressor() }
        deinit { if let pointer { libdeflate_free_decompressor(pointer) } }
    }

    /// Opens the WARC at `path` (mapped, not read whole into memory).
    init(path: String) throws {
        name = path
        data = try Self.map(path)
        gzip = data.count >= 2 && data[data.startIndex] == 0x1f && data[data.startIndex + 1] == 0x8b
        if !gzip {
            pending = data
            members = [(0, 0, 0)]
        }
    }

    /// The file at `path` mapped read-only (its pages given back by ``release(upTo:)`` once read).
    private static func map(_ path: String) throws -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PackagerError(.io, "cannot read the WARC file", subject: path, cause: SystemCallError(errno)) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw PackagerError(.io, "cannot read the WARC file", subject: path, cause: SystemCallError(errno)) }
        let size = Int(info.st_size)
        guard size > 0 else { return Data() }
        guard let base = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
            throw PackagerError(.io, "cannot map the WARC file", subject: path, cause: SystemCallError(errno))
        }
        return Data(bytesNoCopy: base, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
    }

    private func fail(_ offset: Int, _ message: String) -> PackagerError {
        PackagerError(.invalidInput, "\(name): the record at offset \(offset) \(message)")
    }

    /// The file offset a byte of `pending` at `index` came from (its member's).
    private func offset(at index: Int) -> Int {
        guard gzip else { return index }
        return members.last { $0.at <= index }?.offset ?? position
    }

    /// Reads on from a record's place (``Record/offset`` and ``Record/within``): its gzip member, and its start among
    /// that member's inflated bytes; or its own offset in a plain file.
    mutating func seek(to offset: Int, within: Int = 0) {
        let target = max(0, min(offset, data.count))
        if gzip {
            position = target
            pending = Data()
            pendingStart = 0
            members = []
            streaming = nil
            skip = max(0, within)
        } else {
            pendingStart = target
        }
    }

    /// The next record, checked; nil at the end of the file.
    mutating func next() throws -> Record? {
        while true {
            // After a seek into a member: its bytes before the record are not a record's start.
            if skip > 0 {
                if pending.count >= skip {
                    pendingStart = skip
                    skip = 0
                } else {
                    guard try inflateMember() else { throw fail(position, "is not where it was: the file ends before it") }
                    continue
                }
            }
            // Line ends between records (some writers leave more than the two that end a record).
            while pendingStart < pending.count, pending[pending.startIndex + pendingStart] == 0x0D || pending[pending.startIndex + pendingStart] == 0x0A {
                pendingStart += 1
            }
            if pendingStart < pending.count, let record = try parse() { return record }
            // More bytes are needed: the next member, or the end.
            guard gzip, try inflateMember() else {
                guard pendingStart >= pending.count else {
                    throw fail(offset(at: pendingStart), "is cut short: the file ends inside it")
                }
                return nil
            }
        }
    }

    /// A whole record at `pendingStart`, or nil when more bytes are needed for it.
    private mutating func parse() throws -> Record? {
        let base = pending.startIndex
        let start = base + pendingStart
        let at = offset(at: pendingStart)
        let crlf2 = Data("\r\n\r\n".utf8)
        // A record begins `WARC/`: anything else is not a WARC (or not one at this offset), said before looking further.
        let prefix = pending[start..<min(pending.endIndex, start + 5)]
        if !Data("WARC/".utf8).starts(with: prefix) {
            let shown = String(decoding: pending[start..<min(pending.endIndex, start + 40)], as: UTF8.self).split(separator: "\n").first ?? ""
            throw fail(at, "is not a WARC record: it begins '\(shown)', not 'WARC/1.1' (is this a WARC file?)")
        }
        // The header: at most 1 MiB before its blank line.
        let window = min(pending.endIndex, start + (1 << 20)) - start
        guard let headerLength = WARCLines.blankLine(in: pending, from: start, count: window) else {
            if window >= 1 << 20 { throw fail(at, "has a header that does not end within 1 MiB") }
            return nil
        }
        let headerEnd = (lowerBound: start + headerLength, upperBound: start + headerLength + 4)
        // Parsed on the bytes in place: Foundation's string trimming and splitting took half the time of an import, and
        // slices of Data most of the rest.
        let head: WARCLines.Head
        do {
            head = try WARCLines.head(pending, from: start, count: headerLength)
        } catch let problem as WARCLines.Malformed {
            throw fail(at, problem.reason)
        }
        guard head.startLine.hasPrefix("WARC/") else { throw fail(at, "is not a WARC record (is this a WARC file?)") }
        var fields: [String: String] = [:]
        for (name, value) in head.fields where fields[name] == nil { fields[name] = value }
        guard let lengthText = fields["content-length"], let length = Int(lengthText), length >= 0 else {
            throw fail(at, "has no Content-Length, or not a number")
        }
        let blockStart = headerEnd.upperBound
        // Compared without adding to `length`: a Content-Length near Int.max must not overflow.
        guard pending.endIndex - blockStart - 4 >= length else {
            // Not all here yet: the next member may hold the rest; at the end of the file, it is cut short.
            if gzip && position < data.count { return nil }
            throw fail(at, "is cut short: its Content-Length says \(length) bytes, the file holds \(max(0, pending.endIndex - blockStart))")
        }
        guard pending[(blockStart + length)..<(blockStart + length + 4)].elementsEqual(crlf2) else {
            throw fail(at, "does not end where its Content-Length (\(length)) says: the two line ends that close a record are not there")
        }
        let block = Data(pending[blockStart..<(blockStart + length)])
        if let digest = fields["warc-block-digest"], Self.digest(digest, matches: block) == false {
            throw fail(at, "does not match its WARC-Block-Digest (\(digest)): it is damaged")
        }
        pendingStart = blockStart + length + 4 - base
        if !gzip { release(upTo: pendingStart) }
        var record = Record(offset: at, fields: fields, block: block)
        if gzip {
            let member = members.last { $0.at <= start - base }
            record.within = (start - base) - (member?.at ?? 0) + (member?.skipped ?? 0)
            record.inLargeMember = !lastMemberWhole
        }
        return record
    }

    /// Inflates the gzip member at `position` onto `pending` (a piece of it, for a member too large to inflate whole);
    /// false at the end of the file.
    private mutating func inflateMember() throws -> Bool {
        guard position < data.count else { return false }
        letGoOfTaken()
        if streaming == nil {
            let memberOffset = position
            guard data.count - position >= 2, data[data.startIndex + position] == 0x1f, data[data.startIndex + position + 1] == 0x8b else {
                throw fail(memberOffset, "is not a gzip member (a gzipped WARC is a series of them)")
            }
            if pending.isEmpty { members.removeAll() }
            members.append((pending.count, memberOffset, 0))
            lastMemberWhole = true
            if let consumed = inflateWhole() {
                position += consumed
                release(upTo: position)
                return true
            }
            lastMemberWhole = false
            guard let started = MemberStream(start: memberOffset) else { throw PackagerError(.internal, "zlib could not start inflating") }
            streaming = started
        }
        return try inflatePiece()
    }

    /// What records took is let go of; a record begun in an earlier member keeps that member's offset.
    private mutating func letGoOfTaken() {
        guard pendingStart > 0 else { return }
        let taken = pendingStart
        let containing = members.last { $0.at <= taken }
        pending.removeSubrange(pending.startIndex..<(pending.startIndex + taken))
        members =
            [(0, containing?.offset ?? position, (containing?.skipped ?? 0) + taken - (containing?.at ?? 0))]
            + members.filter { $0.at > taken }.map { ($0.at - taken, $0.offset, $0.skipped) }
        pendingStart = 0
    }

    /// zlib inflating a member too large to inflate whole, kept from one call to the next: such a member (a whole
    /// file gzipped as one) is inflated a piece at a time as the records need it, never into memory at once. The
    /// stream lives on the heap, where zlib's state can point back to it.
    final class MemberStream {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        /// The member's offset in the file.
        let start: Int

        init?(start: Int) {
            self.start = start
            stream.initialize(to: z_stream())
            guard czlib_inflate_init_auto(stream) == Z_OK else {
                stream.deinitialize(count: 1)
                stream.deallocate()
                return nil
            }
        }

        deinit {
            inflateEnd(stream)
            stream.deinitialize(count: 1)
            stream.deallocate()
        }
    }

    /// The next piece (at most ``chunk``'s size) of the member ``streaming`` inflates, onto `pending`.
    private mutating func inflatePiece() throws -> Bool {
        guard let member = streaming else { return false }
        let stream = member.stream
        let taken = Int(stream.pointee.total_in)
        let available = data.count - member.start - taken
        let status = data.withUnsafeBytes { raw -> Int32 in
            // Given again on each call from what zlib took so far: no pointer into the file outlives this closure.
            stream.pointee.next_in = UnsafeMutablePointer(mutating: raw.bindMemory(to: Bytef.self).baseAddress! + member.start + taken)
            stream.pointee.avail_in = uInt(min(available, Int(UInt32.max)))
            return chunk.withUnsafeMutableBytes { buffer -> Int32 in
                stream.pointee.next_out = buffer.bindMemory(to: Bytef.self).baseAddress
                stream.pointee.avail_out = uInt(buffer.count)
                return inflate(stream, Z_NO_FLUSH)
            }
        }
        let produced = chunk.count - Int(stream.pointee.avail_out)
        pending.append(contentsOf: chunk[0..<produced])
        let consumedNow = Int(stream.pointee.total_in)
        switch status {
        case Z_STREAM_END:
            position = member.start + consumedNow
            streaming = nil
            release(upTo: position)
        case Z_OK where produced > 0 || consumedNow > taken:
            release(upTo: member.start + consumedNow)
        case Z_OK, Z_BUF_ERROR:
            guard available > 0 else { throw fail(member.start, "is in a gzip member that is cut short: the file ends inside it") }
            throw fail(member.start, "is in a damaged gzip member (zlib makes no progress)")
        default:
            throw fail(member.start, "is in a damaged gzip member (\(stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"))")
        }
        return true
    }

    /// The member at `position` inflated whole by libdeflate onto `pending` (twice zlib's speed), when it inflates to
    /// at most ``wholeLimit``; the bytes of the file it took. Nil for a larger member, or one that does not inflate:
    /// zlib then reads it a piece at a time, and says what is wrong with it.
    private mutating func inflateWhole() -> Int? {
        guard let decompressor = decompressor.pointer else { return nil }
        let available = data.count - position
        while true {
            var taken = 0
            var produced = 0
            let result = data.withUnsafeBytes { raw in
                whole.withUnsafeMutableBytes { out in
                    libdeflate_gzip_decompress_ex(decompressor, raw.baseAddress! + position, available, out.baseAddress, out.count, &taken, &produced)
                }
            }
            if result == LIBDEFLATE_SUCCESS {
                pending.append(contentsOf: whole[0..<produced])
                return taken
            }
            guard result == LIBDEFLATE_INSUFFICIENT_SPACE, whole.count < Self.wholeLimit else {
                // Not kept at its largest for a member that zlib now inflates a piece at a time (16 MiB of the peak).
                if whole.count > 1 << 20 { whole = [UInt8](repeating: 0, count: 1 << 20) }
                return nil
            }
            whole = [UInt8](repeating: 0, count: min(whole.count * 4, Self.wholeLimit))
        }
    }

    /// The largest member inflated whole: past it, a piece at a time.
    static let wholeLimit = 16 << 20

    /// Lets the system drop the mapped pages before `offset` (read, and not read again): a 10 GB WARC read through would
    /// otherwise stay resident, as far as the memory it counts against the process goes. In steps of 2 MiB (steps of 8
    /// held 6 MiB more at the peak).
    private mutating func release(upTo offset: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let end = offset / page * page
        guard end - released >= 2 << 20 else { return }
        // Only the pages of this reader's own mapping (``map(_:)``): on memory that is not a file's, the call would zero it.
        data.withUnsafeBytes { raw in
            guard let base = raw.baseAddress, Int(bitPattern: base) % page == 0 else { return }
            _ = madvise(UnsafeMutableRawPointer(mutating: base + released), end - released, MADV_DONTNEED)
        }
        released = end
    }

    /// Whether `value` (`sha1:BASE32`, `sha256:HEX`, …) is the digest of `bytes`; nil for an algorithm or an encoding
    /// not known here (not checked, then).
    static func digest(_ value: String, matches bytes: Data) -> Bool? {
        var sha256: BodyDigest?
        return digest(value, matches: bytes, sha256: &sha256)
    }

    /// ``digest(_:matches:)``, and `bytes`' SHA-256 in `sha256` when `value` is a SHA-256 that matches them.
    static func digest(_ value: String, matches bytes: Data, sha256: inout BodyDigest?) -> Bool? {
        guard let colon = value.firstIndex(of: ":") else { return nil }
        // On bytes: Foundation's replacing and trimming cost more than the SHA-1 itself.
        let algorithm = String(decoding: value[..<colon].utf8.filter { $0 != 0x2D }, as: UTF8.self).lowercased()
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        var text = value[value.index(after: colon)...].utf8[...]
        while let first = text.first, blank(first) { text = text.dropFirst() }
        while let last = text.last, blank(last) { text = text.dropLast() }
        let encoded = String(decoding: text, as: UTF8.self)
        let computed: [UInt8]
        switch algorithm {
        case "sha1": computed = Array(Insecure.SHA1.hash(data: bytes))
        case "sha256": computed = Array(SHA256.hash(data: bytes))
        case "sha512": computed = Array(SHA512.hash(data: bytes))
        case "md5": computed = Array(Insecure.MD5.hash(data: bytes))
        default: return nil
        }
        guard let expected = decodeDigest(encoded, count: computed.count) else { return nil }
        guard expected == computed else { return false }
        if algorithm == "sha256" { sha256 = BodyDigest(bytes: computed) }
        return true
    }

    /// A digest's bytes from hex, base32 or base64, told apart by length.
    static func decodeDigest(_ text: String, count: Int) -> [UInt8]? {
        if text.utf8.count == count * 2, let bytes = hex(text) { return bytes }
        if text.utf8.count == (count * 8 + 4) / 5 || text.utf8.filter({ $0 != 0x3D }).count == (count * 8 + 4) / 5, let bytes = base32(text) {
            return bytes.count == count ? bytes : nil
        }
        if let bytes = Data(base64Encoded: text), bytes.count == count { return Array(bytes) }
        return nil
    }

    static func hex(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in text.utf8 {
            let value: UInt8
            switch character {
            case 0x30...0x39: value = character - 0x30
            case 0x61...0x66: value = character - 0x61 + 10
            case 0x41...0x46: value = character - 0x41 + 10
            default: return nil
            }
            if let h = high {
                bytes.append(h << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return high == nil ? bytes : nil
    }

    /// RFC 4648 base32 (the alphabet A–Z, 2–7), padding optional.
    static func base32(_ text: String) -> [UInt8]? {
        var bytes: [UInt8] = []
        var buffer = 0
        var bits = 0
        for character in text.utf8 where character != 0x3D {
            let value: Int
            switch character {
            case 0x41...0x5A: value = Int(character - 0x41)
            case 0x61...0x7A: value = Int(character - 0x61)
            case 0x32...0x37: value = Int(character - 0x32) + 26
            default: return nil
            }
            buffer = (buffer << 5) | value
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((buffer >> bits) & 0xFF))
            }
        }
        return bytes
    }
}

/// Lines and fields of a header read as bytes (WARC records' and HTTP messages').
enum WARCLines {
    /// A header: its first line, and its fields in order (names lowercased, values without the spaces around them, a
    /// folded line joined to the field before it with a space).
    struct Head {
        var startLine: String
        var fields: [(name: String, value: String)]
    }

    struct Malformed: Error { var reason: String }

    /// Where the blank line (CR LF CR LF) that ends a header starts, from `start` within `count` bytes of `data`.
    static func blankLine(in data: Data, from start: Int, count: Int) -> Int? {
        data.withUnsafeBytes { raw -> Int? in
            let bytes = raw.bindMemory(to: UInt8.self)
            let from = start - data.startIndex
            var i = from
            let end = from + count - 3
            while i < end {
                if bytes[i] == 0x0D && bytes[i + 1] == 0x0A && bytes[i + 2] == 0x0D && bytes[i + 3] == 0x0A { return i - from }
                i += 1
            }
            return nil
        }
    }

    /// The header in `count` bytes of `data` from `start` (without the blank line that ends it). A line that is not
    /// folded and has no colon is malformed when `strict`; skipped when not (HTTP messages as recorded).
    static func head(_ data: Data, from start: Int, count: Int, strict: Bool = true) throws -> Head {
        try data.withUnsafeBytes { raw -> Head in
            let all = raw.bindMemory(to: UInt8.self)
            let base = start - data.startIndex
            let bytes = UnsafeBufferPointer(rebasing: all[base..<(base + count)])
            func text(_ from: Int, _ to: Int, lower: Bool = false) -> String {
                var a = from
                var b = to
                while a < b && (bytes[a] == 0x20 || bytes[a] == 0x09) { a += 1 }
                while b > a && (bytes[b - 1] == 0x20 || bytes[b - 1] == 0x09) { b -= 1 }
                let slice = UnsafeBufferPointer(rebasing: bytes[a..<b])
                guard lower, slice.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return String(decoding: slice, as: UTF8.self) }
                return String(decoding: slice.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
            }
            var head = Head(startLine: "", fields: [])
            var lineStart = 0
            var first = true
            while lineStart <= bytes.count {
                var lineEnd = lineStart
                while lineEnd < bytes.count && bytes[lineEnd] != 0x0A { lineEnd += 1 }
                let next = lineEnd + 1
                if lineEnd > lineStart && bytes[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                defer { lineStart = next }
                if first {
                    head.startLine = text(lineStart, lineEnd)
                    first = false
                    continue
                }
                guard lineEnd > lineStart else { continue }
                if bytes[lineStart] == 0x20 || bytes[lineStart] == 0x09, !head.fields.isEmpty {
                    head.fields[head.fields.count - 1].value += " " + text(lineStart, lineEnd)
                    continue
                }
                var colon = lineStart
                while colon < lineEnd && bytes[colon] != 0x3A { colon += 1 }
                guard colon < lineEnd else {
                    if !strict { continue }
                    let shown = String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart..<min(lineEnd, lineStart + 60)]), as: UTF8.self)
                    throw Malformed(reason: "has a header line without a colon: '\(shown)'")
                }
                head.fields.append((text(lineStart, colon, lower: true), text(colon + 1, lineEnd)))
            }
            return head
        }
    }
}
