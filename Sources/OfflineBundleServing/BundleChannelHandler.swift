// The connection's state and its reading of requests: what waits, what is read, the body budget, the half-close and
// the 400 after pipelined requests. Answering is in BundleChannelHandler+Answer.swift, writing in
// BundleChannelHandler+Write.swift; the quiet checks (idle, a body that stalls) are QuietWatch.
import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHPACK
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
    /// The handlers of an HTTP/1.1 connection, added to `channel`'s pipeline: the front that answers kept answers
    /// (``CachedAnswerFront``, with a cache), NIO's decoder, and the handler.
    static func addHTTP1(to channel: any Channel, settings: Settings, cache: ResponseCache?) throws {
        let sync = channel.pipeline.syncOperations
        let answers = BundleChannelHandler(settings, cache: cache)
        if let cache { try sync.addHandler(CachedAnswerFront(answers: answers, cache: cache, handle: settings.serving.handle)) }
        try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
        try sync.addHandler(answers)
    }

    /// Requests received and not yet answered past which the connection is not read.
    static let maxWaiting = 16

    let settings: Settings
    /// The server's cache of whole responses, shared by its event loops; nil when there is none.
    let cache: ResponseCache?
    var head: HTTPRequestHead?
    /// The body of the request being read, kept only where a bundle may match it (a method other than GET or HEAD,
    /// bundles with request variants), at most ``BundleRequest/maxBodySize`` bytes.
    var body: ByteBuffer?
    var bodyTooLarge = false
    /// The server's budget for request bodies had no room for this one: 503, not a wrong answer.
    var bodyRefused = false
    /// What this connection holds of the server's budget for request bodies.
    var share: BodyShare
    /// The rest of the current request's body is not read: it was answered before it (413, 503) and the connection
    /// closes after that answer.
    var skippingBody = false
    /// Bytes of the current request's body dropped unread (no bundle matches by it): past
    /// ``BundleRequest/maxBodySize``, a 413 and the connection closed, as for a body kept.
    var droppedBodyBytes = 0
    /// Body bytes received, watched while a body is held (``Settings/bodyTimeout``).
    var bodyBytesReceived = 0
    var bodyWatch = QuietWatch()
    var bodyCheck: Scheduled<Void>?
    /// The requests read and waiting their turn; reading held back past 16 of them or 1 MiB of their bodies.
    var queue = RequestQueue<Pending>(maxWaiting: BundleChannelHandler.maxWaiting, maxBodyBytes: BundleRequest.maxBodySize)

    /// A request read whole, waiting its turn.
    struct Pending {
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
    /// Whether an answer is under way or being written, and whether the connection goes on.
    var connection = ConnectionState()
    var unflushed = false
    var idleCheck: Scheduled<Void>?
    /// Request parts received.
    var reads = 0
    /// Writes that completed (a chunk of a streamed body, a span of a file sent) or drained (the channel writable
    /// again): an answer going out to a client that reads makes progress; one to a client that stopped reading does not.
    var progress = 0
    /// Reads and progress, at checks half an idle period apart: quiet at two checks in a row, a whole period.
    var idleWatch = QuietWatch()
    /// The protocol of the request being answered, for the access log (HTTP/2.0 on a stream).
    var version = HTTPVersion.http1_1
    /// The `Date` value (RFC 9110 §6.6.1: an origin server with a clock sends one).
    var date = DateField()

    /// An HTTP/2 connection's turns for large bodies, which its streams (a handler each) share; nil over HTTP/1.1, where
    /// a connection answers one request at a time.
    let gate: BodyGate?
    /// This handler's turn of the gate: none, held, or given back as stalled.
    var turn = StreamTurn()
    /// Checks, while a turn is held, that the answer makes progress.
    var stallCheck: Scheduled<Void>?
    /// The first chunks are being read off the event loop: a turn held is given back when they come, not before.
    var readingOffLoop = false
    /// The next chunk of a body is being read off the event loop: an answer waiting for its own read (a thread pool
    /// held up by other work) is not a stream its client stopped reading.
    var readingNextChunk = false
    /// The handler left its channel: a turn given later is handed back at once.
    var removed = false

    init(_ settings: Settings, cache: ResponseCache?, gate: BodyGate? = nil) {
        self.settings = settings
        self.cache = cache
        self.gate = gate
        share = BodyShare(budget: settings.bodyBudget)
    }

    /// This handler's context while it is in its pipeline, for the answers ``CachedAnswerFront`` gives through it.
    var ownContext: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        ownContext = context
        if settings.idleCheck { scheduleIdleCheck(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        ownContext = nil
        if !readingOffLoop { releaseGate() }
        idleCheck?.cancel()
        bodyCheck?.cancel()
        share.releaseAll()
    }

    /// Twice a period: a connection that sent nothing and whose answers made no progress (none going out, or one stuck
    /// behind a client that stopped reading: a write timeout, as nginx's `send_timeout`) at two checks in a row, a whole
    /// period, is closed; so it goes between one and one and a half periods after its last activity (with one check a
    /// period, up to two). Counters per request and per write, instead of a timestamp per read and write (an
    /// `IdleStateHandler` cost a tenth of the request rate).
    func scheduleIdleCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(in: .nanoseconds(settings.idleTimeout.nanoseconds / 2)) {
            let (handler, context) = bound.value
            if handler.idleWatch.check(activity: handler.reads &+ handler.progress) { return context.close(promise: nil) }
            handler.scheduleIdleCheck(context: context)
        }
    }

    // MARK: - Reading requests

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reads &+= 1
        guard queue.refused == nil else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
            bodyTooLarge = false
            bodyRefused = false
            skippingBody = false
            droppedBodyBytes = 0
            // Known once the channel is active (not yet when the handler is added); nothing is reserved before a head.
            if share.client == nil { share.client = context.channel.remoteAddress?.ipAddress.map(BodyBudget.clientKey) }
            let length = head.headers.first(name: "content-length").flatMap { Int($0) }
            // A body past what any reader matches on is a 413 from its Content-Length, before a byte of it is read.
            if let length, length > BundleRequest.maxBodySize { return answerBeforeBody(head, tooLarge: true, context: context) }
            // A body is kept only where a bundle matches requests by it (a recorded POST's URL, say), and within the
            // server's budget for all connections and the client's share of it: elsewhere it is read and dropped.
            if head.method != .HEAD, settings.serving.matchesBody(method: head.method.rawValue, target: head.uri, host: head.headers.first(name: "host")) {
                // Reserved whole from its Content-Length: no room is a 503 now, not after the client sent it all.
                if let length, length > 0, !share.reserveAhead(length) { return answerBeforeBody(head, tooLarge: false, context: context) }
                body = context.channel.allocator.buffer(capacity: 0)
                startBodyCheck(context: context)
            }
            // RFC 9110 §10.1.1: the client waits for a 100 before it sends the body. Only for a body that will be kept (one
            // that would be dropped is not asked for: the client sends it after its own wait, or not at all), and only
            // where no other answer is going out on this connection (over HTTP/1.1), so the 100 cannot fall inside another.
            if body != nil, head.headers.first(name: "expect")?.lowercased() == "100-continue", gate == nil, head.version.minor >= 1,
                connection.answersAtOnce, queue.isEmpty
            {
                context.writeAndFlush(out(.byteBuffer(ByteBuffer(staticString: "HTTP/1.1 100 Continue\r\n\r\n"))), promise: nil)
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
            } else if share.take(part.readableBytes) {
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
            guard let head, !connection.isClosing else { return }
            self.head = nil
            // What was reserved ahead and not sent (a shorter body cannot be: NIO reads Content-Length bytes) is given back.
            share.bodyEnded()
            let pending = Pending(head: head, body: body, tooLarge: bodyTooLarge, refused: bodyRefused)
            body = nil
            enqueue(pending, context: context)
        }
    }

    /// Answers or queues a request read whole (or answered before its body).
    func enqueue(_ pending: Pending, context: ChannelHandlerContext) {
        switch connection.arrival(othersWaiting: !queue.isEmpty, writable: context.channel.isWritable) {
        case .wait: queue.append(pending, bodyBytes: pending.body?.readableBytes ?? 0)
        case .answer: respond(to: pending, context: context)
        }
    }

    /// Gives back the body being read (and what was reserved ahead for it).
    func releaseBody() { share.dropBody(of: body?.readableBytes ?? 0) }

    /// A 413 (too large) or 503 (no room in the budget) for `head` before its body is read: the rest of the body is not
    /// read, and the connection closes after the answer (nginx answers `client_max_body_size` the same way).
    func answerBeforeBody(_ head: HTTPRequestHead, tooLarge: Bool, context: ChannelHandlerContext) {
        guard !skippingBody, !connection.isClosing else { return }
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
    func startBodyCheck(context: ChannelHandlerContext) {
        bodyCheck?.cancel()
        bodyWatch = QuietWatch(activity: bodyBytesReceived)
        scheduleBodyCheck(context: context)
    }

    func scheduleBodyCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        bodyCheck = context.eventLoop.scheduleTask(in: .nanoseconds(settings.bodyTimeout.nanoseconds / 2)) {
            let (handler, context) = bound.value
            guard handler.body != nil, handler.head != nil else { return }
            if handler.bodyWatch.check(activity: handler.bodyBytesReceived) {
                // The body's room goes back before the socket closes: a client that sees the close and sends again
                // finds it. (Bodies of requests waiting their turn keep theirs until answered or the handler leaves.)
                handler.releaseBody()
                handler.body = nil
                handler.skippingBody = true
                return context.close(promise: nil)
            }
            handler.scheduleBodyCheck(context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { flushIfNeeded(context: context) }

    func read(context: ChannelHandlerContext) {
        if queue.mayRead(writable: context.channel.isWritable) { context.read() }
    }

    /// The client sent its last request and half-closed (`shutdown(SHUT_WR)`): its answers still go out.
    /// A graceful shutdown (`ChannelShouldQuiesceEvent`): the same, the answers in flight and the requests received
    /// go out, then the connection closes (at once when idle).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if (event as? ChannelEvent) == .inputClosed || event is ChannelShouldQuiesceEvent {
            connection.inputEnded()
            closeIfAnswered(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// After a half-close, closes once nothing waits, answers or is refused.
    func closeIfAnswered(context: ChannelHandlerContext) {
        guard connection.closesAfterInput(nothingWaits: queue.isEmpty && queue.refused == nil) else { return }
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
        guard error is HTTPParserError, !connection.isClosing else {
            context.close(promise: nil)
            return
        }
        let (method, target) = (head?.method.rawValue ?? "-", head?.uri ?? "-")
        // Behind requests waiting or being answered, those are answered first, in order; then the 400 ends the connection.
        if queue.refuse(method: method, target: target, busy: connection.answering) == .now { badRequest(method: method, target: target, context: context) }
    }

    /// A 400 that ends the connection, logged like any answer.
    func badRequest(method: String, target: String, context: ChannelHandlerContext) {
        connection.ending()
        queue.clear()
        logServed(ServedRequest(client: nil, method: method, target: target, status: 400, contentLength: "0", source: nil), context: context)
        if onHTTP2 {
            var fields = HTTP2Head.fields(status: 400, fields: [.contentLength: "0"], serverName: nil)
            HTTP2Head.end(&fields, date: date.value(at: time(nil)), age: nil)
            writeHTTP2Head(fields, status: 400, contentLength: 0, context: context)
            return closeOnceWritten(context: context)
        }
        var buffer = context.channel.allocator.buffer(capacity: 96)
        buffer.writeStaticString("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        closeOnceWritten(after: buffer, context: context)
    }

    /// Ends the connection once what was written (and `last`) has gone out; later requests are not answered.
    func closeOnceWritten(after last: ByteBuffer = ByteBuffer(), context: ChannelHandlerContext) {
        connection.ending()
        unflushed = false
        let channel = context.channel
        context.writeAndFlush(out(.byteBuffer(last))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// After an answer that went off the event loop, or once the channel is writable again: the requests that waited,
    /// in order, while the channel takes more.
    func resume(context: ChannelHandlerContext) {
        guard connection.mayResume() else { return }
        while !connection.isClosing,
            let next = queue.next(busy: connection.answering, writable: context.channel.isWritable, bodyBytes: { $0.body?.readableBytes ?? 0 })
        {
            respond(to: next, context: context)
        }
        if !connection.isClosing, let refused = queue.refusalDue(busy: connection.answering) {
            return badRequest(method: refused.method, target: refused.target, context: context)
        }
        if queue.resumesRead(writable: context.channel.isWritable) { context.read() }
        flushIfNeeded(context: context)
        closeIfAnswered(context: context)
    }

    func respond(to pending: Pending, context: ChannelHandlerContext) {
        whileWriting(context: context) { answer(pending, context: context) }
    }

    /// Runs `write`, which writes an answer's parts, so that a resume asked for meanwhile waits until it returns.
    func whileWriting(context: ChannelHandlerContext, _ write: () -> Void) {
        let outermost = connection.writesBegin()
        write()
        if connection.writesEnd(outermost: outermost) { resume(context: context) }
    }

    /// Whether the socket holds partial segments back (TCP_CORK) until the flush: set while a head, a file's span and a
    /// trailer go out, so they leave as full segments rather than three pushes.
    var corked = false
}
