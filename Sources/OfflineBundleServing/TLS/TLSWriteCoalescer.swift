import NIOCore
import NIOSSL

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
