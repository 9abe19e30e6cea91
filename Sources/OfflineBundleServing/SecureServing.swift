import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import OfflineBundle

/// HTTPS for the channel server: TLS in front of the same answer step, HTTP/1.1 or HTTP/2 as the client's ALPN offer
/// says.
///
/// Over HTTP/1.1 the pipeline is the plain one behind `NIOSSLServerHandler`; the handler then sends no span of the
/// bundle file with `sendfile` (which cannot go through TLS), but reads bodies in chunks. Over HTTP/2 each stream runs the
/// same handler behind ``HTTP2StreamCodec``, which turns the stream's frames into request parts and its response bytes
/// into frames, so both protocols answer from one answer step, one response cache and one set of checks; what that cache
/// holds, ``HTTP2CacheFront`` answers on the connection without a stream. Both protocols write through
/// ``TLSWriteCoalescer``.
enum SecureServing {
    /// How many streams of one HTTP/2 connection read and send a large body at once (``BodyGate``).
    static let largeBodiesPerConnection = 2

    /// Adds TLS and the protocol the client chose by ALPN to a new connection. A connection whose handshake has not
    /// ended within `idleTimeout` is closed, as is an HTTP/2 connection that neither sends anything nor takes any of its
    /// answers' bytes for that long.
    static func configure(
        _ channel: any Channel, context: NIOSSLContext, settings: BundleChannelHandler.Settings, cache: ResponseCache?
    ) -> EventLoopFuture<Void> {
        do {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        var unchecked = settings
        unchecked.idleCheck = false
        let streamSettings = unchecked
        let handshake = channel.eventLoop.scheduleTask(in: settings.idleTimeout) { channel.close(promise: nil) }
        // A connection that ends before its handshake does (a scanner, a failed handshake) is not held by the timer.
        channel.closeFuture.whenComplete { _ in handshake.cancel() }
        return channel.configureHTTP2SecureUpgrade(
            h2ChannelConfigurator: { channel in
                handshake.cancel()
                // A stream stalls after a thirtieth of the idle period without progress (2 s of the default 60 s).
                let gate = BodyGate(
                    limit: SecureServing.largeBodiesPerConnection, stallPeriod: .nanoseconds(max(settings.idleTimeout.nanoseconds / 30, 100_000_000)),
                    loop: channel.eventLoop)
                do {
                    try channel.pipeline.syncOperations.addHandler(TLSWriteCoalescer())
                    // Idle when the client sent nothing and no write completed: a client that reads a long answer
                    // slowly (its window large enough not to send updates) makes writes complete, one that stopped
                    // reading does not.
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: settings.idleTimeout))
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                let streams: NIOChannelInitializer = { stream in
                    stream.eventLoop.makeCompletedFuture {
                        let sync = stream.pipeline.syncOperations
                        try sync.addHandler(HTTP2StreamCodec())
                        try sync.addHandler(BundleChannelHandler(streamSettings, cache: cache, gate: gate))
                    }
                }
                guard let cache else {
                    // No cache of whole answers: every request on a stream channel, by the multiplexer inside
                    // NIOHTTP2Handler (fewer hops per frame than the separate one).
                    return channel.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: .init(), streamConfiguration: .init(), inboundStreamInitializer: streams
                    ).map { _ in }
                }
                // With one, the requests it answers are answered on the connection (``HTTP2CacheFront``); the others go
                // on to stream channels made by the separate multiplexer behind it.
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()))
                    try sync.addHandler(HTTP2CacheFront(settings: settings, cache: cache, gate: gate))
                    try sync.addHandler(HTTP2StreamMultiplexer(mode: .server, channel: channel, inboundStreamInitializer: streams))
                }
            },
            http1ChannelConfigurator: { channel in
                handshake.cancel()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSWriteCoalescer())
                    try sync.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                    try sync.addHandler(BundleChannelHandler(settings, cache: cache))
                }
            })
    }
}

