import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import OfflineBundle

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
