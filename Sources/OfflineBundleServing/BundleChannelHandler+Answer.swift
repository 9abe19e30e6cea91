import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOPosix
import OfflineBundle

// Answering one request: from the cache of whole answers, from a body read here, or one read off the event loop and
// pumped a chunk at a time; the HTTP/2 gate's turns and stall checks; a remote bundle's replacement asked again.
extension BundleChannelHandler {
    func answer(_ pending: Pending, context: ChannelHandlerContext) {
        let request = pending.head
        version = request.version
        let keepAlive = Self.keepsAlive(request) && !pending.closes
        let asked = Asked(request.headers)
        // RFC 9112 §3.2: a request with two Host fields, or an HTTP/1.1 request without one, is a 400.
        if asked.hosts > 1 || (asked.hosts == 0 && request.version.minor >= 1) {
            return badRequest(method: request.method.rawValue, target: request.uri, context: context)
        }
        let (loader, generation) = settings.serving.handle.snapshot
        // The raw Host and target: an answer depends on nothing else of a plain GET (the route and the policy are
        // functions of them), so whole answers are kept and found by them before the answer step runs.
        let key = asked.key(for: request.uri)
        let cacheable = cache != nil && asked.plain && request.method == .GET
        if cacheable, let answer = cache?.answer(for: key, generation: generation), answer.body.stillThere, !onHTTP2 || answer.http2Fields != nil {
            if let gate, !gate.mayWriteKept(Self.keptBytesSent(answer)) { return waitForKeptRoom(pending, gate: gate, context: context) }
            return answerFromCache(
                answer, method: request.method.rawValue, target: request.uri, http10: request.isHTTP10, keepAlive: keepAlive, context: context)
        }
        let fields = HTTPFields(request.headers)
        let record = ServedRequest(method: request.method.rawValue, target: request.uri, status: 500)
        let body = pending.body.map { Data($0.readableBytesView) }
        if pending.again == 0, let held = pending.body?.readableBytes, held > 0 {
            // Copied out: the connection holds it no longer.
            share.answered(held)
        }
        if pending.tooLarge { return empty(413, record, request: request, keepAlive: keepAlive, context: context) }
        if pending.refused { return empty(503, record, request: request, keepAlive: keepAlive, context: context) }
        let answer: ServeAnswer
        switch settings.serving.answer(method: request.method.rawValue, target: request.uri, host: asked.host, headers: fields, body: body, loader: loader) {
        case .miss:
            let policy = settings.serving.policy
            guard policy.explainsMisses || policy.sendsMissHeader else { return empty(404, record, request: request, keepAlive: keepAlive, context: context) }
            var explained = record
            explained.miss = settings.serving.explainMiss(
                method: request.method.rawValue, target: request.uri, host: asked.host, headers: fields, body: body, loader: loader)
            let header = policy.sendsMissHeader ? explained.miss?.fieldValue : nil
            return empty(404, explained, http10: request.isHTTP10, keepAlive: keepAlive, missHeader: header, context: context)
        case .status(let status): return empty(status, record, request: request, keepAlive: keepAlive, context: context)
        case .answer(let found): answer = found
        }
        let status = answer.status
        let encoded = encodedHead(status: status, fields: answer.headers, context: context)
        let age = answer.headers[.age].flatMap { Int($0) }
        let response = Response(
            head: encoded, age: age, record: answer.served(method: request.method.rawValue, target: request.uri), keepAlive: keepAlive,
            http10: request.isHTTP10)
        let place = answer.bodyPlace
        if place == .none {
            sendHead(response, context: context)
            return end(keepAlive: keepAlive, context: context)
        }
        // A bundle's answer to a plain GET is kept, whole, once its body has gone out checked (not when the loader has a
        // last-seen cache: what it keeps can take the bundle's place later).
        var filling: Filling?
        // An answer chosen among request variants (by Accept, a credential…) depends on more than the cache's key: it is
        // not kept, so the cache only ever holds answers that no such header changes. The loader says so of the entry
        // that answered, which may sit at the query-less URL rather than at the URL asked.
        if cacheable, loader.options.lastSeen == nil, case .bundle = answer.source, !answer.response.variesByRequest,
            let length = response.record.contentLength.flatMap({ Int($0) }),
            length <= ResponseCache.maxBody
        {
            filling = Filling(
                key: key, generation: generation, response: answer.response, length: length, fields: answer.headers, head: encoded,
                answer: .init(
                    status: status, head: ByteBuffer(), body: .bytes(ByteBuffer()), age: age.map { ($0, time(nil)) },
                    contentLength: response.record.contentLength, source: answer.source),
                bytes: context.channel.allocator.buffer(capacity: length))
        }
        // Checked before and sent as stored: from the file to the socket (sendfile), no copy through this process. Not
        // over TLS, which must read the bytes to encrypt them: there a body goes one chunk at a time, as any other, so a
        // client that does not read holds a chunk, not the span.
        if filling == nil, settings.sendfile, let span = answer.response.fileSpan() {
            guard span.descriptor >= 0 else { return empty(500, response.record, request: request, keepAlive: keepAlive, context: context) }
            sendHead(response, context: context)
            if !span.prefix.isEmpty { send(ByteBuffer(bytes: span.prefix), context: context) }
            sendFile(ResponseCache.FileBytes(span), context: context)
            if !span.suffix.isEmpty { send(ByteBuffer(bytes: span.suffix), context: context) }
            return end(keepAlive: keepAlive, context: context)
        }
        // In memory, or a small body of the bundle (one read of at most 64 KiB, from the page cache as a rule, as nginx
        // reads): answered where it stands, without a hop to the thread pool. A small body is read to its end, and so
        // through its checks, before the head goes out.
        if place == .small { return readHere(response, answer: answer, opened: { try answer.openBody() }, filling: filling, context: context) }
        if place == .memory {
            // In memory now, unless the mount's cache let it go meanwhile: then it is read on the thread pool below.
            do {
                if let opened = try answer.openBodyIfInMemory() {
                    return start(response, opened, answer: answer, filling: filling, context: context)
                }
            } catch {
                return empty(500, response.record, request: request, keepAlive: keepAlive, context: context)
            }
        }
        // The first chunks are read (and checked) on NIO's thread pool before the head goes out; requests behind this
        // one wait. On an HTTP/2 connection, streams take turns (``BodyGate``), so a client that opens many streams for
        // large bodies and reads none holds a few bodies' chunks, not one per stream.
        connection.answerStarted()
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context, filling), eventLoop: loop)
        @Sendable func readOffLoop() {
            bound.value.0.readingOffLoop = true
            NIOThreadPool.singleton.runIfActive(eventLoop: loop) { try answer.openBody() }.whenComplete { result in
                let (handler, context, filling) = bound.value
                handler.connection.answerEnded()
                handler.readingOffLoop = false
                // A stream reset while its first chunks were read: its turn goes back now, not while they were read.
                guard !handler.removed else { return handler.releaseGate() }
                if case .success(.some) = result {} else { handler.releaseGate() }
                if case .failure(let error as BundleError) = result, error.code == .changed, pending.again < Self.maxAgain {
                    // A remote bundle replaced since it was mounted: asked again once the reloader has mounted the new one.
                    return handler.answerAgain(pending, after: generation, context: context)
                }
                handler.whileWriting(context: context) {
                    switch result {
                    case .success(let opened?):
                        handler.start(response, opened, answer: answer, filling: filling, context: context)
                    case .success(nil):
                        handler.sendHead(response, context: context)
                        handler.end(keepAlive: keepAlive, context: context)
                    case .failure(let error as BundleError) where error.code == .changed || error.code == .remote:
                        // A remote bundle replaced, and no newer one mounted meanwhile (the replacement failed to
                        // mount), or its server did not send the body within the read's deadline: the body is not here
                        // now, and may be once the next upload is, or the fetch that goes on has brought it.
                        handler.unavailable(response.record, request: request, context: context)
                    case .failure:
                        // Never half-serve: a body that fails its checks is an error response (counted by the answer).
                        handler.empty(500, response.record, request: request, keepAlive: keepAlive, context: context)
                    }
                }
                handler.resume(context: context)
            }
        }
        guard let gate else { return readOffLoop() }
        gate.enter {
            let (handler, context, _) = bound.value
            guard !handler.removed else { return gate.leave() }
            handler.turn.entered(progress: handler.progress)
            handler.scheduleStallCheck(context: context)
            readOffLoop()
        }
    }

    /// Gives back this handler's turn for a large body, or its place among the stalled, if it holds either.
    func releaseGate() {
        stallCheck?.cancel()
        stallCheck = nil
        switch turn.release() {
        case .turn: gate?.leave()
        case .stalledPlace: gate?.unstall()
        case .nothing: break
        }
    }

    /// Once a ``BodyGate/stallPeriod`` while a turn is held: the turn's check (``StreamTurn/check(progress:reading:connectionTakesBytes:stall:)``),
    /// then another a period later unless the turn went to the next stream.
    func scheduleStallCheck(context: ChannelHandlerContext) {
        guard let gate else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        stallCheck = context.eventLoop.scheduleTask(in: gate.stallPeriod) {
            let (handler, context) = bound.value
            let action = handler.turn.check(
                progress: handler.progress, reading: handler.readingOffLoop || handler.readingNextChunk,
                connectionTakesBytes: context.channel.parent?.isWritable ?? true, stall: { gate.stall() })
            switch action {
            case .checkAgain: handler.scheduleStallCheck(context: context)
            case .stalled: handler.stallCheck = nil
            case .none: break
            }
        }
    }

    /// Times a request caught by a remote bundle's replacement is asked again of the next mount.
    static let maxAgain = 4

    /// Waits (on the event loop's timer, up to 10 s) for the handle to hold another loader than `generation`'s, then
    /// answers `pending` again from it, or, when none came or its replacement failed to mount, with 503
    /// (``unavailable(_:request:context:)``); requests behind it wait. A remote bundle's replacement is seen by a read
    /// (412, another ETag), which tells the reloader at once.
    func answerAgain(_ pending: Pending, after generation: UInt64, context: ChannelHandlerContext) {
        connection.answerStarted()
        var retried = pending
        retried.again += 1
        let again = retried
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let deadline = NIODeadline.now() + .seconds(10)
        @Sendable func check() {
            let (handler, context) = bound.value
            guard !handler.removed else { return }
            let handle = handler.settings.serving.handle
            if handle.snapshot.generation != generation { return handler.answerNow(again, context: context) }
            if NIODeadline.now() > deadline || handle.replacementFailed(for: generation) {
                // No newer bundle was mounted (the replacement failed to mount, or none came in time): asking the
                // same one again would fail alike.
                handler.connection.answerEnded()
                let request = again.head
                handler.whileWriting(context: context) {
                    handler.unavailable(ServedRequest(method: request.method.rawValue, target: request.uri, status: 503), request: request, context: context)
                }
                return handler.resume(context: context)
            }
            context.eventLoop.scheduleTask(in: .milliseconds(10)) { check() }
        }
        check()
    }

    /// A response on its way: its head so far, and what the per-request lines and the access log need.
    struct Response {
        var head: Head
        var age: Int?
        var record: ServedRequest
        var keepAlive: Bool
        var http10: Bool
    }

    /// An answer being kept in the response cache as its body goes out.
    final class Filling {
        let key: ResponseCache.Key
        let generation: UInt64
        /// The loader's answer, asked again for a span of the file once its body went out checked.
        let response: BundleResponse
        /// The body's length, from the head.
        let length: Int
        /// The answer's fields, and its head as this connection wrote it: the kept answer's head for the other protocol
        /// is made of them.
        let fields: HTTPFields
        let head: Head
        let answer: ResponseCache.Answer
        /// The body as sent so far.
        var bytes: ByteBuffer

        init(
            key: ResponseCache.Key, generation: UInt64, response: BundleResponse, length: Int, fields: HTTPFields, head: Head, answer: ResponseCache.Answer,
            bytes: ByteBuffer
        ) {
            self.key = key
            self.generation = generation
            self.response = response
            self.length = length
            self.fields = fields
            self.head = head
            self.answer = answer
            self.bytes = bytes
        }
    }

    /// Past the HTTP/2 connection's bound on kept bytes in flight (``BodyGate/keptLimit``): the request is answered
    /// again once the socket took some of them; requests behind it wait.
    func waitForKeptRoom(_ pending: Pending, gate: BodyGate, context: ChannelHandlerContext) {
        connection.answerStarted()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        gate.whenKeptFits {
            let (handler, context) = bound.value
            guard !handler.removed else { return }
            handler.answerNow(pending, context: context)
        }
    }

    /// Answers `pending`, which waited (an answer under way, ``ConnectionState``), then the requests behind it.
    func answerNow(_ pending: Pending, context: ChannelHandlerContext) {
        connection.answerEnded()
        respond(to: pending, context: context)
        resume(context: context)
    }

    /// Whether the connection stays open after answering `request` (an HTTP/2 stream, one request each, is not a
    /// connection to keep or close).
    static func keepsAlive(_ request: HTTPRequestHead) -> Bool { request.version.major >= 2 || request.isKeepAlive }

    /// A body a remote bundle's replacement took away, with no newer bundle mounted: 503, to ask again once the next
    /// upload is.
    func unavailable(_ record: ServedRequest, request: HTTPRequestHead, context: ChannelHandlerContext) {
        empty(503, record, http10: request.isHTTP10, keepAlive: Self.keepsAlive(request), retryAfter: 5, context: context)
    }

    /// The bytes of the cache's own buffers an answer from it sends: its body when that is not copied.
    static func keptBytesSent(_ answer: ResponseCache.Answer) -> Int {
        guard case .bytes(let body) = answer.body, body.readableBytes > ResponseCache.wireBody else { return 0 }
        return body.readableBytes
    }

    /// Answers a plain GET in HTTP/1.1 that ``CachedAnswerFront`` read off the connection with the answer the cache
    /// keeps for it, as one read by the decoder is answered (the front asks ``answersNext(on:)`` first).
    func answerKept(_ answer: ResponseCache.Answer, target: String) {
        guard let context = ownContext else { return }
        reads &+= 1
        version = .http1_1
        whileWriting(context: context) {
            answerFromCache(answer, method: "GET", target: target, http10: false, keepAlive: true, context: context)
        }
    }

    /// Sends the bytes of a kept answer (``ResponseCache/http1Wire(for:generation:now:)``), and the body after them
    /// when it is not in them: the answer to a plain GET in HTTP/1.1 that ``CachedAnswerFront`` read, when no access log
    /// or metrics hear of answers.
    func sendWire(_ wire: ByteBuffer, after body: ByteBuffer?) {
        guard let context = ownContext else { return }
        reads &+= 1
        whileWriting(context: context) {
            send(wire, context: context)
            if let body { send(body, context: context) }
        }
    }

    /// Whether answers are told of (an access log, metrics): then each one makes a record.
    var tellsOfAnswers: Bool { settings.serving.policy.accessLog != nil }

    /// Whether a request read now would be answered now: nothing is being answered, waits or is refused, the
    /// connection goes on, and the channel takes more.
    func answersNext(on channel: any Channel) -> Bool {
        connection.isQuiet && queue.isEmpty && head == nil && queue.refused == nil && !skippingBody && ownContext != nil && channel.isWritable
    }

    func answerFromCache(
        _ answer: ResponseCache.Answer, method: String, target: String, http10: Bool, keepAlive: Bool, context: ChannelHandlerContext
    ) {
        let now = time(nil)
        let age = answer.age(at: now)
        var buffer: ByteBuffer
        if onHTTP2, var fields = answer.http2Fields {
            // The body goes on alone, after the head's frame.
            HTTP2Head.end(&fields, date: date.value(at: now), age: age)
            writeHTTP2Head(fields, status: answer.status, contentLength: answer.contentLength.flatMap { Int($0) } ?? 0, context: context)
            buffer = context.channel.allocator.buffer(capacity: min(answer.body.memory, ResponseCache.wireBody))
        } else {
            buffer = context.channel.allocator.buffer(capacity: answer.head.readableBytes + 96 + min(answer.body.memory, ResponseCache.wireBody))
            buffer.writeImmutableBuffer(answer.head)
            endHead(&buffer, age: age, keepAlive: keepAlive, http10: http10)
        }
        if settings.serving.policy.accessLog != nil {
            var served = ServedRequest(
                client: nil, method: method, target: target, status: answer.status, contentLength: answer.contentLength, source: answer.source)
            served.fromCache = true
            logServed(served, context: context)
        }
        switch answer.body {
        case .bytes(let body) where body.readableBytes <= ResponseCache.wireBody:
            buffer.writeImmutableBuffer(body)
            send(buffer, context: context)
        case .bytes(let body):
            if buffer.readableBytes > 0 { send(buffer, context: context) }
            if let gate {
                // Sent without a copy: counted on the connection until the socket took it (``BodyGate/keptLimit``).
                gate.writeKept(out(.byteBuffer(body)), bytes: body.readableBytes, context: context)
                unflushed = true
            } else {
                send(body, context: context)
            }
        case .file(let file, let prefix, let suffix):
            if suffix.readableBytes > 0 && !corked { cork(true, context: context) }
            buffer.writeImmutableBuffer(prefix)
            send(buffer, context: context)
            sendFile(file, context: context)
            if suffix.readableBytes > 0 { send(suffix, context: context) }
        }
        end(keepAlive: keepAlive, context: context)
    }

    /// Answers with a small body read on the event loop, to its end, and so through its checks, before the head goes
    /// out: a damaged one is a 500, never a 200 cut short.
    func readHere(
        _ response: Response, answer: ServeAnswer, opened open: () throws -> OpenedBody?, filling: Filling?, context: ChannelHandlerContext
    ) {
        // Never half-serve: a body that fails its checks is an error response, counted and logged (openBody counts
        // its own failures).
        let opened: OpenedBody
        do {
            guard let body = try open() else {
                sendHead(response, context: context)
                return end(keepAlive: response.keepAlive, context: context)
            }
            opened = body
        } catch {
            return empty(500, response.record, http10: response.http10, keepAlive: response.keepAlive, context: context)
        }
        var chunks = opened.chunks
        do {
            while let chunk = try opened.reader.next() { chunks.append(chunk) }
        } catch {
            answer.recordError(error)
            return empty(500, response.record, http10: response.http10, keepAlive: response.keepAlive, context: context)
        }
        sendHead(response, context: context)
        for chunk in chunks { sendChunk(chunk, filling: filling, context: context) }
        keep(filling)
        end(keepAlive: response.keepAlive, context: context)
    }

    /// The head and the first chunks; the rest follows one chunk at a time, off the event loop.
    func start(_ response: Response, _ opened: OpenedBody, answer: ServeAnswer, filling: Filling?, context: ChannelHandlerContext) {
        sendHead(response, context: context)
        sendChunk(opened.first, filling: filling, context: context)
        guard let second = opened.second else {
            releaseGate()
            keep(filling)
            return end(keepAlive: response.keepAlive, context: context)
        }
        sendChunk(second, filling: filling, context: context)
        connection.answerStarted()
        unflushed = false
        pump(
            opened.reader, after: context.writeAndFlush(out(.byteBuffer(ByteBuffer()))), keepAlive: response.keepAlive, filling: filling,
            fail: answer.recordError, context: context)
    }

    /// Sends the rest of a body: the next chunk is read once the previous one is written, so a response holds one chunk.
    func pump(
        _ reader: BodyReader, after written: EventLoopFuture<Void>, keepAlive: Bool, filling: Filling?, fail: @escaping @Sendable (any Error) -> Void,
        context: ChannelHandlerContext
    ) {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context, filling), eventLoop: loop)
        written.flatMap {
            bound.value.0.readingNextChunk = true
            return NIOThreadPool.singleton.runIfActive(eventLoop: loop) { try reader.next() }
        }.whenComplete { result in
            let (handler, context, filling) = bound.value
            handler.readingNextChunk = false
            switch result {
            case .success(let chunk?):
                handler.progress &+= 1
                handler.sendChunk(chunk, filling: filling, context: context)
                handler.unflushed = false
                let next = context.writeAndFlush(handler.out(.byteBuffer(ByteBuffer())))
                handler.pump(reader, after: next, keepAlive: keepAlive, filling: filling, fail: fail, context: context)
            case .success(nil):
                handler.progress &+= 1
                handler.releaseGate()
                handler.keep(filling)
                handler.end(keepAlive: keepAlive, context: context)
                handler.connection.answerEnded()
                handler.resume(context: context)
            case .failure(let error):
                // Mid-stream: the head has gone out; closing short of the Content-Length tells the client it failed.
                if error is BundleError { fail(error) }
                handler.releaseGate()
                handler.connection.ending()
                handler.connection.answerEnded()
                context.close(promise: nil)
            }
        }
    }

    func sendChunk(_ chunk: Data, filling: Filling?, context: ChannelHandlerContext) {
        filling?.bytes.writeBytes(chunk)
        send(ByteBuffer(bytes: chunk), context: context)
    }

    /// Keeps a whole answer whose body went out checked: as a span of the bundle file when it is one (a stored body or a
    /// gzip answer, checked now) and not small, else as the bytes sent.
    func keep(_ filling: Filling?) {
        guard let filling, let cache, filling.bytes.readableBytes == filling.length else { return }
        var answer = filling.answer
        answer.body = .bytes(filling.bytes)
        // Both heads, made of the typed one: over TLS, HTTP/2 answers from the cache too (on the connection, or on a stream).
        switch filling.head {
        case .http1(let bytes):
            answer.head = bytes
            if !settings.sendfile { answer.http2Fields = HTTP2Head.fields(status: answer.status, fields: filling.fields, serverName: settings.serverName) }
        case .http2(let fields, _, _):
            answer.head = ResponseHead.fixed(status: answer.status, fields: filling.fields, serverName: settings.serverName, allocator: ByteBufferAllocator())
            answer.http2Fields = fields
        }
        if settings.sendfile, let span = filling.response.fileSpan(), span.descriptor >= 0 {
            if span.count >= ResponseCache.minFileSpan {
                answer.body = .file(
                    cache.fileBytes(of: span, generation: filling.generation), prefix: ByteBuffer(bytes: span.prefix), suffix: ByteBuffer(bytes: span.suffix))
            } else {
                closeDescriptor(span.descriptor)
            }
        }
        cache.keep(answer, for: filling.key, generation: filling.generation)
    }

    /// An answer without a body: 421, a miss, an error.
    func empty(_ status: Int, _ record: ServedRequest, request: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        empty(status, record, http10: request.isHTTP10, keepAlive: keepAlive, context: context)
    }

    func empty(
        _ status: Int, _ record: ServedRequest, http10: Bool, keepAlive: Bool, retryAfter: Int? = nil, missHeader: String? = nil,
        context: ChannelHandlerContext
    ) {
        var record = record
        record.status = status
        record.contentLength = "0"
        record.source = nil
        var fields = HTTPFields()
        fields[.contentLength] = "0"
        if let retryAfter { fields[.retryAfter] = String(retryAfter) }
        if let missHeader, let name = HTTPField.Name("x-offline-miss") { fields[name] = missHeader }
        let head = encodedHead(status: status, fields: fields, context: context)
        sendHead(Response(head: head, age: nil, record: record, keepAlive: keepAlive, http10: http10), context: context)
        end(keepAlive: keepAlive, context: context)
    }
}