/// Joins the small writes made between two flushes into buffers of up to one TLS record (16 KiB) before they reach
/// `NIOSSLHandler`, which seals one record per write it is given. HTTP/2 writes each frame's 9-byte header apart from its
/// payload, so an answer of a few kilobytes was three records, each with its own seal and overhead; joined, the answers
/// of a read's requests share records. A write of a record's size or more goes on as it is (after what was joined
/// before it), so large bodies are not copied.
///
/// It also flushes once ``flushSize`` bytes were written since the last flush. `NIOSSLHandler` holds writes until a
/// flush, where the channel does not count them: without this, handlers that check the channel's writability before
/// answering (a client that does not read must not get an answer per request) would find it writable however much
/// they had written in one read's requests. Flushed, the bytes are the socket's pending writes, which make the channel
/// unwritable past its high water mark.
///
/// NIO tells the writability changes of a flush while it flushes. A change to "writable" that such a flush causes is
/// passed on once the write that flushed has returned (on the event loop's next turn), never from inside it: a handler
/// told "writable" while the one before it is between two writes of one answer (an HTTP/1.1 body's chunks, an HTTP/2
/// DATA frame's header and payload) would put its own answer's bytes between them. A change to "unwritable" is passed
/// on at once: it stops writes, and NIO's HTTP/2 handler, told late, would seal a whole body's frames meanwhile.
final class TLSWriteCoalescer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// The largest plaintext of a TLS record (RFC 8446 §5.1).
    static let recordSize = 16 << 10
    /// Written and not flushed past which the writes are flushed.
    static let flushSize = 64 << 10

    private var joined: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []
    private var unflushed = 0

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            send(context: context)
            return context.write(data, promise: promise)
        }
        unflushed += bytes.readableBytes
        // An empty write (a handler's mark to wait on before it flushes) needs no buffer of its own.
        if bytes.readableBytes >= Self.recordSize || bytes.readableBytes == 0 {
            send(context: context)
            context.write(data, promise: promise)
        } else {
            if let held = joined, held.readableBytes + bytes.readableBytes > Self.recordSize { send(context: context) }
            if joined == nil { joined = context.channel.allocator.buffer(capacity: Self.recordSize) }
            joined!.writeBuffer(&bytes)
            if let promise { promises.append(promise) }
        }
        if unflushed >= Self.flushSize {
            flushingInWrite = true
            flush(context: context)
            flushingInWrite = false
        }
    }

    /// Set while ``write(context:data:promise:)`` flushes; a writability change then waits (``deferredWritability``).
    private var flushingInWrite = false
    private var deferredWritability = false
    private var removed = false

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // "Unwritable" goes on at once: it makes handlers stop writing (NIO's HTTP/2 handler then holds the rest of a
        // body in its flow-control buffers, uncopied, instead of giving it to TLS to seal). "Writable" makes them write:
        // inside a write, it waits.
        guard flushingInWrite, context.channel.isWritable else { return context.fireChannelWritabilityChanged() }
        // One event for the changes of one flush: its handlers read the channel's writability when it comes.
        guard !deferredWritability else { return }
        deferredWritability = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.deferredWritability = false
            if !handler.removed { context.fireChannelWritabilityChanged() }
        }
    }

    func flush(context: ChannelHandlerContext) {
        unflushed = 0
        send(context: context)
        context.flush()
    }

    /// Writes what was joined, completing the joined writes' promises with it.
    private func send(context: ChannelHandlerContext) {
        guard let bytes = joined else { return }
        joined = nil
        if promises.isEmpty { return context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: nil) }
        var taken: [EventLoopPromise<Void>] = []
        swap(&taken, &promises)
        let waiting = taken
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            for promise in waiting { promise.completeWith(result) }
        }
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: written)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
        // Writes joined and never flushed fail as the channel's pending writes do when it closes.
        let waiting = promises
        promises.removeAll()
        joined = nil
        for promise in waiting { promise.fail(ChannelError.ioOnClosedChannel) }
    }
}

