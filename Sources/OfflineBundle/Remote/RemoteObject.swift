import Foundation
import Logging
import Metrics
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One remote bundle object as mounted: its URL, the version pinned at mount (ETag, size), and the ranges fetched
/// so far. Reads are range requests, conditional on the pinned version, kept in a ``RangeStore``.
///
/// A read that misses blocks its thread until the range arrives (servers read bodies off their event loops and off
/// the cooperative pool: ``BundleResponse/bodyPlace`` says `.large` for a body not yet held). Reads of one range at
/// once share one request; the parts of a read that are missing go out as one request spanning them.
package final class RemoteObject: Sendable {
    /// The URL as given, query and all (sent, never printed).
    package let url: String
    /// The URL without its query (a presigned URL's signature): what messages and logs name.
    package let shownURL: String
    package let options: RemoteOptions
    /// The version pinned at mount.
    package let etag: String?
    package let lastModified: String?
    package let size: UInt64
    package let store: RangeStore
    private let state = Mutex(State())
    private let logger = Logger(label: "offline-bundle.remote")

    private struct State {
        var inflight: [Fetch] = []
        /// Why the object is taken as replaced (a 412, another ETag); nil while it is the one mounted.
        var changed: String?
        var watchers: [@Sendable () -> Void] = []
        var warnedWhole = false
        var requests = 0
        var fetchedBytes: UInt64 = 0
    }

    /// A range request in flight; readers of an overlapping range wait on it.
    private final class Fetch: Sendable {
        let range: Range<UInt64>
        let done = DispatchGroup()
        init(range: Range<UInt64>) {
            self.range = range
            done.enter()
        }
    }

    /// The most bytes one request fetches; a longer read goes out in pieces.
    static let maxRequestBytes: UInt64 = 16 << 20
    /// A read that misses at least this much right after bytes held (a body past its first 16 MiB, read in chunks) asks
    /// for more after it; a body's first read (its prefetch) asks for the body alone.
    static let readAheadFrom = 32 << 10
    static let readAhead: UInt64 = 4 << 20

    private static let requestsOK = Counter(label: "offline_bundle_remote_requests", dimensions: [("result", "ok")])
    private static let requestsFailed = Counter(label: "offline_bundle_remote_requests", dimensions: [("result", "failed")])
    private static let bytesFetched = Counter(label: "offline_bundle_remote_bytes")
    private static let cacheHits = Counter(label: "offline_bundle_remote_cache", dimensions: [("result", "hit")])
    private static let cacheMisses = Counter(label: "offline_bundle_remote_cache", dimensions: [("result", "miss")])

    package init(url: String, options: RemoteOptions, etag: String?, lastModified: String?, size: UInt64, store: RangeStore) {
        self.url = url
        self.shownURL = Self.shown(url)
        self.options = options
        self.etag = etag
        self.lastModified = lastModified
        self.size = size
        self.store = store
    }

    /// A bundle's location as it may be printed and logged: a URL without its query and fragment (a presigned URL's
    /// signature) and without credentials in its authority (`user:password@`); a file path as it is.
    package static func shown(_ url: String) -> String {
        guard RemoteOptions.isRemote(url) else { return url }
        let bare = String(url.prefix { $0 != "?" && $0 != "#" })
        guard let scheme = bare.range(of: "://") else { return bare }
        let rest = bare[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return bare }
        return String(bare[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
    }

    /// Requests sent and bytes fetched by this object so far.
    package var traffic: (requests: Int, bytes: UInt64) { state.withLock { ($0.requests, $0.fetchedBytes) } }

    /// Why the object is taken as replaced since it was mounted; nil while it is not.
    package var changeReason: String? { state.withLock { $0.changed } }

    /// Calls `watcher` once the object is seen replaced (at once when it was already).
    package func onChange(_ watcher: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.changed != nil { return true }
            state.watchers.append(watcher)
            return false
        }
        if now { watcher() }
    }

    private func markChanged(_ reason: String) {
        let watchers = state.withLock { state -> [@Sendable () -> Void] in
            guard state.changed == nil else { return [] }
            state.changed = reason
            defer { state.watchers = [] }
            return state.watchers
        }
        if !watchers.isEmpty { logger.warning("remote bundle replaced", metadata: ["url": "\(shownURL)", "reason": "\(reason)"]) }
        for watcher in watchers { watcher() }
    }

    /// Whether every byte of `range` is held locally.
    package func holds(_ range: Range<UInt64>) -> Bool { store.holds(range) }

    /// Fetches what `range` lacks (at most ``maxRequestBytes`` of it) in one request, so that the reads that follow are
    /// local; a no-op when it is held. Fails as a read would.
    ///
    /// `whole` asks for the range in one request however long (a mount's index).
    package func prefetch(_ range: Range<UInt64>, whole: Bool = false) throws {
        let clamped = range.lowerBound..<min(range.upperBound, whole ? size : range.lowerBound + Self.maxRequestBytes, size)
        guard !clamped.isEmpty else { return }
        try fill(clamped, maxSpan: whole ? UInt64(clamped.count) : Self.maxRequestBytes, readAhead: false)
    }

    /// Counts a request made for this object before it existed (a cold mount's first).
    package func count(requests: Int, bytes: UInt64) {
        state.withLock {
            $0.requests += requests
            $0.fetchedBytes += bytes
        }
    }

    /// Fills `buffer` with the object's bytes at `offset`, fetching what is not held.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, what: @autoclosure () -> String) throws {
        guard offset <= size, UInt64(buffer.count) <= size - offset else {
            throw BundleError(.truncated, "\(what()) lies beyond the end of \(shownURL) (offset \(offset), \(buffer.count) bytes, object \(size) bytes)")
        }
        let range = offset..<(offset + UInt64(buffer.count))
        if store.holds(range) {
            Self.cacheHits.increment()
        } else {
            Self.cacheMisses.increment()
            if let bytes = try fill(range) {
                // Not kept (the cache's budget is spent): the bytes go straight to the reader.
                buffer.copyBytes(from: bytes)
                return
            }
        }
        switch store.read(into: buffer, at: offset) {
        case .failed(let error):
            throw BundleError(.io, "cannot read \(what()) from the cache of \(shownURL)", underlying: SystemCallError(error))
        case .done(let count) where count < buffer.count:
            throw BundleError(.io, "the cache file of \(shownURL) ends early")
        case .done:
            break
        }
    }

    /// Makes `range` held, fetching its missing parts (waiting for requests in flight that overlap them). Returns the
    /// bytes of `range` when they could not be kept, else nil.
    @discardableResult
    private func fill(_ range: Range<UInt64>, maxSpan: UInt64 = maxRequestBytes, readAhead: Bool = true) throws -> [UInt8]? {
        while true {
            let gaps = store.missing(in: range)
            guard let first = gaps.first, let last = gaps.last else { return nil }
            var span = first.lowerBound..<last.upperBound
            // Sequential: the byte before the read is held, and the byte after it is not.
            if readAhead, span.count >= Self.readAheadFrom, span.lowerBound > 0, span.upperBound < size,
                store.holds((span.lowerBound - 1)..<span.lowerBound), store.missing(in: span.upperBound..<(span.upperBound + 1)).count == 1
            {
                span = span.lowerBound..<min(size, span.lowerBound + max(UInt64(span.count), Self.readAhead))
            }
            span = span.lowerBound..<min(span.upperBound, span.lowerBound + max(maxSpan, 1))
            let (fetch, owner) = state.withLock { state -> (Fetch, Bool) in
                if let running = state.inflight.first(where: { $0.range.overlaps(span) }) { return (running, false) }
                let fetch = Fetch(range: span)
                state.inflight.append(fetch)
                return (fetch, true)
            }
            if !owner {
                fetch.done.wait()
                // What it fetched may not have been kept, or may not cover all of ours: look again (and fetch ourselves).
                if store.missing(in: range).isEmpty { return nil }
                if state.withLock({ $0.changed }) != nil { try throwChanged() }
                continue
            }
            let bytes: [UInt8]
            do {
                defer {
                    state.withLock { $0.inflight.removeAll { $0 === fetch } }
                    fetch.done.leave()
                }
                bytes = try get(span)
                if store.keep(bytes, at: span.lowerBound) { continue }
            }
            // Not kept: hand over what the reader asked for, when this request held it all.
            if span.lowerBound <= range.lowerBound && span.upperBound >= range.upperBound {
                return Array(bytes[Int(range.lowerBound - span.lowerBound)..<Int(range.upperBound - span.lowerBound)])
            }
            return try fetchUnkept(range)
        }
    }

    /// Fetches `range` whole, for a reader whose bytes the cache cannot keep.
    private func fetchUnkept(_ range: Range<UInt64>) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var position = range.lowerBound
        while position < range.upperBound {
            let end = min(range.upperBound, position + Self.maxRequestBytes)
            out += try get(position..<end)
            position = end
        }
        return out
    }

    private func throwChanged() throws -> Never {
        throw BundleError(
            .changed, "\(shownURL) was replaced since it was mounted (\(state.withLock { $0.changed } ?? "")); it must be mounted again")
    }

    /// The conditions every range request carries: the pinned ETag (`If-Match`, strong ETags only, as RFC 9110 asks).
    private var conditions: [(name: String, value: String)] {
        guard let etag, !etag.hasPrefix("W/") else { return [] }
        return [("If-Match", etag)]
    }

    /// One range of the pinned version, checked: the range asked for, of an object of the pinned size and ETag.
    package func get(_ span: Range<UInt64>) throws -> [UInt8] {
        if state.withLock({ $0.changed }) != nil { try throwChanged() }
        let request = RemoteRequest(
            method: "GET", url: url, headers: options.headers + [("Range", "bytes=\(span.lowerBound)-\(span.upperBound - 1)")] + conditions,
            timeout: options.timeout, maxBodyBytes: Int(min(size, UInt64(Int.max))))
        let reply = try Self.send(request, options: options, shownURL: shownURL)
        state.withLock {
            $0.requests += 1
            $0.fetchedBytes += UInt64(reply.body.count)
        }
        Self.bytesFetched.increment(by: Int64(reply.body.count))
        if let sent = reply.value(of: "ETag"), let etag, sent != etag {
            markChanged("its ETag is now \(sent), not \(etag)")
            try throwChanged()
        }
        switch reply.status {
        case 206:
            let parsed = Self.contentRange(reply.value(of: "Content-Range"))
            guard let parsed, parsed.range == span else {
                throw BundleError(
                    .remote,
                    "\(shownURL) answered the range \(span.lowerBound)-\(span.upperBound - 1) with \(reply.value(of: "Content-Range").map { "Content-Range: \($0)" } ?? "no Content-Range")"
                )
            }
            if let total = parsed.total, total != size {
                markChanged("it is now \(total) bytes, not \(size)")
                try throwChanged()
            }
            guard reply.body.count == span.count else {
                throw BundleError(.remote, "\(shownURL) sent \(reply.body.count) bytes for a range of \(span.count)")
            }
            return reply.body
        case 200:
            // The whole object, where a range was asked for (a proxy or CDN that ignores ranges).
            guard UInt64(reply.body.count) == size else {
                markChanged("it is now \(reply.body.count) bytes, not \(size)")
                try throwChanged()
            }
            guard case .download = options.wholeObject else {
                throw BundleError(.remote, "\(shownURL) answered a range request with the whole object (200): the server does not serve ranges")
            }
            // Not kept, every later read would download the whole object again.
            guard store.keep(reply.body, at: 0) || store.holds(0..<size) else { throw Self.wholeObjectNotKept(shownURL: shownURL, size: size) }
            let warn = state.withLock { state -> Bool in
                defer { state.warnedWhole = true }
                return !state.warnedWhole
            }
            if warn {
                logger.warning(
                    "the server answered a range request with the whole object; it is kept in the cache whole",
                    metadata: ["url": "\(shownURL)", "bytes": "\(size)"])
            }
            return Array(reply.body[Int(span.lowerBound)..<Int(span.upperBound)])
        case 412:
            markChanged("the server answered 412: it no longer has the ETag \(etag ?? "")")
            try throwChanged()
        case 416:
            markChanged("the server answered 416 to a range inside the \(size) bytes it had")
            try throwChanged()
        default:
            throw BundleError(.remote, "\(shownURL) answered \(reply.status) to a range request")
        }
    }

    /// Sends `request`, again after a connection error, a timeout, a 429 or a 5xx (backing off), up to the retries.
    package static func send(_ request: RemoteRequest, options: RemoteOptions, shownURL: String) throws -> RemoteReply {
        var attempt = 0
        while true {
            let outcome = options.transport.sendWaiting(request)
            let retryable: String
            switch outcome {
            case .success(let reply) where reply.status >= 500 || reply.status == 429:
                retryable = "it answered \(reply.status)"
            case .success(let reply):
                requestsOK.increment()
                return reply
            case .failure(let error):
                retryable = "\(error)"
            }
            requestsFailed.increment()
            guard attempt < options.retries else {
                throw BundleError(.remote, "cannot read \(shownURL): \(retryable) (\(attempt + 1) attempt\(attempt == 0 ? "" : "s"))")
            }
            // 0.2 s, 0.4 s, 0.8 s, … with a quarter of jitter, at most 5 s.
            let delay = min(5, 0.2 * Double(1 << min(attempt, 5))) * Double.random(in: 0.75...1.25)
            usleep(useconds_t(delay * 1_000_000))
            attempt += 1
        }
    }

    /// `bytes a-b/total` (total may be `*`): the range and the total, or nil when it does not parse.
    package static func contentRange(_ value: String?) -> (range: Range<UInt64>, total: UInt64?)? {
        guard let value else { return nil }
        let text = value.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = text.dropFirst(6)
        guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-"),
            let first = UInt64(spec[..<dash]), let last = UInt64(spec[spec.index(after: dash)..<slash]), first <= last, last < UInt64.max
        else { return nil }
        let totalText = spec[spec.index(after: slash)...]
        let total = totalText == "*" ? nil : UInt64(totalText)
        if totalText != "*" && total == nil { return nil }
        return (first..<(last + 1), total)
    }

    /// What the server holds at the URL now, as its validators say (a `HEAD`): ETag, length and Last-Modified, so two
    /// answers compare equal when the object did not change between them; nil when the server could not be asked or
    /// has no object there.
    package func currentVersion() -> String? {
        let request = RemoteRequest(method: "HEAD", url: url, headers: options.headers, timeout: options.timeout, maxBodyBytes: 0)
        guard case .success(let reply) = options.transport.sendWaiting(request) else { return nil }
        state.withLock { $0.requests += 1 }
        guard reply.status == 200 else { return nil }
        return ["ETag", "Content-Length", "Last-Modified"].map { reply.value(of: $0) ?? "-" }.joined(separator: " ")
    }

    /// The refusal of an object that comes only whole and that the cache cannot keep.
    package static func wholeObjectNotKept(shownURL: String, size: UInt64) -> BundleError {
        BundleError(
            .remote,
            "\(shownURL) does not serve ranges (it answered a range request with the whole object), and the cache cannot keep the "
                + "object's \(size) bytes (more than it may hold, or its folder cannot be written): every read would download it whole; "
                + "give the cache at least that much room (--cache-bytes), or serve the bundle from a server that answers range requests")
    }

    /// The mount said already that the server sends the object whole: a read does not say it again.
    package func wholeObjectSaid() { state.withLock { $0.warnedWhole = true } }

    /// Asks the server whether the object is still the pinned version (a `HEAD` with `If-None-Match`): true when it
    /// was replaced (and marks it so), false when it was not or the server could not say.
    package func checkReplaced() -> Bool {
        if changeReason != nil { return true }
        var headers = options.headers
        if let etag { headers.append(("If-None-Match", etag)) }
        let request = RemoteRequest(method: "HEAD", url: url, headers: headers, timeout: options.timeout, maxBodyBytes: 0)
        guard case .success(let reply) = options.transport.sendWaiting(request) else { return false }
        state.withLock { $0.requests += 1 }
        switch reply.status {
        case 304:
            return false
        case 200:
            let sentETag = reply.value(of: "ETag")
            let length = reply.value(of: "Content-Length").flatMap { UInt64($0) }
            if let etag, let sentETag, sentETag != etag {
                markChanged("its ETag is now \(sentETag), not \(etag)")
                return true
            }
            if let length, length != size {
                markChanged("it is now \(length) bytes, not \(size)")
                return true
            }
            if etag == nil, let lastModified, let sent = reply.value(of: "Last-Modified"), sent != lastModified {
                markChanged("it was modified at \(sent)")
                return true
            }
            return false
        case 404, 410:
            // Gone: the mounted version keeps answering what it holds; a mount now would fail.
            return false
        default:
            return false
        }
    }
}
