// One file, over 600 lines, on purpose: the handler is one state machine per connection (what waits, what is read off
// the event loop, what is being written, the body budget, the HTTP/2 gate), and nearly every step reads or sets its
// private state; split across files, that state would have to be opened to the whole module. Its helpers that stand
// alone live apart (BodyGate.swift, ResponseCache.swift, SecureServing.swift). Issue 52 part 3 splits it the way NIO
// does: a typed response encoded per protocol, and connection, idle and stall state machines that return actions.
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// One connection's requests, answered in order, with response heads written as bytes.
///
/// Memory per connection is bounded whatever the client does. Requests that arrive while an answer is read off the
/// event loop, or while the channel is not writable (answers already written exceed its high water mark, because the
/// client reads slower than it asks), wait in order; the connection is not read further while the channel is not
/// writable or past ``maxWaiting`` waiting requests, and is read again once the answers have drained (as NIO's
/// `HTTPServerPipelineHandler` and nginx do). A client that pipelines requests and never reads its answers costs one
/// read's worth of requests and the channel's water mark, not an answer per request.
final class BundleChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// What every connection of a server shares.
    struct Settings: Sendable {
        /// The answer step: routes, policy (Host, access log), the loader's handle.
        var serving: BundleServing
        var serverName: String?
        var idleTimeout: TimeAmount
        /// The request body bytes all connections may hold at once.
        var bodyBudget = BodyBudget(limit: 64 << 20)
        /// Whether spans of the bundle file go out by `sendfile` and are kept as spans in the response cache; not over
        /// TLS, which must encrypt the bytes: there bodies go in chunks, and the cache keeps bytes.
        var sendfile = true
        /// Whether each handler closes its connection when idle; not an HTTP/2 stream's (one request; the connection
        /// has a check of its own), so a request costs no timer.
        var idleCheck = true
        /// How long a body being held may make no progress before its connection is closed and its budget given back
        /// (nginx's `client_body_timeout`): a client cannot hold the budget by sending part of a body and stopping.
        var bodyTimeout: TimeAmount = .seconds(10)
    }
    /// Requests received and not yet answered past which the connection is not read.
    static let maxWaiting = 16

    let settings: Settings
    /// The server's cache of whole responses, shared by its event loops; nil when there is none.
    let cache: ResponseCache?
    private var head: HTTPRequestHead?
    /// The body of the request being read, kept only where a bundle may match it (a method other than GET or HEAD,
    /// bundles with request variants), at most ``BundleRequest/maxBodySize`` bytes.
    private var body: ByteBuffer?
    private var bodyTooLarge = false
    /// The server's budget for request bodies had no room for this one: 503, not a wrong answer.
    private var bodyRefused = false
    /// Body bytes this connection holds against the server's budget (the body being read, and those waiting).
    private var budgeted = 0
    /// Bytes of the current request's body reserved ahead, from its Content-Length, and not yet received.
    private var reservedAhead = 0
    /// The client's address, whose share of the body budget this connection's bodies count against.
    private var client: String?
    /// The rest of the current request's body is not read: it was answered before it (413, 503) and the connection
    /// closes after that answer.
    private var skippingBody = false
    /// Bytes of the current request's body dropped unread (no bundle matches by it): past
    /// ``BundleRequest/maxBodySize``, a 413 and the connection closed, as for a body kept.
    private var droppedBodyBytes = 0
    /// Body bytes received, and how many there were at the last body check (``Settings/bodyTimeout``).
    private var bodyBytesReceived = 0
    private var bodyBytesAtCheck = 0
    private var bodyQuietChecks = 0
    private var bodyCheck: Scheduled<Void>?
    private var waiting = CircularBuffer<Pending>()
    /// The bytes of the bodies kept by waiting requests: past ``BundleRequest/maxBodySize``, the connection is not read.
    private var waitingBodyBytes = 0

    /// A request read whole, waiting its turn.
    private struct Pending {
        var head: HTTPRequestHead
        var body: ByteBuffer?
        var tooLarge: Bool
        var refused: Bool
        /// Answered before its body was read: the connection closes after the answer.
        var closes = false
        /// How many times it was answered already from a remote bundle replaced meanwhile, and asked again of the new
        /// one (at most ``maxAgain``: an object replaced faster than it mounts gets a 500 then; one whose replacement
        /// did not mount, a 503); its body's budget was given back the first time.
        var again = 0
    }
    /// An answer is being read off the event loop or streamed: later requests wait, and the connection is not idle.
    private var busy = false
    /// An answer's parts are being written. A handler in front may report the channel writable from inside one of
    /// those writes (one that flushes on its own, as a TLS coalescer past its buffer does): the requests that wait are
    /// then answered once this answer's writes are done, never between them.
    private var writing = false
    /// The channel became writable while an answer was written: the waiting requests are resumed after it.
    private var resumeAfterWriting = false
    /// A response ended the connection: later requests are not answered.
    private var closing = false
    /// A read the channel asked for while too many requests waited.
    private var readPending = false
    /// A request NIO could not parse, behind requests still waiting or answering: its 400 goes out after their answers,
    /// and nothing more is read.
    private var refusedAfterWaiting: (method: String, target: String)?
    /// The client half-closed: once the requests it sent are answered, the connection closes.
    private var inputClosed = false
    private var unflushed = false
    private var idleCheck: Scheduled<Void>?
    /// Request parts received, and how many there were at the last idle check.
    private var reads = 0
    private var readsAtLastCheck = 0
    /// Writes that completed (a chunk of a streamed body, a span of a file sent) or drained (the channel writable
    /// again), and how many there were at the last idle check: an answer going out to a client that reads makes
    /// progress; one to a client that stopped reading does not.
    private var progress = 0
    private var progressAtLastCheck = 0
    /// Checks in a row (half an idle period apart) that found neither: at two, the connection was quiet for a whole
    /// period.
    private var quietChecks = 0
    /// The protocol of the request being answered, for the access log (HTTP/2.0 on a stream).
    private var version = HTTPVersion.http1_1
    /// The `Date` value (RFC 9110 §6.6.1: an origin server with a clock sends one).
    private var date = DateField()

    /// An HTTP/2 connection's turns for large bodies, which its streams (a handler each) share; nil over HTTP/1.1, where
    /// a connection answers one request at a time.
    let gate: BodyGate?
    /// This handler holds one of the gate's turns.
    private var gateHeld = false
    /// This handler gave its turn back because its answer made no progress (a client that stopped reading this stream),
    /// and counts among the gate's stalled streams until its answer ends.
    private var stalledHeld = false
    /// Checks, while a turn is held, that the answer makes progress.
    private var stallCheck: Scheduled<Void>?
    private var progressAtStallCheck = 0
    /// The first chunks are being read off the event loop: a turn held is given back when they come, not before.
    private var readingOffLoop = false
    /// The next chunk of a body is being read off the event loop: an answer waiting for its own read (a thread pool
    /// held up by other work) is not a stream its client stopped reading.
    private var readingNextChunk = false
    /// The handler left its channel: a turn given later is handed back at once.
    private var removed = false

    init(_ settings: Settings, cache: ResponseCache?, gate: BodyGate? = nil) {
        self.settings = settings
        self.cache = cache
        self.gate = gate
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if settings.idleCheck { scheduleIdleCheck(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        if !readingOffLoop { releaseGate() }
        idleCheck?.cancel()
        bodyCheck?.cancel()
        settings.bodyBudget.release(budgeted + reservedAhead, client: client)
        budgeted = 0
        reservedAhead = 0
    }

    /// Twice a period: a connection that sent nothing and whose answers made no progress (none going out, or one stuck
    /// behind a client that stopped reading: a write timeout, as nginx's `send_timeout`) at two checks in a row, a whole
    /// period, is closed; so it goes between one and one and a half periods after its last activity (with one check a
    /// period, up to two). Counters per request and per write, instead of a timestamp per read and write (an
    /// `IdleStateHandler` cost a tenth of the request rate).
    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(in: .nanoseconds(settings.idleTimeout.nanoseconds / 2)) {
            let (handler, context) = bound.value
            if handler.reads == handler.readsAtLastCheck && handler.progress == handler.progressAtLastCheck {
                handler.quietChecks += 1
                if handler.quietChecks >= 2 { return context.close(promise: nil) }
            } else {
                handler.quietChecks = 0
                handler.readsAtLastCheck = handler.reads
                handler.progressAtLastCheck = handler.progress
            }
            handler.scheduleIdleCheck(context: context)
        }
    }

    // MARK: - Reading requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reads &+= 1
        guard refusedAfterWaiting == nil else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
            bodyTooLarge = false
            bodyRefused = false
            skippingBody = false
            droppedBodyBytes = 0
            // Known once the channel is active (not yet when the handler is added); nothing is reserved before a head.
            if client == nil { client = context.channel.remoteAddress?.ipAddress.map(BodyBudget.clientKey) }
            let length = head.headers.first(name: "content-length").flatMap { Int($0) }
            // A body past what any reader matches on is a 413 from its Content-Length, before a byte of it is read.
            if let length, length > BundleRequest.maxBodySize { return answerBeforeBody(head, tooLarge: true, context: context) }
            // A body is kept only where a bundle matches requests by it (a recorded POST's URL, say), and within the
            // server's budget for all connections and the client's share of it: elsewhere it is read and dropped.
            if head.method != .HEAD, settings.serving.matchesBody(method: head.method.rawValue, target: head.uri, host: head.headers.first(name: "host")) {
                // Reserved whole from its Content-Length: no room is a 503 now, not after the client sent it all.
                if let length, length > 0 {
                    guard settings.bodyBudget.reserve(length, client: client) else { return answerBeforeBody(head, tooLarge: false, context: context) }
                    reservedAhead = length
                }
                body = context.channel.allocator.buffer(capacity: 0)
                startBodyCheck(context: context)
            }
            // RFC 9110 §10.1.1: the client waits for a 100 before it sends the body. Only for a body that will be kept (one
            // that would be dropped is not asked for: the client sends it after its own wait, or not at all), and only
            // where no other answer is going out on this connection (over HTTP/1.1), so the 100 cannot fall inside another.
            if body != nil, head.headers.first(name: "expect")?.lowercased() == "100-continue", gate == nil, head.version.minor >= 1, !busy,
                !writing, waiting.isEmpty
            {
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: "HTTP/1.1 100 Continue\r\n\r\n"))), promise: nil)
            }
        case .body(var part):
            guard !skippingBody else { return }
            bodyBytesReceived &+= part.readableBytes
            guard body != nil, !bodyTooLarge, !bodyRefused else {
                // A body no bundle matches by is dropped, up to what a kept one may hold; past it, a 413 and closed.
                if body == nil, let head {
                    droppedBodyBytes += part.readableBytes
                    if droppedBodyBytes > BundleRequest.maxBodySize { answerBeforeBody(head, tooLarge: true, context: context) }
                }
                return
            }
            if body!.readableBytes + part.readableBytes > BundleRequest.maxBodySize {
                bodyTooLarge = true
                releaseBody()
                body = ByteBuffer()
                if let head { answerBeforeBody(head, tooLarge: true, context: context) }
            } else if takeFromBudget(part.readableBytes) {
                body!.writeBuffer(&part)
            } else {
                bodyRefused = true
                releaseBody()
                body = ByteBuffer()
            }
        case .end:
            bodyCheck?.cancel()
            bodyCheck = nil
            guard !skippingBody else { return }
            guard let head, !closing else { return }
            self.head = nil
            // What was reserved ahead and not sent (a shorter body cannot be: NIO reads Content-Length bytes) is given back.
            settings.bodyBudget.release(reservedAhead, client: client)
            reservedAhead = 0
            let pending = Pending(head: head, body: body, tooLarge: bodyTooLarge, refused: bodyRefused)
            body = nil
            enqueue(pending, context: context)
        }
    }

    /// Answers or queues a request read whole (or answered before its body).
    private func enqueue(_ pending: Pending, context: ChannelHandlerContext) {
        if busy || writing || !waiting.isEmpty || !context.channel.isWritable {
            waitingBodyBytes += pending.body?.readableBytes ?? 0
            waiting.append(pending)
            // Read while an answer was written (a handler in front that reads on its own): taken once it is.
            if writing { resumeAfterWriting = true }
        } else {
            respond(to: pending, context: context)
        }
    }

    /// Moves `bytes` of the body being read onto what this connection holds: from what its Content-Length reserved
    /// ahead, else from the budget. False when the budget has no room.
    private func takeFromBudget(_ bytes: Int) -> Bool {
        if reservedAhead >= bytes {
            reservedAhead -= bytes
        } else {
            guard settings.bodyBudget.reserve(bytes - reservedAhead, client: client) else { return false }
            reservedAhead = 0
        }
        budgeted += bytes
        return true
    }

    /// Gives back the body being read (and what was reserved ahead for it).
    private func releaseBody() {
        let held = body?.readableBytes ?? 0
        settings.bodyBudget.release(held + reservedAhead, client: client)
        budgeted -= held
        reservedAhead = 0
    }

    /// A 413 (too large) or 503 (no room in the budget) for `head` before its body is read: the rest of the body is not
    /// read, and the connection closes after the answer (nginx answers `client_max_body_size` the same way).
    private func answerBeforeBody(_ head: HTTPRequestHead, tooLarge: Bool, context: ChannelHandlerContext) {
        guard !skippingBody, !closing else { return }
        releaseBody()
        body = nil
        bodyCheck?.cancel()
        bodyCheck = nil
        skippingBody = true
        self.head = nil
        enqueue(Pending(head: head, body: nil, tooLarge: tooLarge, refused: !tooLarge, closes: true), context: context)
    }

    /// Closes the connection when the body being held makes no progress for ``Settings/bodyTimeout`` (two checks half
    /// of it apart): its budget goes back to the other clients.
    private func startBodyCheck(context: ChannelHandlerContext) {
        bodyCheck?.cancel()
        bodyBytesAtCheck = bodyBytesReceived
        bodyQuietChecks = 0
        scheduleBodyCheck(context: context)
    }

    private func scheduleBodyCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        bodyCheck = context.eventLoop.scheduleTask(in: .nanoseconds(settings.bodyTimeout.nanoseconds / 2)) {
            let (handler, context) = bound.value
            guard handler.body != nil, handler.head != nil else { return }
            if handler.bodyBytesReceived == handler.bodyBytesAtCheck {
                handler.bodyQuietChecks += 1
                if handler.bodyQuietChecks >= 2 { return context.close(promise: nil) }
            } else {
                handler.bodyQuietChecks = 0
                handler.bodyBytesAtCheck = handler.bodyBytesReceived
            }
            handler.scheduleBodyCheck(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { flushIfNeeded(context: context) }

    func read(context: ChannelHandlerContext) {
        if waiting.count >= Self.maxWaiting || waitingBodyBytes >= BundleRequest.maxBodySize || !context.channel.isWritable || refusedAfterWaiting != nil {
            readPending = true
        } else {
            context.read()
        }
    }

    /// The client sent its last request and half-closed (`shutdown(SHUT_WR)`): its answers still go out.
    /// A graceful shutdown (`ChannelShouldQuiesceEvent`): the same, the answers in flight and the requests received
    /// go out, then the connection closes (at once when idle).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            closeIfAnswered(context: context)
        } else if event is ChannelShouldQuiesceEvent {
            inputClosed = true
            closeIfAnswered(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// After a half-close, closes once nothing waits, answers or is refused.
    private func closeIfAnswered(context: ChannelHandlerContext) {
        guard inputClosed, !busy, waiting.isEmpty, refusedAfterWaiting == nil, !closing else { return }
        closeOnceWritten(context: context)
    }

    /// The answers written have drained below the channel's low water mark: the requests that waited, and reading again.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            progress &+= 1
            resume(context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    /// A request NIO could not parse is a 400, and the end of the connection (RFC 9112 §2.2); other errors close it.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError, !closing else {
            context.close(promise: nil)
            return
        }
        guard refusedAfterWaiting == nil else { return }
        let refused = (method: head?.method.rawValue ?? "-", target: head?.uri ?? "-")
        if busy || !waiting.isEmpty {
            // The requests before it are answered first, in order; then the 400 ends the connection.
            refusedAfterWaiting = refused
            return
        }
        badRequest(method: refused.method, target: refused.target, context: context)
    }

    /// A 400 that ends the connection, logged like any answer.
    private func badRequest(method: String, target: String, context: ChannelHandlerContext) {
        closing = true
        waiting.removeAll()
        waitingBodyBytes = 0
        logServed(ServedRequest(client: nil, method: method, target: target, status: 400, contentLength: "0", source: nil), context: context)
        var buffer = context.channel.allocator.buffer(capacity: 96)
        buffer.writeStaticString("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        closeOnceWritten(after: buffer, context: context)
    }

    /// Ends the connection once what was written (and `last`) has gone out; later requests are not answered.
    private func closeOnceWritten(after last: ByteBuffer = ByteBuffer(), context: ChannelHandlerContext) {
        closing = true
        unflushed = false
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(last))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// After an answer that went off the event loop, or once the channel is writable again: the requests that waited,
    /// in order, while the channel takes more.
    private func resume(context: ChannelHandlerContext) {
        if writing {
            resumeAfterWriting = true
            return
        }
        while !busy, !closing, context.channel.isWritable, let next = waiting.popFirst() {
            waitingBodyBytes -= next.body?.readableBytes ?? 0
            respond(to: next, context: context)
        }
        if let refused = refusedAfterWaiting, waiting.isEmpty, !busy, !closing {
            refusedAfterWaiting = nil
            return badRequest(method: refused.method, target: refused.target, context: context)
        }
        if readPending && waiting.count < Self.maxWaiting && waitingBodyBytes < BundleRequest.maxBodySize && context.channel.isWritable
            && refusedAfterWaiting == nil
        {
            readPending = false
            context.read()
        }
        flushIfNeeded(context: context)
        closeIfAnswered(context: context)
    }

    // MARK: - Answering

    /// What of a request's header fields decides its answer, and so the key its whole answer is kept under; read from
    /// HTTP/1 heads here and from HTTP/2 header blocks by ``HTTP2CacheFront``, so both find the same answers.
    struct Asked {
        var host: String?
        /// How many Host fields the request has (RFC 9112 §3.2: one, in HTTP/1.1).
        var hosts = 0
        var acceptEncoding: String?
        private var encodings = 0
        private var conditional = false
        /// No If-None-Match, If-Modified-Since or Range, and one Accept-Encoding at most: the answer is the same for
        /// every such request with the same Host, target and Accept-Encoding.
        var plain: Bool { !conditional && encodings <= 1 }

        init() {}

        init(_ headers: HTTPHeaders) {
            for (name, value) in headers { read(name, value) }
        }

        /// Takes one header field into account (its name in any case).
        mutating func read(_ name: String, _ value: String) {
            switch name.utf8.count {
            case 4 where Self.named(name, "host"):
                if host == nil { host = value }
                hosts += 1
            case 15 where Self.named(name, "accept-encoding"):
                acceptEncoding = value
                encodings += 1
            case 5 where Self.named(name, "range"): conditional = true
            case 13 where Self.named(name, "if-none-match"): conditional = true
            case 17 where Self.named(name, "if-modified-since"): conditional = true
            default: break
            }
        }

        /// The key a plain GET of `target` with these fields is kept under.
        func key(for target: String) -> ResponseCache.Key { .init(host: host, target: target, acceptEncoding: acceptEncoding) }

        /// Whether `name` is `lowercase` in any case (ASCII).
        static func named(_ name: String, _ lowercase: StaticString) -> Bool {
            lowercase.withUTF8Buffer { wanted in
                name.utf8.elementsEqual(wanted) { byte, want in (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == want }
            }
        }
    }

    private func respond(to pending: Pending, context: ChannelHandlerContext) {
        whileWriting(context: context) { answer(pending, context: context) }
    }

    /// Runs `write`, which writes an answer's parts, so that a resume asked for meanwhile waits until it returns.
    private func whileWriting(context: ChannelHandlerContext, _ write: () -> Void) {
        let outer = writing
        writing = true
        write()
        writing = outer
        if !outer && resumeAfterWriting {
            resumeAfterWriting = false
            resume(context: context)
        }
    }

    private func answer(_ pending: Pending, context: ChannelHandlerContext) {
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
        if cacheable, let answer = cache?.answer(for: key, generation: generation), answer.body.stillThere {
            if let gate, !gate.mayWriteKept(Self.keptBytesSent(answer)) { return waitForKeptRoom(pending, gate: gate, context: context) }
            return answerFromCache(answer, request: request, keepAlive: keepAlive, context: context)
        }
        var fields = HTTPFields()
        for header in request.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        let record = ServedRequest(method: request.method.rawValue, target: request.uri, status: 500)
        let body = pending.body.map { Data($0.readableBytesView) }
        if pending.again == 0, let held = pending.body?.readableBytes, held > 0 {
            // Copied out: the connection holds it no longer.
            settings.bodyBudget.release(held, client: client)
            budgeted -= held
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
        let fixed = ResponseHead.fixed(status: status, fields: answer.headers, serverName: settings.serverName, allocator: context.channel.allocator)
        let age = answer.headers[.age].flatMap { Int($0) }
        let response = Response(
            head: fixed, age: age, record: answer.served(method: request.method.rawValue, target: request.uri), keepAlive: keepAlive,
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
                key: key, generation: generation, response: answer.response, length: length,
                answer: .init(
                    status: status, head: fixed, body: .bytes(ByteBuffer()), age: age.map { ($0, time(nil)) },
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
        busy = true
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context, filling), eventLoop: loop)
        @Sendable func readOffLoop() {
            bound.value.0.readingOffLoop = true
            NIOThreadPool.singleton.runIfActive(eventLoop: loop) { try answer.openBody() }.whenComplete { result in
                let (handler, context, filling) = bound.value
                handler.busy = false
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
            handler.gateHeld = true
            handler.scheduleStallCheck(context: context)
            readOffLoop()
        }
    }

    /// Gives back this handler's turn for a large body, or its place among the stalled, if it holds either.
    private func releaseGate() {
        stallCheck?.cancel()
        stallCheck = nil
        if gateHeld {
            gateHeld = false
            gate?.leave()
        }
        if stalledHeld {
            stalledHeld = false
            gate?.unstall()
        }
    }

    /// Once a ``BodyGate/stallPeriod`` while a turn is held: an answer that made no progress meanwhile while its
    /// connection still took bytes (a client that stopped reading this stream, as a browser does with a video once its
    /// buffer is full) gives its turn to the next stream, while fewer than ``BodyGate/stalledLimit`` of the
    /// connection's streams are stalled.
    private func scheduleStallCheck(context: ChannelHandlerContext) {
        guard let gate else { return }
        progressAtStallCheck = progress
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        stallCheck = context.eventLoop.scheduleTask(in: gate.stallPeriod) {
            let (handler, context) = bound.value
            guard handler.gateHeld else { return }
            // Stalled by its own flow-control window while the connection takes bytes (its channel writable): the
            // client reads the connection but not this stream. A client that reads nothing at all leaves the
            // connection unwritable, and its streams keep their turns.
            let connectionTakesBytes = context.channel.parent?.isWritable ?? true
            if handler.progress == handler.progressAtStallCheck && !handler.readingOffLoop && !handler.readingNextChunk && connectionTakesBytes
                && gate.stall()
            {
                handler.gateHeld = false
                handler.stalledHeld = true
                handler.stallCheck = nil
            } else {
                handler.scheduleStallCheck(context: context)
            }
        }
    }

    /// Times a request caught by a remote bundle's replacement is asked again of the next mount.
    static let maxAgain = 4

    /// Waits (on the event loop's timer, up to 10 s) for the handle to hold another loader than `generation`'s, then
    /// answers `pending` again from it, or, when none came or its replacement failed to mount, with 503
    /// (``unavailable(_:request:context:)``); requests behind it wait. A remote bundle's replacement is seen by a read
    /// (412, another ETag), which tells the reloader at once.
    private func answerAgain(_ pending: Pending, after generation: UInt64, context: ChannelHandlerContext) {
        busy = true
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
                handler.busy = false
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
    private struct Response {
        var head: ByteBuffer
        var age: Int?
        var record: ServedRequest
        var keepAlive: Bool
        var http10: Bool
    }

    /// An answer being kept in the response cache as its body goes out.
    private final class Filling {
        let key: ResponseCache.Key
        let generation: UInt64
        /// The loader's answer, asked again for a span of the file once its body went out checked.
        let response: BundleResponse
        /// The body's length, from the head.
        let length: Int
        let answer: ResponseCache.Answer
        /// The body as sent so far.
        var bytes: ByteBuffer

        init(key: ResponseCache.Key, generation: UInt64, response: BundleResponse, length: Int, answer: ResponseCache.Answer, bytes: ByteBuffer) {
            self.key = key
            self.generation = generation
            self.response = response
            self.length = length
            self.answer = answer
            self.bytes = bytes
        }
    }

    /// Past the HTTP/2 connection's bound on kept bytes in flight (``BodyGate/keptLimit``): the request is answered
    /// again once the socket took some of them; requests behind it wait.
    private func waitForKeptRoom(_ pending: Pending, gate: BodyGate, context: ChannelHandlerContext) {
        busy = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        gate.whenKeptFits {
            let (handler, context) = bound.value
            guard !handler.removed else { return }
            handler.answerNow(pending, context: context)
        }
    }

    /// Answers `pending`, which waited (``busy``), then the requests behind it.
    private func answerNow(_ pending: Pending, context: ChannelHandlerContext) {
        busy = false
        respond(to: pending, context: context)
        resume(context: context)
    }

    /// Whether the connection stays open after answering `request` (an HTTP/2 stream, one request each, is not a
    /// connection to keep or close).
    private static func keepsAlive(_ request: HTTPRequestHead) -> Bool { request.version.major >= 2 || request.isKeepAlive }

    /// A body a remote bundle's replacement took away, with no newer bundle mounted: 503, to ask again once the next
    /// upload is.
    private func unavailable(_ record: ServedRequest, request: HTTPRequestHead, context: ChannelHandlerContext) {
        empty(503, record, http10: request.isHTTP10, keepAlive: Self.keepsAlive(request), retryAfter: 5, context: context)
    }

    /// A kept body this large or smaller is copied into the buffer of its head; a larger one goes out as the cache's own
    /// buffer.
    static let copiedKeptBody = 16 << 10

    /// The bytes of the cache's own buffers an answer from it sends: its body when that is not copied.
    static func keptBytesSent(_ answer: ResponseCache.Answer) -> Int {
        guard case .bytes(let body) = answer.body, body.readableBytes > copiedKeptBody else { return 0 }
        return body.readableBytes
    }

    private func answerFromCache(_ answer: ResponseCache.Answer, request: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: answer.head.readableBytes + 96 + min(answer.body.memory, Self.copiedKeptBody))
        buffer.writeImmutableBuffer(answer.head)
        let age = answer.age(at: time(nil))
        endHead(&buffer, age: age, keepAlive: keepAlive, http10: request.isHTTP10)
        var served = ServedRequest(
            client: nil, method: request.method.rawValue, target: request.uri, status: answer.status, contentLength: answer.contentLength,
            source: answer.source)
        served.fromCache = true
        logServed(served, context: context)
        switch answer.body {
        case .bytes(let body) where body.readableBytes <= Self.copiedKeptBody:
            buffer.writeImmutableBuffer(body)
            send(buffer, context: context)
        case .bytes(let body):
            send(buffer, context: context)
            if let gate {
                // Sent without a copy: counted on the connection until the socket took it (``BodyGate/keptLimit``).
                gate.writeKept(wrapOutboundOut(.byteBuffer(body)), bytes: body.readableBytes, context: context)
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
    private func readHere(
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
    private func start(_ response: Response, _ opened: OpenedBody, answer: ServeAnswer, filling: Filling?, context: ChannelHandlerContext) {
        sendHead(response, context: context)
        sendChunk(opened.first, filling: filling, context: context)
        guard let second = opened.second else {
            releaseGate()
            keep(filling)
            return end(keepAlive: response.keepAlive, context: context)
        }
        sendChunk(second, filling: filling, context: context)
        busy = true
        unflushed = false
        pump(
            opened.reader, after: context.writeAndFlush(wrapOutboundOut(.byteBuffer(ByteBuffer()))), keepAlive: response.keepAlive, filling: filling,
            fail: answer.recordError, context: context)
    }

    /// Sends the rest of a body: the next chunk is read once the previous one is written, so a response holds one chunk.
    private func pump(
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
                let next = context.writeAndFlush(handler.wrapOutboundOut(.byteBuffer(ByteBuffer())))
                handler.pump(reader, after: next, keepAlive: keepAlive, filling: filling, fail: fail, context: context)
            case .success(nil):
                handler.progress &+= 1
                handler.releaseGate()
                handler.keep(filling)
                handler.end(keepAlive: keepAlive, context: context)
                handler.busy = false
                handler.resume(context: context)
            case .failure(let error):
                // Mid-stream: the head has gone out; closing short of the Content-Length tells the client it failed.
                if error is BundleError { fail(error) }
                handler.releaseGate()
                handler.closing = true
                handler.busy = false
                context.close(promise: nil)
            }
        }
    }

    private func sendChunk(_ chunk: Data, filling: Filling?, context: ChannelHandlerContext) {
        filling?.bytes.writeBytes(chunk)
        send(ByteBuffer(bytes: chunk), context: context)
    }

    /// Keeps a whole answer whose body went out checked: as a span of the bundle file when it is one (a stored body or a
    /// gzip answer, checked now) and not small, else as the bytes sent.
    private func keep(_ filling: Filling?) {
        guard let filling, let cache, filling.bytes.readableBytes == filling.length else { return }
        var answer = filling.answer
        answer.body = .bytes(filling.bytes)
        if settings.sendfile, let span = filling.response.fileSpan(), span.descriptor >= 0 {
            if span.count >= ResponseCache.minFileSpan {
                answer.body = .file(
                    cache.fileBytes(of: span, generation: filling.generation), prefix: ByteBuffer(bytes: span.prefix), suffix: ByteBuffer(bytes: span.suffix))
            } else {
                closeDescriptor(span.descriptor)
            }
        }
        // Over TLS, HTTP/2 answers from the cache on the connection, with the fields read here once.
        if !settings.sendfile { answer.http2Fields = HTTP2ResponseHead.parse(answer.head)?.0 }
        cache.keep(answer, for: filling.key, generation: filling.generation)
    }

    /// An answer without a body: 421, a miss, an error.
    private func empty(_ status: Int, _ record: ServedRequest, request: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        empty(status, record, http10: request.isHTTP10, keepAlive: keepAlive, context: context)
    }

    private func empty(
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
        let head = ResponseHead.fixed(status: status, fields: fields, serverName: settings.serverName, allocator: context.channel.allocator)
        sendHead(Response(head: head, age: nil, record: record, keepAlive: keepAlive, http10: http10), context: context)
        end(keepAlive: keepAlive, context: context)
    }

    /// The head, ended with the lines of this request (Date, Age, Connection), after the access log heard of it.
    private func sendHead(_ response: Response, context: ChannelHandlerContext) {
        logServed(response.record, context: context)
        var head = response.head
        endHead(&head, age: response.age, keepAlive: response.keepAlive, http10: response.http10)
        send(head, context: context)
    }

    /// Tells the access log, when there is one, with the client's address (only then looked up).
    private func logServed(_ record: ServedRequest, context: ChannelHandlerContext) {
        guard let served = settings.serving.policy.accessLog else { return }
        var record = record
        record.client = context.channel.remoteAddress?.ipAddress
        record.version = version.description
        served(record)
    }

    private func endHead(_ buffer: inout ByteBuffer, age: Int?, keepAlive: Bool, http10: Bool) {
        ResponseHead.line(&buffer, "date", date.value(at: time(nil)))
        if let age { ResponseHead.line(&buffer, "age", String(age)) }
        if !keepAlive {
            buffer.writeStaticString("connection: close\r\n")
        } else if http10 {
            buffer.writeStaticString("connection: keep-alive\r\n")
        }
        buffer.writeStaticString("\r\n")
    }

    /// A span of a file, sent with `sendfile`; what keeps the descriptor open and the bytes there is held until it went.
    /// A long span goes as regions of ``fileRegionSize``, so that each one written counts as progress for the write
    /// timeout (a client that reads slowly is not taken for one that stopped).
    private func sendFile(_ file: ResponseCache.FileBytes, context: ChannelHandlerContext) {
        // A handle of this write's own over the shared descriptor, which it gives back (without closing it) once done.
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: file.file.descriptor)
        let channel = context.channel
        let owner = file.file
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        var start = file.offset
        let end = file.offset + file.count
        repeat {
            let stop = min(end, start + Self.fileRegionSize)
            let last = stop == end
            let region = FileRegion(fileHandle: handle, readerIndex: start, endIndex: stop)
            context.write(wrapOutboundOut(.fileRegion(region))).whenComplete { result in
                bound.value.progress &+= 1
                if last {
                    _ = try? handle.takeDescriptorOwnership()
                    withExtendedLifetime(owner) {}
                }
                // A file cut short fails the write: the connection closes short of the Content-Length.
                if case .failure = result { channel.close(promise: nil) }
            }
            start = stop
        } while start < end
        unflushed = true
    }

    /// The largest region of a file written at once: a client must read this much per idle period (60 s by default,
    /// so about 4 KB/s) not to be taken for one that stopped reading.
    static let fileRegionSize = 256 << 10

    private func send(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: nil)
        unflushed = true
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
        if corked { cork(false, context: context) }
    }

    /// Whether the socket holds partial segments back (TCP_CORK) until the flush: set while a head, a file's span and a
    /// trailer go out, so they leave as full segments rather than three pushes.
    private var corked = false

    /// TCP_CORK on Linux; BSD's TCP_NOPUSH does the same elsewhere.
    #if canImport(Darwin)
        private static let corkOption = TCP_NOPUSH
    #else
        private static let corkOption = TCP_CORK
    #endif

    private func cork(_ on: Bool, context: ChannelHandlerContext) {
        corked = on
        try? context.channel.syncOptions?.setOption(
            ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: Self.corkOption)), value: on ? 1 : 0)
    }

    /// The response is written; without keep-alive the connection closes once it has gone out.
    private func end(keepAlive: Bool, context: ChannelHandlerContext) {
        guard !keepAlive else { return }
        closeOnceWritten(context: context)
    }
}

extension HTTPRequestHead {
    /// HTTP/1.0: an answer kept alive says so (HTTP/2's version is 2.0, not this).
    fileprivate var isHTTP10: Bool { version.major == 1 && version.minor == 0 }
}

/// The `Date` field's value (RFC 9110 §6.6.1), formatted once a second.
struct DateField {
    private var second = 0
    private var text = ""

    /// The value for `now` (`time()`).
    mutating func value(at now: Int) -> String {
        if now != second { (second, text) = (now, HTTPDates.format(Date(timeIntervalSince1970: TimeInterval(now)))) }
        return text
    }
}