/// Closes the connection on the idle event of the `IdleStateHandler` before it.
final class CloseWhenIdle: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The client closed its side (connections allow half-closure for HTTP/1.1's sake): nothing more can come
            // on an HTTP/2 connection, which would otherwise stay half open until the idle timeout.
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// Answers, on the HTTP/2 connection itself, the requests the cache of whole answers holds: a GET whose HEADERS frame
/// ends its stream, with one Host (or `:authority`), no Range or conditional field and one Accept-Encoding at most,
/// found under the key ``BundleChannelHandler`` keeps it by (raw Host, target, Accept-Encoding) and the loader
/// generation it was filled from. Such an answer is a HEADERS frame (the kept head's fields, with Date and Age as the
/// handler adds them) and a DATA frame of the kept bytes that ends the stream, and an access-log line as the handler
/// writes one: what the handler answers from the cache, without a stream channel and its handlers per request (which
/// cost the HTTP/2 rows more than the answer itself). Every other frame goes on to the stream multiplexer behind it,
/// whose streams run the handler, which fills the cache.
final class HTTP2CacheFront: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let settings: BundleChannelHandler.Settings
    private let cache: ResponseCache
    /// The connection's turns and its count of kept bytes in flight (``BodyGate/keptLimit``), shared with its streams.
    private let gate: BodyGate
    /// The highest stream a request opened: a HEADERS frame on a higher one opens a request, on another ends one
    /// (trailers), which goes on with its stream.
    private var lastStream = HTTP2StreamID(0)
    private var unflushed = false
    private var date = DateField()

    init(settings: BundleChannelHandler.Settings, cache: ResponseCache, gate: BodyGate) {
        self.settings = settings
        self.cache = cache
        self.gate = gate
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if case .headers(let block) = frame.payload, frame.streamID > lastStream {
            lastStream = frame.streamID
            if block.endStream, answer(frame.streamID, block.headers, context: context) { return }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    /// Answers the request from the cache when it holds the answer; false, having sent nothing, when it does not.
    private func answer(_ stream: HTTP2StreamID, _ fields: HPACKHeaders, context: ChannelHandlerContext) -> Bool {
        // An answer goes out whole, whatever the client reads (its windows may be wide open): while the connection is
        // not writable (a client that does not read; ``TLSWriteCoalescer`` flushes as answers pile up, so that it
        // shows), requests go on to stream channels, which wait until it is.
        guard context.channel.isWritable else { return false }
        var method: String?
        var path: String?
        var authority: String?
        var asked = BundleChannelHandler.Asked()
        for (name, value, _) in fields {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case ":authority": authority = value
            default: asked.read(name, value)
            }
        }
        // As ``HTTP2StreamCodec`` reads the request: the Host field, else `:authority`.
        if asked.hosts == 0, let authority { asked.read("host", authority) }
        guard method == "GET", let path, asked.hosts == 1, asked.plain else { return false }
        let generation = settings.serving.handle.snapshot.generation
        // Its body goes out as the cache's own buffer: not past the connection's bound on those in flight (a client
        // whose windows take nothing holds them), where the streams read it afresh.
        guard let kept = cache.answer(for: asked.key(for: path), generation: generation), case .bytes(let body) = kept.body,
            var headers = kept.http2Fields, gate.mayWriteKept(body.readableBytes)
        else { return false }
        let now = time(nil)
        headers.add(name: "date", value: date.value(at: now))
        if let age = kept.age(at: now) { headers.add(name: "age", value: String(age), indexing: .nonIndexable) }
        if let served = settings.serving.policy.accessLog {
            var record = ServedRequest(
                client: context.channel.remoteAddress?.ipAddress, method: "GET", target: path, status: kept.status, contentLength: kept.contentLength,
                source: kept.source)
            record.version = HTTPVersion.http2.description
            served(record)
        }
        let empty = body.readableBytes == 0
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: headers, endStream: empty)))), promise: nil)
        if !empty {
            gate.writeKept(
                wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), bytes: body.readableBytes,
                context: context)
        }
        unflushed = true
        return true
    }
}

