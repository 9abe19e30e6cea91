// The answers HTTP2Connection gives on the connection itself, from the response cache.
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import OfflineBundle

extension HTTP2Connection {
    /// Answers the request from the cache when it holds the answer; false, having sent nothing, when it does not. Not
    /// while the connection is not writable (a client that does not read): those requests go on to stream channels,
    /// which wait until it is; nor past the connection's bound on kept bytes in flight (``BodyGate/keptLimit``).
    func answer(_ id: UInt32, _ fields: HPACKHeaders, context: ChannelHandlerContext) -> Bool {
        guard let cache, context.channel.isWritable else { return false }
        var method: String?
        var path: String?
        var authority: String?
        var asked = BundleChannelHandler.Asked()
        for (name, value, _) in fields {
            switch name {
            case ":method": method = value
            case ":path": path = value
            case ":authority": authority = value
            case ":scheme": continue
            default: asked.read(name, value)
            }
        }
        if asked.hosts == 0, let authority { asked.read("host", authority) }
        guard method == "GET", let path, asked.hosts == 1, asked.plain else { return false }
        let generation = settings.serving.handle.generation
        // Every answer kept over TLS has its block (``ResponseCache/keep(_:for:generation:)`` writes it).
        guard let kept = cache.answer(for: asked.key(for: path), generation: generation), case .bytes(let body) = kept.body,
            let block = kept.http2Block
        else { return false }
        let empty = body.readableBytes == 0
        let fits = body.readableBytes <= min(peerInitialWindow, connectionSendWindow, peerMaxFrameSize)
        // A body written at once and smaller than a TLS record is copied on its way (``TLSWriteCoalescer``): it holds none
        // of the cache's buffers, and is not counted among the kept bytes in flight. Any other is.
        let counted = !empty && (!fits || body.readableBytes >= TLSWriteCoalescer.recordSize)
        guard !counted || gate.mayWriteKept(body.readableBytes) else { return false }
        let now = time(nil)
        if let served = settings.serving.policy.accessLog {
            var record = ServedRequest(
                client: context.channel.remoteAddress?.ipAddress, method: "GET", target: path, status: kept.status, contentLength: kept.contentLength,
                source: kept.source)
            record.version = HTTPVersion.http2.description
            served(record)
        }
        // The HEADERS frame (the kept block, then this second's Date and the Age) and, when the body fits in one frame,
        // the DATA frame's header: one buffer, the body after it as the cache keeps it.
        var out = context.channel.allocator.buffer(capacity: block.readableBytes + 96)
        let dateValue = self.date.value(at: now)
        writeHeaders(id, endStream: empty, into: &out) { out in
            out.writeImmutableBuffer(block)
            HPACKLiterals.write(nameIndex: HPACKLiterals.dateIndex, value: dateValue, into: &out)
            if let age = kept.age(at: now) { HPACKLiterals.write(nameIndex: HPACKLiterals.ageIndex, value: String(age), into: &out) }
        }
        if fits, !empty {
            HTTP2Wire.writeHeader(length: body.readableBytes, type: HTTP2Wire.FrameType.data, flags: HTTP2Wire.Flag.endStream, stream: id, into: &out)
            connectionSendWindow -= body.readableBytes
        }
        write(out, context: context)
        guard !empty else { return true }
        var written: EventLoopPromise<Void>?
        if counted {
            written = context.eventLoop.makePromise(of: Void.self)
            gate.holdKept(body.readableBytes, until: written!.futureResult)
        }
        if fits {
            context.write(wrapOutboundOut(.byteBuffer(body)), promise: written)
        } else {
            // As the client's windows take it.
            var stream = Stream(requestEnded: true, onChannel: false, sendWindow: peerInitialWindow, receiveWindow: 0)
            stream.pending.append(.data(body, endStream: true, promise: written))
            streams[id] = stream
            sendPending(id, context: context)
        }
        unflushed = true
        return true
    }
}
