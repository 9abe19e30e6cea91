import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP1
import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole responses the channel server has already given, ready to send again: for each plain GET (no conditional or
/// Range header) that a bundle answered with a body it has checked, the response head as bytes (without the lines
/// that change per request: Date, Age, Connection) and the body as sent.
///
/// A stored body or a gzip answer of at least ``minFileSpan`` (128 KiB) goes out with `sendfile` from its span of the
/// bundle file, as nginx sends a file (a gzip answer's header and trailer around it, under TCP_CORK); other bodies
/// (inflated pages, smaller ones) are bytes, written with the head in one write. (With 32 KiB, a 43 KB gzip answer
/// went out by sendfile between two `setsockopt` calls for the cork, and answered 0.80x of nginx's `gzip_static`; as
/// bytes in one write, about 1.0x.) (Sending inflated pages from a file on tmpfs instead, to
/// spare the copy, measured slower on loopback: 0.64x of nginx against 0.76x for the python docs' pages in turn.)
///
/// One cache for all of a server's event loops, behind a lock held for a dictionary lookup. It answers only for the
/// loader generation it was filled from: a reload (``LoaderHandle/replace(with:)``) empties it on the next request.
/// Bodies held in memory larger than ``maxBody`` are not kept; past its budget it lets answers go at random (a site
/// larger than the budget, asked for in turn, still finds part of it here, where letting the oldest go would find
/// none).
final class ResponseCache: Sendable {
    /// What a request must match to be answered from the cache: the raw Host, target and Accept-Encoding it sent,
    /// which are all a bundle's answer to a plain GET depends on (the route, the server policy's Host verdict and the
    /// loader's lookup are functions of them).
    struct Key: Hashable, Sendable {
        var host: String?
        var target: String
        var acceptEncoding: String?
    }

    /// One response, as the first request that made it got it.
    struct Answer: Sendable {
        var status: Int
        /// The status line and the fixed header lines, each ending in CRLF; the head is not yet ended.
        var head: ByteBuffer
        var body: Body
        /// The Age the response had (seconds), and the second (`time()`) it was computed at; later requests add the
        /// seconds since (RFC 9111 §4.2.3: age grows with resident time).
        var age: (value: Int, at: Int)?
        var contentLength: String?
        var source: BundleResponse.Source
        /// The head's fields as HTTP/2 sends them, read once when kept by a server over TLS (where HTTP/2 answers
        /// from here without a stream, ``HTTP2Connection``); nil otherwise.
        var http2Fields: HPACKHeaders?
        /// Those fields as a header block of ``HPACKLiterals`` (which depends on nothing sent before it), written once
        /// when the answer is kept.
        var http2Block: ByteBuffer?
        var cost: Int { head.readableBytes * (http2Fields == nil ? 1 : 4) + body.memory + 256 + wireCopy }

        /// The bytes an HTTP/1.1 answer's wire bytes (``ResponseCache/http1Wire(for:generation:now:)``) hold beyond the
        /// head and body: a copy of both when the body is small enough to go out in the head's buffer.
        var wireCopy: Int {
            guard case .bytes(let body) = body, body.readableBytes <= ResponseCache.wireBody else { return 0 }
            return head.readableBytes + body.readableBytes + 96
        }

        /// The Age to send at `now` (`time()`), nil when the response had none.
        func age(at now: Int) -> Int? { age.map { $0.value + max(0, now - $0.at) } }
    }

    /// A kept body: its bytes, or where they lie in a file.
    enum Body: Sendable {
        case bytes(ByteBuffer)
        /// The framing before (a gzip header), a span of a file, the framing after (a gzip trailer).
        case file(FileBytes, prefix: ByteBuffer, suffix: ByteBuffer)

        /// Whether the body can still be sent as kept: bytes always; a span only while the bundle file is as it was
        /// mounted (one `fstat`), since a file written in place would send other bytes under the kept head.
        var stillThere: Bool {
            switch self {
            case .bytes: true
            case .file(let file, _, _): file.bundle.fileUnchanged
            }
        }

        /// Memory it holds (a span of the bundle file holds none).
        var memory: Int {
            switch self {
            case .bytes(let bytes): bytes.readableBytes
            case .file(_, let prefix, let suffix): prefix.readableBytes + suffix.readableBytes
            }
        }
    }

    /// A span of an open file, and what keeps the descriptor open and the bytes there while it is held (by the cache,
    /// and by each write that sends it).
    struct FileBytes: Sendable {
        var file: SharedFile
        var offset: Int
        var count: Int
        /// The mounted bundle whose file this is.
        var bundle: MountedBundle

        /// `span` of `file`, or of a descriptor of its own (the span's, which it then owns) when no file is given.
        init(_ span: BundleResponse.FileSpan, in file: SharedFile? = nil) {
            self.file = file ?? SharedFile(descriptor: span.descriptor)
            offset = Int(span.offset)
            count = Int(span.count)
            bundle = span.bundle
        }
    }

    /// A descriptor closed when the last answer and the last write that use it let it go. (Not a `NIOFileHandle`: one
    /// of those allows one user at a time, and the event loops send from the same file at once.)
    /// One file of one mounted bundle.
    struct FileKey: Hashable, Sendable {
        var bundle: ObjectIdentifier
        var store: Int
    }

    final class SharedFile: Sendable {
        let descriptor: Int32

        init(descriptor: Int32) { self.descriptor = descriptor }

        deinit { closeDescriptor(descriptor) }
    }

    /// Stored bodies and gzip answers at least this large go out with `sendfile`; smaller ones as bytes, in one write with
    /// the head.
    static let minFileSpan = 128 << 10
    /// Bodies held as bytes larger than this are not kept.
    static let maxBody = 4 << 20

    /// A kept body this large or smaller goes out in the buffer of its head; a larger one as the cache's own buffer.
    static let wireBody = 16 << 10

    /// What an HTTP/1.1 answer goes out as in one second: its head with that second's Date (and Age), the blank line,
    /// and the body when it is at most ``wireBody`` bytes.
    struct Wire {
        var second: Int
        var bytes: ByteBuffer
        /// The body, when it is larger than ``wireBody``: sent after `bytes`, as the cache's own buffer.
        var after: ByteBuffer?
    }

    /// An answer kept, where its key stands in the state's `keys`, and its HTTP/1.1 bytes of the second it was last
    /// given in: a class, so that a lookup costs one retain, not one for each of the answer's buffers. Only read and
    /// changed under the cache's lock.
    private final class Kept: @unchecked Sendable {
        let answer: Answer
        var slot: Int
        var wire: Wire?

        init(answer: Answer, slot: Int) {
            self.answer = answer
            self.slot = slot
        }
    }

    private struct State {
        var generation: UInt64 = 0
        /// Each answer, where its key stands in `keys`, and its HTTP/1.1 bytes of the second it was last given in.
        var answers: [Key: Kept] = [:]
        /// The `date` line of ``dateSecond``.
        var dateSecond = 0
        var dateLine = ByteBuffer()
        var keys: [Key] = []
        var used = 0
        var random = SystemRandomNumberGenerator()
        /// One descriptor per bundle file answers are kept from.
        /// By bundle and store (``BundleResponse/FileSpan/store``): a delta's spans lie in several files.
        var files: [FileKey: SharedFile] = [:]

        mutating func reset(to generation: UInt64) {
            self.generation = generation
            answers.removeAll()
            keys.removeAll()
            files.removeAll()
            used = 0
        }

        mutating func evictOne() {
            let slot = Int.random(in: 0..<keys.count, using: &random)
            let key = keys[slot]
            used -= answers.removeValue(forKey: key)?.answer.cost ?? 0
            let last = keys.removeLast()
            if slot < keys.count {
                keys[slot] = last
                answers[last]?.slot = slot
            }
        }
    }

    let budget: Int
    private let state = NIOLockedValueBox(State())

    init(budget: Int) { self.budget = budget }

    /// The answer kept for `key` under loader `generation`; a newer generation empties the cache first. A request that
    /// took its loader before a reload (an older generation) finds nothing, and leaves the newer answers in place.
    func answer(for key: Key, generation: UInt64) -> Answer? {
        state.withLockedValue { state in
            if generation > state.generation { state.reset(to: generation) }
            guard generation == state.generation else { return nil }
            return state.answers[key]?.answer
        }
    }

    /// The bytes of the HTTP/1.1 keep-alive answer kept for `key`, at the second `now` (`time()`), and the body to send
    /// after them when it is not in them; nil when no answer is kept for `key`, or when its body is not in memory (a
    /// span of the file: see ``BundleChannelHandler/answerFromCache(_:method:target:http10:keepAlive:context:)``).
    /// Made once a second per answer: an answer given again within the second is one buffer, copied by nobody.
    func http1Wire(for key: Key, generation: UInt64, now: Int) -> (wire: ByteBuffer, after: ByteBuffer?)? {
        state.withLockedValue { state in
            if generation > state.generation { state.reset(to: generation) }
            guard generation == state.generation, let kept = state.answers[key] else { return nil }
            // Only the wire is read when it is of this second (not the whole answer, which costs a retain a field).
            if let wire = kept.wire, wire.second == now { return (wire.bytes, wire.after) }
            let answer = kept.answer
            guard case .bytes(let body) = answer.body else { return nil }
            let after = body.readableBytes > Self.wireBody ? body : nil
            if state.dateSecond != now {
                state.dateSecond = now
                state.dateLine.clear()
                ResponseHead.line(&state.dateLine, "date", HTTPDates.format(Date(timeIntervalSince1970: TimeInterval(now))))
            }
            var bytes = ByteBuffer()
            bytes.reserveCapacity(answer.head.readableBytes + state.dateLine.readableBytes + 32 + (after == nil ? body.readableBytes : 0))
            bytes.writeImmutableBuffer(answer.head)
            bytes.writeImmutableBuffer(state.dateLine)
            if let age = answer.age(at: now) { ResponseHead.line(&bytes, "age", String(age)) }
            bytes.writeStaticString("\r\n")
            if after == nil { bytes.writeImmutableBuffer(body) }
            kept.wire = Wire(second: now, bytes: bytes, after: after)
            return (bytes, after)
        }
    }

    /// A span of `bundle`'s file, sharing one descriptor per bundle: `span.descriptor` (a new one, which this takes)
    /// when there is none yet, else the one there is (and `span.descriptor` is closed).
    func fileBytes(of span: BundleResponse.FileSpan, generation: UInt64) -> FileBytes {
        let (shared, spare) = state.withLockedValue { state -> (SharedFile, Int32?) in
            if generation == state.generation, let file = state.files[FileKey(bundle: ObjectIdentifier(span.bundle), store: span.store)] {
                return (file, span.descriptor)
            }
            let file = SharedFile(descriptor: span.descriptor)
            if generation == state.generation { state.files[FileKey(bundle: ObjectIdentifier(span.bundle), store: span.store)] = file }
            return (file, nil)
        }
        if let spare { closeDescriptor(spare) }
        return FileBytes(span, in: shared)
    }

    /// Keeps `answer` for `key`, when it fits, letting answers go past the budget.
    func keep(_ answer: Answer, for key: Key, generation: UInt64) {
        guard answer.body.memory <= Self.maxBody, answer.cost <= budget else { return }
        var answer = answer
        if let fields = answer.http2Fields, answer.http2Block == nil {
            var block = ByteBuffer()
            HPACKLiterals.write(fields, tableSizeUpdate: false, into: &block)
            answer.http2Block = block
        }
        state.withLockedValue { state in
            guard generation == state.generation, state.answers[key] == nil else { return }
            while state.used + answer.cost > budget && !state.keys.isEmpty { state.evictOne() }
            state.answers[key] = Kept(answer: answer, slot: state.keys.count)
            state.keys.append(key)
            state.used += answer.cost
        }
    }
}

/// Closes a descriptor (a free function: inside types `close` names NIO's channel method).
func closeDescriptor(_ descriptor: Int32) { _ = close(descriptor) }
