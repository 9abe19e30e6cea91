import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// An HTTP/2 stream's frames as the request parts ``BundleChannelHandler`` reads, and the typed response it writes (a
/// head of HPACK fields, ``HTTP2Head``, then the body's buffers) as frames: a HEADERS frame, then DATA frames, the last
/// of them (or the HEADERS frame, for HEAD, 1xx, 204, 304 and empty bodies) ending the stream once Content-Length bytes
/// went. One stream carries one request.
///
/// One handler in place of NIO's HTTP/2-to-HTTP/1 codec and a second one turning bytes into its parts: a request costs
/// one hop less each way, and no empty DATA frame ends the stream. Fields whose values change from answer to answer
/// (`etag`, `content-length`, …) are sent without indexing, so the connection's HPACK table keeps the ones that repeat
/// (`content-type`, `server`, `vary`, and `date`, the same for a second).
final class HTTP2StreamCodec: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = Part
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// What the handler writes on a stream.
    enum Part {
        /// The head: `:status` and the fields, the status, and the Content-Length (0 when none).
        case head(HPACKHeaders, status: Int, contentLength: Int)
        /// Body bytes (an empty buffer: done when what was written before is).
        case body(IOData)
    }

    /// The request's head went up; a further HEADERS frame is its trailers.
    private var requested = false
    /// The request asked for the head only.
    private var head = false
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
        switch unwrapOutboundIn(data) {
        case .head(let fields, let status, let length):
            guard remaining == nil, !ended else {
                promise?.fail(Unexpected(what: "a second response head"))
                return context.close(promise: nil)
            }
            let bodyless = head || status < 200 || status == 204 || status == 304
            remaining = bodyless ? 0 : length
            ended = remaining == 0
            send(.headers(.init(headers: fields, endStream: ended)), promise: promise, context: context)
        case .body(let data):
            // The handler sends no span of a file over TLS (``BundleChannelHandler/Settings/sendfile``): bytes only.
            guard case .byteBuffer(var bytes) = data else {
                promise?.fail(Unexpected(what: "a span of a file to send through TLS"))
                return context.close(promise: nil)
            }
            if ended || bytes.readableBytes == 0 {
                // Nothing to send: done when what was written before is.
                if let lastWrite { lastWrite.cascade(to: promise) } else { promise?.succeed() }
                return
            }
            guard let left = remaining else {
                promise?.fail(Unexpected(what: "a body before its head"))
                return context.close(promise: nil)
            }
            let body = bytes.readSlice(length: min(bytes.readableBytes, left))!
            remaining = left - body.readableBytes
            if remaining == 0 { ended = true }
            send(.data(.init(data: .byteBuffer(body), endStream: ended)), promise: promise, context: context)
        }
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