/// An HTTP/2 stream's frames as the request parts ``BundleChannelHandler`` reads, and the HTTP/1.1 response bytes it
/// writes (a head as bytes, then the body's buffers) as frames: a HEADERS frame of the head's status and fields (less
/// those HTTP/2 forbids: Connection, Keep-Alive, Transfer-Encoding, Upgrade), then DATA frames, the last of them (or the
/// HEADERS frame, for HEAD, 1xx, 204, 304 and empty bodies) ending the stream once Content-Length bytes went. One
/// stream carries one request.
///
/// One handler in place of NIO's HTTP/2-to-HTTP/1 codec and a second one turning bytes into its parts: a request costs
/// one hop less each way, no `HTTPResponseHead` between the bytes and the HPACK fields, and no empty DATA frame to end
/// the stream. Fields whose values change from answer to answer (`etag`, `content-length`, …) are sent without
/// indexing, so the connection's HPACK table keeps the ones that repeat (`content-type`, `server`, `vary`, and `date`,
/// the same for a second).
final class HTTP2StreamCodec: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = IOData
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// The request's head went up; a further HEADERS frame is its trailers.
    private var requested = false
    /// The request asked for the head only.
    private var head = false
    /// The head's bytes until its blank line came.
    private var pendingHead: ByteBuffer?
    /// Body bytes still to go; nil until the head went, and after the end.
    private var remaining: Int?
    private var ended = false
    /// The last frame written: an empty write (the handler's flush-and-wait) completes with it.
    private var lastWrite: EventLoopFuture<Void>?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let block):
            if requested {
                // Trailers: the request ends; the bundle answers no request by its trailers.
                if block.endStream { context.fireChannelRead(wrapInboundOut(.end(nil))) }
                return
            }
            requested = true
            // NIO's HTTP/2 handler validated the block: a request has :method, :scheme and :path (CONNECT aside).
            guard let method = block.headers.first(name: ":method"), let path = block.headers.first(name: ":path") else {
                context.close(promise: nil)
                return
            }
            var fields: [(String, String)] = []
            fields.reserveCapacity(block.headers.count)
            if let authority = block.headers.first(name: ":authority"), !block.headers.contains(name: "host") { fields.append(("host", authority)) }
            for (name, value, _) in block.headers where !name.hasPrefix(":") { fields.append((name, value)) }
            head = method == "HEAD"
            let request = HTTPRequestHead(version: .http2, method: HTTPMethod(rawValue: method), uri: path, headers: HTTPHeaders(fields))
            context.fireChannelRead(wrapInboundOut(.head(request)))
            if block.endStream { context.fireChannelRead(wrapInboundOut(.end(nil))) }
        case .data(let frame):
            guard case .byteBuffer(let bytes) = frame.data else { return }
            if bytes.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(.body(bytes))) }
            if frame.endStream { context.fireChannelRead(wrapInboundOut(.end(nil))) }
        default:
            // RST_STREAM closes the stream channel; the other frames mean nothing to the answer.
            break
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // The handler sends no span of a file over TLS (``BundleChannelHandler/Settings/sendfile``): bytes only.
        guard case .byteBuffer(var bytes) = unwrapOutboundIn(data) else {
            promise?.fail(Unexpected(what: "a span of a file to send through TLS"))
            return context.close(promise: nil)
        }
        if ended || (bytes.readableBytes == 0 && pendingHead == nil) {
            // Nothing to send: done when what was written before is.
            if let lastWrite { lastWrite.cascade(to: promise) } else { promise?.succeed() }
            return
        }
        if remaining == nil {
            if var pending = pendingHead {
                pending.writeBuffer(&bytes)
                bytes = pending
            }
            guard let end = HTTP2ResponseHead.endOfHead(bytes) else {
                pendingHead = bytes
                promise?.succeed()
                return
            }
            pendingHead = nil
            guard let (fields, status, length) = HTTP2ResponseHead.parse(bytes.readSlice(length: end)!) else {
                promise?.fail(Unexpected(what: "a response head without a status"))
                return context.close(promise: nil)
            }
            let bodyless = head || status < 200 || status == 204 || status == 304
            remaining = bodyless ? 0 : length
            if remaining == 0 {
                ended = true
                return send(.headers(.init(headers: fields, endStream: true)), promise: promise, context: context)
            }
            if bytes.readableBytes == 0 { return send(.headers(.init(headers: fields)), promise: promise, context: context) }
            context.write(wrapOutboundOut(.headers(.init(headers: fields))), promise: nil)
        }
        guard let left = remaining else {
            promise?.succeed()
            return
        }
        let body = bytes.readSlice(length: min(bytes.readableBytes, left))!
        remaining = left - body.readableBytes
        if remaining == 0 { ended = true }
        send(.data(.init(data: .byteBuffer(body), endStream: ended)), promise: promise, context: context)
    }

    /// What the handler never writes on a stream: the stream is then reset.
    struct Unexpected: Error {
        var what: String
    }

    private func send(_ frame: HTTP2Frame.FramePayload, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(wrapOutboundOut(frame), promise: written)
        lastWrite = written.futureResult
        written.futureResult.cascade(to: promise)
    }
}

