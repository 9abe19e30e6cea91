import NIOCore
import NIOEmbedded
import Testing

@testable import OfflineBundleServing

/// A count the embedded channel's callbacks change (they run on the test's thread).
private final class Count: @unchecked Sendable {
    var value = 0
}

@Suite("TLSWriteCoalescer: the small writes between two flushes go to TLS as one record's worth")
struct TLSWriteCoalescerTests {
    /// The writes that reached the channel's end, as byte strings, in order.
    func written(_ channel: EmbeddedChannel) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        while let part = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let bytes) = part else { continue }
            out.append(Array(bytes.readableBytesView))
        }
        return out
    }

    @Test("small writes are joined until the flush, in order; their promises complete with the joined write")
    func joinsSmallWrites() throws {
        let channel = EmbeddedChannel(handler: TLSWriteCoalescer())
        let completed = Count()
        for part in [[1, 2, 3], [4], [5, 6]] as [[UInt8]] {
            let promise = channel.eventLoop.makePromise(of: Void.self)
            promise.futureResult.whenSuccess { completed.value += 1 }
            channel.write(IOData.byteBuffer(ByteBuffer(bytes: part)), promise: promise)
        }
        #expect(try written(channel).isEmpty, "nothing goes before the flush")
        channel.flush()
        #expect(try written(channel) == [[1, 2, 3, 4, 5, 6]])
        #expect(completed.value == 3)
        #expect(try channel.finish().isClean)
    }

    @Test("a write of a record's size or more goes on as it is, after what was joined before it; joined bytes never pass a record's size")
    func largeWritesPassThrough() throws {
        let channel = EmbeddedChannel(handler: TLSWriteCoalescer())
        let record = TLSWriteCoalescer.recordSize
        let large = [UInt8](repeating: 7, count: record + 10)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: [1, 2])), promise: nil)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: large)), promise: nil)
        let nearlyFull = [UInt8](repeating: 8, count: record - 1)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: nearlyFull)), promise: nil)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: [9, 9])), promise: nil)
        channel.flush()
        #expect(try written(channel) == [[1, 2], large, nearlyFull, [9, 9]])
        #expect(try channel.finish().isClean)
    }

    @Test(
        "past 64 KiB written without a flush, the writes are flushed: NIOSSL holds writes until a flush, where the channel's writability does not count them"
    )
    func flushesAsWritesPileUp() throws {
        let channel = EmbeddedChannel(handler: TLSWriteCoalescer())
        let part = [UInt8](repeating: 1, count: 20 << 10)
        for _ in 0..<3 { channel.write(IOData.byteBuffer(ByteBuffer(bytes: part)), promise: nil) }
        #expect(try written(channel).isEmpty, "60 KiB: not yet")
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: part)), promise: nil)
        #expect(try written(channel).count == 4, "80 KiB: flushed without being asked")
        for _ in 0..<2 { channel.write(IOData.byteBuffer(ByteBuffer(bytes: [2])), promise: nil) }
        #expect(try written(channel).isEmpty, "counted again from the flush")
        _ = try channel.finish()
    }

    @Test("writes joined and never flushed fail when the handler goes, as a closed channel's pending writes do")
    func unflushedWritesFailOnRemoval() throws {
        let channel = EmbeddedChannel(handler: TLSWriteCoalescer())
        let promise = channel.eventLoop.makePromise(of: Void.self)
        let failed = Count()
        promise.futureResult.whenFailure { _ in failed.value += 1 }
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: [1])), promise: promise)
        _ = try channel.finish()
        #expect(failed.value == 1)
    }

    @Test(
        "during the flush a write makes, 'unwritable' reaches the handlers behind at once and 'writable' only after that write returned: never between two writes of one answer"
    )
    func writableWaitsForTheWrite() throws {
        let seen = Seen()
        let channel = EmbeddedChannel()
        // Stands for the socket: its flush makes the channel unwritable and writable again, as NIO's does while it
        // writes (past the high water mark, then the kernel takes the bytes).
        try channel.pipeline.syncOperations.addHandler(FlushTogglesWritability(channel: channel))
        try channel.pipeline.syncOperations.addHandler(TLSWriteCoalescer())
        try channel.pipeline.syncOperations.addHandler(WritabilityRecorder(seen: seen))
        let part = [UInt8](repeating: 1, count: 40 << 10)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: part)), promise: nil)
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: part)), promise: nil)
        #expect(try written(channel).count == 2, "flushed past 64 KiB")
        #expect(seen.told == [false], "unwritable at once, writable not inside the write")
        channel.embeddedEventLoop.run()
        #expect(seen.told == [false, true], "writable once the write returned")
        // Flushed by the handler behind it (not inside a write): both pass at once.
        channel.write(IOData.byteBuffer(ByteBuffer(bytes: [1])), promise: nil)
        channel.flush()
        #expect(seen.told == [false, true, false, true])
        #expect(try written(channel) == [[1]])
        #expect(try channel.finish().isClean)
    }
}

/// Makes the channel unwritable and writable again whenever it is flushed, telling the pipeline each time.
private final class FlushTogglesWritability: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    let channel: EmbeddedChannel

    init(channel: EmbeddedChannel) { self.channel = channel }

    func flush(context: ChannelHandlerContext) {
        context.flush()
        for writable in [false, true] {
            channel.isWritable = writable
            context.fireChannelWritabilityChanged()
        }
    }
}

/// What the channel's writability was at each change that reached it.
private final class Seen: @unchecked Sendable {
    var told: [Bool] = []
}

/// Records the writability changes that reach it.
private final class WritabilityRecorder: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    let seen: Seen

    init(seen: Seen) { self.seen = seen }

    func channelWritabilityChanged(context: ChannelHandlerContext) { seen.told.append(context.channel.isWritable) }
}
