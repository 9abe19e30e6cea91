import Foundation
import HTTPTypes
import Logging
import Tracing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A remote object's exchanges with its server: a range of the pinned version (or the object sent whole), a request
/// sent with retries, and the checks whether the object was replaced.
extension RemoteObject {
    func throwChanged() throws -> Never {
        throw BundleError(
            .changed, "\(shownURL) was replaced since it was mounted (\(state.withLock { $0.changed } ?? "")); it must be mounted again")
    }

    /// A range request's fields: the caller's, the `Range`, and the conditions every range request carries: the pinned
    /// ETag (`If-Match`, strong ETags only, as RFC 9110 asks).
    private func rangeFields(_ span: Range<UInt64>) -> HTTPFields {
        var fields = options.headers.adding("Range", "bytes=\(span.lowerBound)-\(span.upperBound - 1)")
        if let etag, !etag.hasPrefix("W/") { fields.append(HTTPField(name: .ifMatch, value: etag)) }
        return fields
    }

    /// The first value of the field `name` (compared without case) in `headers`.
    package static func field(_ name: String, in headers: HTTPFields) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }

    /// One range of the pinned version, checked: the range asked for, of an object of the pinned size and ETag; or the
    /// whole object (from offset 0) when the server sends it whole. No reply's body is read past what was asked: the
    /// range's length, or for the whole object its pinned size, within the cache's bound.
    package func get(_ span: Range<UInt64>) throws -> (offset: UInt64, bytes: [UInt8]) {
        if state.withLock({ $0.changed }) != nil { try throwChanged() }
        let size = self.size
        let wholeTaken: Bool
        if case .download = options.wholeObject { wholeTaken = size <= options.cacheBytes } else { wholeTaken = false }
        let request = RemoteRequest(
            method: "GET", url: url, headers: rangeFields(span),
            timeout: options.timeout, maxBodyBytes: Int(clamping: max(size, UInt64(span.count))),
            bodyLimit: { status, headers in
                switch status {
                case 206:
                    guard let parsed = Self.contentRange(Self.field("Content-Range", in: headers)), parsed.range == span else { return 0 }
                    return span.count
                case 200:
                    guard wholeTaken else { return 0 }
                    if let length = Self.field("Content-Length", in: headers).flatMap({ UInt64($0) }), length != size { return 0 }
                    return Int(clamping: size)
                default:
                    return 0
                }
            },
            // The whole object goes to a file as it comes, never to memory.
            sink: { status, _ in status == 200 ? BodySpool() : nil })
        let reply = try Self.send(request, options: options, shownURL: shownURL)
        let received = reply.sink.map { ($0 as? BodySpool)?.written ?? 0 } ?? UInt64(reply.body.count)
        state.withLock {
            $0.requests += 1
            $0.fetchedBytes += received
        }
        Self.bytesFetched.increment(by: Int64(clamping: received))
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
            guard !reply.overLimit, reply.body.count == span.count else {
                throw BundleError(
                    .remote, "\(shownURL) sent \(reply.overLimit ? "more than \(span.count)" : "\(reply.body.count)") bytes for a range of \(span.count)")
            }
            return (span.lowerBound, reply.body)
        case 200:
            // The whole object, where a range was asked for (a proxy or CDN that ignores ranges).
            let length = reply.value(of: "Content-Length").flatMap { UInt64($0) } ?? (reply.overLimit ? nil : received)
            guard let length, length == size else {
                markChanged(length.map { "it is now \($0) bytes, not \(size)" } ?? "it is now more than \(size) bytes")
                try throwChanged()
            }
            guard case .download = options.wholeObject else {
                throw BundleError(.remote, "\(shownURL) answered a range request with the whole object (200): the server does not serve ranges")
            }
            // Not kept, every later read would download the whole object again.
            guard wholeTaken else { throw Self.wholeObjectNotKept(shownURL: shownURL, size: size) }
            guard !reply.overLimit, received == size, let whole = try Self.wholeObject(reply, shownURL: shownURL) else {
                throw BundleError(.remote, "\(shownURL) sent \(reply.overLimit ? "more than \(size)" : "\(received)") bytes of an object of \(size)")
            }
            let warn = state.withLock { state -> Bool in
                defer { state.warnedWhole = true }
                return !state.warnedWhole
            }
            if warn {
                logger.warning(
                    "the server answered a range request with the whole object; it is kept in the cache whole",
                    metadata: ["url": "\(shownURL)", "bytes": "\(size)"])
            }
            // Checked and kept from the file, body by body; before the mount has checked the index, read from there until
            // it has (as a cold mount's first reply is).
            if let check = state.withLock({ $0.check }) {
                _ = keep(from: whole, 0..<size, check: check)
            } else {
                stage(whole: whole)
            }
            // What was asked, for the caller (which checks it again, as any fetch).
            var bytes = [UInt8]()
            bytes.reserveCapacity(span.count)
            try whole.pieces(span) { piece, _ in bytes += piece }
            return (span.lowerBound, bytes)
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

    /// The object a reply with status 200 sent whole, as a store of this process's own that holds it: the file its
    /// body was streamed to, or (from a transport that keeps bodies in memory) a file it is written to; nil when that
    /// file could not be made.
    package static func wholeObject(_ reply: RemoteReply, shownURL: String) throws -> RangeStore? {
        if let spool = reply.sink as? BodySpool { return spool.store() }
        guard reply.sink == nil else { return nil }
        let file = try RangeStore(folder: nil, digest: "", size: UInt64(reply.body.count), budget: UInt64(reply.body.count))
        if !reply.body.isEmpty, !file.keep(reply.body, at: 0) {
            throw BundleError(.io, "cannot write what \(shownURL) sent to a file of this process's own")
        }
        return file
    }

    /// Sends `request`, again after a connection error, a timeout, a 429 or a 5xx (backing off), up to the retries; one
    /// span (``RemoteOptions/fetchSpanName``), whose trace the request carries.
    package static func send(_ request: RemoteRequest, options: RemoteOptions, shownURL: String) throws -> RemoteReply {
        let tracer = options.tracer ?? InstrumentationSystem.tracer
        return try tracer.withSpan(RemoteOptions.fetchSpanName, ofKind: .client) { span in
            var request = request
            if span.isRecording {
                span.attributes["http.request.method"] = request.method
                span.attributes["offline_bundle.url"] = shownURL
                if let range = field("Range", in: request.headers) { span.attributes["offline_bundle.range"] = range }
            }
            OfflineLoader.injectTraceContext(into: &request.headers, tracer: tracer)
            var attempt = 0
            while true {
                let outcome = options.transport.sendWaiting(request)
                let retryable: String
                switch outcome {
                case .success(let reply) where reply.status >= 500 || reply.status == 429:
                    retryable = "it answered \(reply.status)"
                case .success(let reply):
                    requestsOK.increment()
                    if span.isRecording {
                        span.attributes["http.response.status_code"] = reply.status
                        span.attributes["offline_bundle.bytes"] = Int(clamping: reply.sink.map { ($0 as? BodySpool)?.written ?? 0 } ?? UInt64(reply.body.count))
                        span.attributes["offline_bundle.attempts"] = attempt + 1
                    }
                    return reply
                case .failure(let error):
                    retryable = "\(error)"
                }
                requestsFailed.increment()
                guard attempt < options.retries else {
                    span.attributes["offline_bundle.attempts"] = attempt + 1
                    throw BundleError(.remote, "cannot read \(shownURL): \(retryable) (\(attempt + 1) attempt\(attempt == 0 ? "" : "s"))")
                }
                // 0.2 s, 0.4 s, 0.8 s, … with a quarter of jitter, at most 5 s.
                let delay = min(5, 0.2 * Double(1 << min(attempt, 5))) * Double.random(in: 0.75...1.25)
                usleep(useconds_t(delay * 1_000_000))
                attempt += 1
            }
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
    /// `size` is nil when the server did not say it (a body past the cache's bound, sent without a length).
    package static func wholeObjectNotKept(shownURL: String, size: UInt64?) -> BundleError {
        BundleError(
            .remote,
            "\(shownURL) does not serve ranges (it answered a range request with the whole object), and the cache cannot keep the "
                + "object's \(size.map { "\($0) bytes" } ?? "bytes") (more than it may hold, or its folder cannot be written): every read would download it whole; "
                + "give the cache at least that much room (--cache-bytes), or serve the bundle from a server that answers range requests")
    }

    /// The mount said already that the server sends the object whole: a read does not say it again.
    package func wholeObjectSaid() { state.withLock { $0.warnedWhole = true } }

    /// Asks the server whether the object is still the pinned version (a `HEAD` with `If-None-Match`): true when it
    /// was replaced (and marks it so), false when it was not or the server could not say.
    package func checkReplaced() -> Bool {
        if changeReason != nil { return true }
        var headers = options.headers
        if let etag { headers[.ifNoneMatch] = etag }
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