/// The HTTP/1.1 response heads ``BundleChannelHandler`` writes, read back as HTTP/2 fields.
enum HTTP2ResponseHead {
    /// The fields whose values change from answer to answer: sent without indexing (RFC 7541 §6.2.2), so they never
    /// push the repeating ones out of the connection's HPACK table. (`date` is indexed: it is the same for a second.)
    private static let volatile: Set<String> = ["etag", "content-length", "last-modified", "age", "expires", "content-range", "location"]

    /// The index of the byte after the head's blank line (CR LF CR LF), if it came.
    static func endOfHead(_ bytes: ByteBuffer) -> Int? {
        bytes.withUnsafeReadableBytes { raw -> Int? in
            guard raw.count >= 4 else { return nil }
            var index = 3
            while index < raw.count {
                if raw[index] == 0x0A && raw[index - 1] == 0x0D && raw[index - 2] == 0x0A && raw[index - 3] == 0x0D { return index + 1 }
                index += 1
            }
            return nil
        }
    }

    /// The `:status` and fields of a head the handler wrote (names lowercased, HTTP/1.1's connection fields dropped),
    /// its status, and its Content-Length (0 when it has none).
    static func parse(_ head: ByteBuffer) -> (HPACKHeaders, Int, Int)? {
        head.withUnsafeReadableBytes { raw -> (HPACKHeaders, Int, Int)? in
            let bytes = raw.bindMemory(to: UInt8.self)
            // "HTTP/1.1 200 …"
            guard bytes.count >= 12 else { return nil }
            var code = 0
            for index in 9..<12 {
                guard (0x30...0x39).contains(bytes[index]) else { return nil }
                code = code * 10 + Int(bytes[index] - 0x30)
            }
            var fields = HPACKHeaders()
            fields.reserveCapacity(12)
            fields.add(name: ":status", value: String(code))
            var length = 0
            var start = 0
            while start < bytes.count, bytes[start] != 0x0A { start += 1 }
            start += 1
            while start < bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != 0x0A { end += 1 }
                let line = UnsafeBufferPointer(rebasing: bytes[start..<(end > start && bytes[end - 1] == 0x0D ? end - 1 : end)])
                start = end + 1
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
                var valueStart = colon + 1
                while valueStart < line.count, line[valueStart] == 0x20 { valueStart += 1 }
                let nameBytes = UnsafeBufferPointer(rebasing: line[..<colon])
                // HTTP/2 field names are lowercase (RFC 9113 §8.2.1); the handler writes them so, and this keeps it true.
                let name =
                    nameBytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
                    ? String(decoding: nameBytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                    : String(decoding: nameBytes, as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(rebasing: line[valueStart...]), as: UTF8.self)
                switch name {
                case "connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection": continue
                case "content-length": length = Int(value) ?? 0
                default: break
                }
                fields.add(name: name, value: value, indexing: volatile.contains(name) ? .nonIndexable : .indexable)
            }
            return (fields, code, length)
        }
    }
}
