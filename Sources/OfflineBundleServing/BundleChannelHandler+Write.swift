import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOPosix
import OfflineBundle

// Writing an answer: its head ended with this request's lines, bodies and file spans (sendfile), cork and flush.
extension BundleChannelHandler {
    /// A response head as this connection writes it: HTTP/1.1's status line and fixed lines, or HTTP/2's fields for
    /// ``HTTP2StreamCodec`` (made of the same status and fields, never read back from bytes).
    enum Head {
        case http1(ByteBuffer)
        case http2(HPACKHeaders, status: Int, contentLength: Int)
    }

    /// Whether this handler answers on an HTTP/2 stream (``HTTP2StreamCodec``): its answers are written as typed parts.
    /// Known from its making (a stream's handler is given its connection's gate; an HTTP/1.1 one has none), not from a
    /// request: a 400 before any request was answered goes out typed too.
    var onHTTP2: Bool { gate != nil }

    /// The head of an answer with `status` and `fields` (the fixed part: this request's lines are added when it is sent).
    func encodedHead(status: Int, fields: HTTPFields, context: ChannelHandlerContext) -> Head {
        guard onHTTP2 else {
            return .http1(ResponseHead.fixed(status: status, fields: fields, serverName: settings.serverName, allocator: context.channel.allocator))
        }
        return .http2(
            HTTP2Head.fields(status: status, fields: fields, serverName: settings.serverName), status: status,
            contentLength: fields[.contentLength].flatMap { Int($0) } ?? 0)
    }

    /// Bytes as this connection writes them: as they are over HTTP/1, as a body part over HTTP/2.
    func out(_ data: IOData) -> NIOAny { onHTTP2 ? NIOAny(HTTP2StreamCodec.Part.body(data)) : wrapOutboundOut(data) }

    /// The head, ended with the lines of this request (Date, Age, Connection), after the access log heard of it.
    func sendHead(_ response: Response, context: ChannelHandlerContext) {
        logServed(response.record, context: context)
        switch response.head {
        case .http1(var head):
            endHead(&head, age: response.age, keepAlive: response.keepAlive, http10: response.http10)
            send(head, context: context)
        case .http2(var fields, let status, let length):
            HTTP2Head.end(&fields, date: date.value(at: time(nil)), age: response.age)
            writeHTTP2Head(fields, status: status, contentLength: length, context: context)
        }
    }

    /// An HTTP/2 head, to ``HTTP2StreamCodec``.
    func writeHTTP2Head(_ fields: HPACKHeaders, status: Int, contentLength: Int, context: ChannelHandlerContext) {
        context.write(NIOAny(HTTP2StreamCodec.Part.head(fields, status: status, contentLength: contentLength)), promise: nil)
        unflushed = true
    }

    /// Tells the access log, when there is one, with the client's address (only then looked up).
    func logServed(_ record: ServedRequest, context: ChannelHandlerContext) {
        guard let served = settings.serving.policy.accessLog else { return }
        var record = record
        record.client = context.channel.remoteAddress?.ipAddress
        record.version = version.description
        served(record)
    }

    func endHead(_ buffer: inout ByteBuffer, age: Int?, keepAlive: Bool, http10: Bool) {
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
    func sendFile(_ file: ResponseCache.FileBytes, context: ChannelHandlerContext) {
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
            context.write(out(.fileRegion(region))).whenComplete { result in
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

    func send(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        context.write(out(.byteBuffer(buffer)), promise: nil)
        unflushed = true
    }

    func flushIfNeeded(context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
        if corked { cork(false, context: context) }
    }

    /// TCP_CORK on Linux; BSD's TCP_NOPUSH does the same elsewhere.
    #if canImport(Darwin)
        static let corkOption = TCP_NOPUSH
    #else
        static let corkOption = TCP_CORK
    #endif

    func cork(_ on: Bool, context: ChannelHandlerContext) {
        corked = on
        try? context.channel.syncOptions?.setOption(
            ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: Self.corkOption)), value: on ? 1 : 0)
    }

    /// The response is written; without keep-alive the connection closes once it has gone out.
    func end(keepAlive: Bool, context: ChannelHandlerContext) {
        guard !keepAlive else { return }
        closeOnceWritten(context: context)
    }
}

extension HTTPRequestHead {
    /// HTTP/1.0: an answer kept alive says so (HTTP/2's version is 2.0, not this).
    var isHTTP10: Bool { version.major == 1 && version.minor == 0 }
}
