import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import OfflineBundle

/// Whole responses the channel server has already given, ready to send again: for each plain GET (no conditional or
/// Range header) that a bundle answered with a body it has checked, the response head as bytes (without the lines
/// that change per request: Date, Age, Connection) and the body as sent.
///
/// One cache for all of a server's event loops, behind a lock held for a dictionary lookup. It answers only for the
/// loader generation it was filled from: a reload (``LoaderHandle/replace(with:)``) empties it on the next request.
/// Bodies held in memory larger than ``maxBody`` are not kept; past its budget it lets answers go at random (a site larger than the
/// budget, asked for in turn, still finds part of it here, where letting the oldest go would find none).
final class ResponseCache: Sendable {
    /// What a request must match to be answered from the cache: the raw Host, target and Accept-Encoding it sent,
    /// which are all a bundle's answer to a plain GET depends on (the route and the loader's lookup are functions of
    /// them; ``OfflineBundleChannelServer`` asks that `accepts` be one too).
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
        var cost: Int { head.readableBytes + body.memory + 256 }
    }

    /// A kept body: its bytes, or where they lie in a bundle file (sent with `sendfile`, as nginx sends a file).
    enum Body: Sendable {
        case bytes(ByteBuffer)
        /// The framing before (a gzip header), a span of the file, the framing after (a gzip trailer).
        case file(SharedFile, offset: Int, count: Int, prefix: ByteBuffer, suffix: ByteBuffer)

        /// Memory it holds.
        var memory: Int {
            switch self {
            case .bytes(let bytes): bytes.readableBytes
            case .file(_, _, _, let prefix, let suffix): prefix.readableBytes + suffix.readableBytes
            }
        }

        /// Bytes it sends.
        var count: Int {
            switch self {
            case .bytes(let bytes): bytes.readableBytes
            case .file(_, _, let count, let prefix, let suffix): prefix.readableBytes + count + suffix.readableBytes
            }
        }
    }

    /// A descriptor of a bundle file shared by the answers kept from it, closed when the last answer and the last
    /// write that uses it let it go. (Not a `NIOFileHandle`: one of those allows one user at a time, and the event
    /// loops send from the same file at once.)
    final class SharedFile: Sendable {
        let descriptor: Int32

        init(descriptor: Int32) { self.descriptor = descriptor }

        deinit { _ = Glibc.close(descriptor) }
    }

    /// Bodies sent from a file at least this large are kept as spans of it; smaller ones as bytes (one write).
    static let minFileSpan = 32 << 10

    /// Bodies larger than this are not kept (they are streamed or sent from the file).
    static let maxBody = 1 << 20

    private struct State {
        var generation: UInt64 = 0
        /// Each answer and where its key stands in `keys`.
        var answers: [Key: (answer: Answer, slot: Int)] = [:]
        /// One descriptor per bundle file answers are kept from.
        var files: [ObjectIdentifier: SharedFile] = [:]
        var keys: [Key] = []
        var used = 0
        var random = SystemRandomNumberGenerator()

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

    /// The answer kept for `key` under loader `generation`; a newer generation empties the cache first.
    func answer(for key: Key, generation: UInt64) -> Answer? {
        state.withLockedValue { state in
            if generation != state.generation { state.reset(to: generation) }
            return state.answers[key]?.answer
        }
    }

    /// The descriptor answers kept from `bundle`'s file share: `descriptor` (a new one, which this takes) when there
    /// is none yet, else the one there is (and `descriptor` is closed).
    func sharedFile(of bundle: MountedBundle, descriptor: Int32, generation: UInt64) -> SharedFile {
        let (shared, spare) = state.withLockedValue { state -> (SharedFile, Int32?) in
            if generation == state.generation, let file = state.files[ObjectIdentifier(bundle)] { return (file, descriptor) }
            let file = SharedFile(descriptor: descriptor)
            if generation == state.generation { state.files[ObjectIdentifier(bundle)] = file }
            return (file, nil)
        }
        if let spare { close(spare) }
        return shared
    }

    /// Keeps `answer` for `key`, when it fits, letting answers go past the budget.
    func keep(_ answer: Answer, for key: Key, generation: UInt64) {
        guard answer.body.memory <= Self.maxBody, answer.cost <= budget else { return }
        state.withLockedValue { state in
            guard generation == state.generation, state.answers[key] == nil else { return }
            while state.used + answer.cost > budget && !state.keys.isEmpty { state.evictOne() }
            state.answers[key] = (answer, state.keys.count)
            state.keys.append(key)
            state.used += answer.cost
        }
    }

    /// How many answers, and how many bytes, are kept.
    var usage: (count: Int, bytes: Int) { state.withLockedValue { ($0.answers.count, $0.used) } }
}

/// HTTP/1.1 response heads, written as bytes.
enum ResponseHead {
    /// The status line and a line per field (Age left out: it changes per request), plus `Server` when given.
    static func fixed(status: Int, fields: HTTPFields, route: BundleRoute?, serverName: String?, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 512)
        buffer.writeStaticString("HTTP/1.1 ")
        buffer.writeString(String(status))
        buffer.writeStaticString(" ")
        buffer.writeString(HTTPResponseStatus(statusCode: status).reasonPhrase)
        buffer.writeStaticString("\r\n")
        for field in fields where field.name != .age {
            // A recorded redirect to the origin itself stays on this server.
            let value = route != nil && (field.name == .location || field.name == .contentLocation) ? route!.localize(field.value) : field.value
            line(&buffer, field.name.canonicalName, value)
        }
        if let serverName { line(&buffer, "server", serverName) }
        return buffer
    }

    /// `name: value` and CRLF. Field values from `HTTPFields` are legal already; any other control byte (a CR or LF
    /// from a route's prefix, say) is written as a space, so no value can end the head or add a field.
    static func line(_ buffer: inout ByteBuffer, _ name: String, _ value: String) {
        buffer.writeString(name)
        buffer.writeStaticString(": ")
        if value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) {
            buffer.writeString(value)
        } else {
            for byte in value.utf8 { buffer.writeInteger(byte >= 0x20 && byte != 0x7F || byte == 0x09 ? byte : 0x20) }
        }
        buffer.writeStaticString("\r\n")
    }
}
