// The connection's state: its streams, windows and limits, its start and end, the order of its own work, and the
// streams' ends and errors. Reading frames is in HTTP2Connection+Read.swift, answers from the cache in
// HTTP2Connection+Answer.swift, writing in HTTP2Connection+Write.swift.
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import OfflineBundle

/// An HTTP/2 connection of the channel server over TLS, in place of NIO's `NIOHTTP2Handler`: it reads the frames off
/// the bytes, decodes header blocks (NIOHPACK's decoder), keeps the streams' states and both sides' flow-control
/// windows, and answers on the connection itself, without a stream channel, what the response cache holds: a GET whose
/// HEADERS frame ends its stream, with one Host (or `:authority`), no Range or conditional field and one
/// Accept-Encoding at most, found under the key ``BundleChannelHandler`` keeps it by and the loader generation it was
/// filled from. Such an answer is a HEADERS frame whose block an encoder without a dynamic table wrote
/// (``HPACKLiterals``: the kept fields, Date and Age), DATA frames of the kept bytes as the client's windows take them,
/// and an access-log line as the handler writes one. Every other request goes on, as `HTTP2Frame`s with the events
/// NIO's handler sends (a stream's HEADERS, then its creation; its DATA, then its window; its close once both sides
/// ended or either reset it), to NIO's `HTTP2StreamMultiplexer` behind it, whose stream channels run
/// ``BundleChannelHandler``; what those write comes back here as frames to encode, DATA held until the windows take it.
///
/// What a client sends wrong is answered as RFC 9113 says: a stream error (RST_STREAM) or a connection error (GOAWAY,
/// then the connection closes). What a client may send to make a server work for nothing is bounded as NIO's handler
/// bounds it by default (``Limits``): streams reset by the client and PING, SETTINGS and PRIORITY frames, each per
/// window of time; stream errors over the connection's life; CONTINUATION frames after one HEADERS and the bytes of
/// one header block; empty DATA frames in a row; control frames answered while the client reads nothing. Past a
/// bound the connection ends with ENHANCE_YOUR_CALM.
final class HTTP2Connection: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = IOData

    /// What a client may do before the connection is closed.
    struct Limits {
        /// Streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS, as NIO's default settings).
        var maxConcurrentStreams = 100
        /// A request's decoded fields, in HPACK's count (SETTINGS_MAX_HEADER_LIST_SIZE).
        var maxHeaderListSize = HPACKDecoder.defaultMaxHeaderListSize
        /// CONTINUATION frames after one HEADERS frame.
        var maxContinuations = 5
        /// Empty DATA frames in a row that do not end their stream.
        var maxEmptyDataFrames = 1
        /// Streams the client resets, and PING, SETTINGS and PRIORITY frames it sends, each counted in windows of
        /// `rateWindow` (fixed windows: twice the count may pass across the end of one).
        var resets = 200
        var controlFrames = 200
        var rateWindow = TimeAmount.seconds(30)
        /// Stream errors the client causes over the connection's life, refusals past `maxConcurrentStreams` among them.
        var glitches = 200
        /// Control frames answered (PING, SETTINGS) while the connection is not writable.
        var bufferedControlFrames = 10_000
    }

    struct Stream {
        /// The client ended its side (END_STREAM received).
        var requestEnded: Bool
        /// END_STREAM went out.
        var responseEnded = false
        /// On a stream channel of the multiplexer (else answered here).
        var onChannel: Bool
        var sendWindow: Int
        var receiveWindow: Int
        /// What waits for the client's windows, in order.
        var pending = CircularBuffer<Pending>()
        /// The request's Content-Length, and the DATA bytes received.
        var expectedLength: Int?
        var received = 0
        /// A frame ending the answer was written or waits: nothing more may come after it.
        var endQueued = false
        /// In `blocked`.
        var isBlocked = false
    }

    enum Pending {
        case data(ByteBuffer, endStream: Bool, promise: EventLoopPromise<Void>?)
        case headers(HPACKHeaders, endStream: Bool, promise: EventLoopPromise<Void>?)
    }

    /// A header block begun and not yet ended (a HEADERS frame without END_HEADERS).
    struct OpenBlock {
        var stream: UInt32
        var endStream: Bool
        var fragment: ByteBuffer
        var continuations = 0
        var dependsOnItself: Bool
    }

    /// A stream channel's write made during the handler's own work: a frame to handle after it, or (a WINDOW_UPDATE,
    /// whose window is counted at once so that the next window told to the stream is right) the bytes to write.
    enum Deferred {
        case frame(HTTP2Frame, EventLoopPromise<Void>?)
        case bytes(ByteBuffer, EventLoopPromise<Void>?)
    }

    /// A connection error (RFC 9113 §5.4.1).
    struct ConnectionError: Error {
        var code: HTTP2ErrorCodeValue
    }

    let settings: BundleChannelHandler.Settings
    let cache: ResponseCache?
    let gate: BodyGate
    let limits: Limits

    var decoder: HPACKDecoder
    var inbound: ByteBuffer?
    var prefaceRead = false
    var settingsRead = false
    var block: OpenBlock?
    var streams: [UInt32: Stream] = [:]
    /// Streams with DATA waiting for the connection's window, in the order they began to wait.
    var blocked: [UInt32] = []
    /// The highest stream the client opened.
    var lastStream: UInt32 = 0
    /// The highest stream the GOAWAY sent lets through; nil until one went.
    var goAwayStream: UInt32?
    var peerGoingAway = false
    var closing = false

    var connectionSendWindow = HTTP2Wire.defaultWindow
    var connectionReceiveWindow = HTTP2Wire.defaultWindow
    /// Bytes received on the connection and not yet given back by a WINDOW_UPDATE.
    var connectionConsumed = 0
    var peerInitialWindow = HTTP2Wire.defaultWindow
    var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    /// The next header block sent starts with a dynamic table size update to 0.
    var tableSizeUpdate = true

    /// The last streams this side reset: frames the client sent on them before it knew are ignored (RFC 9113 §5.4.2).
    var recentlyReset = CircularBuffer<UInt32>(initialCapacity: 32)
    var emptyDataFrames = 0
    var resets = RateCount()
    var controlFrames = RateCount()
    var glitches = 0
    var controlWhileUnwritable = 0

    var unflushed = false
    /// How deep the handler is in its own work: frames the stream channels write meanwhile (a write's promise completed
    /// inside a write below, whose callback closes a stream) wait in `deferred`, so that nothing comes between the two
    /// writes of one frame, nor changes a stream the work holds a copy of.
    var depth = 0
    var deferred = CircularBuffer<Deferred>()
    var flushDeferred = false
    /// The channel asked for a read while it was not writable: it is read once it is.
    var readHeld = false
    var date = DateField()
    /// Events for the multiplexer, fired in order once the frame that caused them went on (as NIO's handler orders
    /// them: a stream's HEADERS, then its creation, then its close).
    var events = CircularBuffer<any Sendable>()

    init(settings: BundleChannelHandler.Settings, cache: ResponseCache?, gate: BodyGate, limits: Limits = Limits()) {
        self.settings = settings
        self.cache = cache
        self.gate = gate
        self.limits = limits
        decoder = HPACKDecoder(
            allocator: ByteBufferAllocator(), maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize, maxHeaderListSize: limits.maxHeaderListSize)
    }

    // MARK: The connection's start and end

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendSettings(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendSettings(context: context)
        context.fireChannelActive()
    }

    /// The start of the handler's own work (see `depth`).
    func enter() { depth += 1 }

    /// Its end: the outermost one writes what the stream channels wrote meanwhile, in order, and flushes if one asked.
    func leave(context: ChannelHandlerContext) {
        guard depth == 1 else {
            depth -= 1
            return
        }
        // Events fired here may make the streams write more: until nothing is left.
        repeat {
            while let next = deferred.popFirst() {
                switch next {
                case .frame(let frame, let promise): handle(frame, promise: promise, context: context)
                case .bytes(let bytes, let promise): context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
                }
            }
            drainEvents(context: context)
        } while !deferred.isEmpty
        depth = 0
        if flushDeferred {
            flushDeferred = false
            unflushed = false
            context.flush()
        }
    }

    var settingsSent = false

    func sendSettings(context: ChannelHandlerContext) {
        guard !settingsSent else { return }
        settingsSent = true
        var out = context.channel.allocator.buffer(capacity: 32)
        HTTP2Wire.writeSettings(
            [
                (HTTP2Wire.Setting.maxConcurrentStreams, UInt32(limits.maxConcurrentStreams)),
                (HTTP2Wire.Setting.maxHeaderListSize, UInt32(limits.maxHeaderListSize)),
            ],
            into: &out)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(out)), promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        dropStreams()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { dropStreams() }

    /// The connection ended: what waits to be sent never will be.
    func dropStreams() {
        closing = true
        for (_, stream) in streams { fail(stream.pending) }
        streams.removeAll()
        while let next = deferred.popFirst() {
            switch next {
            case .frame(_, let promise), .bytes(_, let promise): promise?.fail(ChannelError.ioOnClosedChannel)
            }
        }
        blocked.removeAll()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        enter()
        defer { leave(context: context) }
        if event is ChannelShouldQuiesceEvent, goAwayStream == nil, !closing {
            // A graceful end: the streams open go on, no new one is read, and the connection closes once they end.
            goAwayStream = lastStream
            var out = context.channel.allocator.buffer(capacity: 17)
            HTTP2Wire.writeGoAway(lastStream: lastStream, code: .noError, into: &out)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(out)), promise: nil)
            closeIfDone(context: context)
        }
        drainEvents(context: context)
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            enter()
            controlWhileUnwritable = 0
            // What waited for the socket to take bytes goes on.
            unblock(context: context)
            if unflushed { flushDeferred = true }
            leave(context: context)
            if readHeld {
                readHeld = false
                context.read()
            }
        }
        context.fireChannelWritabilityChanged()
    }

    /// Nothing more is read while the channel is not writable (a client that sends and does not read): what it sent is
    /// answered once the socket takes bytes again.
    func read(context: ChannelHandlerContext) {
        guard context.channel.isWritable else {
            readHeld = true
            return
        }
        context.read()
    }

    /// Sends what waited on the streams in `blocked`, as far as the windows let it.
    func unblock(context: ChannelHandlerContext) {
        let waiting = blocked
        blocked.removeAll()
        for id in waiting {
            streams[id]?.isBlocked = false
            sendPending(id, context: context)
        }
    }

    /// Removes a stream, and its place among the blocked ones.
    @discardableResult
    func remove(_ id: UInt32) -> Stream? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        if stream.isBlocked { blocked.removeAll { $0 == id } }
        return stream
    }

    func fire(_ event: any Sendable) { events.append(event) }

    func drainEvents(context: ChannelHandlerContext) {
        while let event = events.popFirst() { context.fireUserInboundEventTriggered(event) }
    }

    /// Events counted in windows of a fixed length.
    struct RateCount {
        var count = 0
        var start = NIODeadline.now()

        /// One more; false past `limit` in the window.
        mutating func add(limit: Int, window: TimeAmount) -> Bool {
            let now = NIODeadline.now()
            if now - start > window { (count, start) = (0, now) }
            count += 1
            return count <= limit
        }
    }

    /// One more stream reset by the client; too many in the window is a connection error (Rapid Reset, CVE-2023-44487).
    // MARK: Streams' ends and errors

    /// A stream whose two sides ended is closed, and its channel told.
    func closeIfEnded(_ id: UInt32, context: ChannelHandlerContext) {
        guard let stream = streams[id], stream.requestEnded, stream.responseEnded, stream.pending.isEmpty else { return }
        remove(id)
        if stream.onChannel {
            fire(StreamClosedEvent(streamID: HTTP2StreamID(Int(id)), reason: nil))
        }
        closeIfDone(context: context)
    }

    /// After a GOAWAY either way, the connection closes once its last stream ended.
    func closeIfDone(context: ChannelHandlerContext) {
        guard goAwayStream != nil || peerGoingAway, streams.isEmpty, !closing else { return }
        closing = true
        // Once what was written went out (writes complete in order): the last answer is not cut. A client that takes
        // nothing more is closed after the idle period all the same.
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(ByteBuffer()))).whenComplete { _ in channel.close(promise: nil) }
        context.eventLoop.scheduleTask(in: settings.idleTimeout) { channel.close(promise: nil) }
    }

    /// A stream error (RFC 9113 §5.4.2): RST_STREAM, the stream closed; one more glitch of the client's.
    func streamError(_ id: UInt32, _ code: HTTP2ErrorCodeValue, context: ChannelHandlerContext) {
        glitches += 1
        guard glitches <= limits.glitches else { return fail(.enhanceYourCalm, context: context) }
        refuse(id, code: code, context: context)
    }

    /// RST_STREAM for a stream, which closes.
    func refuse(_ id: UInt32, code: HTTP2ErrorCodeValue = .refusedStream, context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: 13)
        HTTP2Wire.writeRstStream(id, code: code, into: &out)
        write(out, context: context)
        noteReset(id)
        if let stream = remove(id) {
            fail(stream.pending)
            if stream.onChannel {
                fire(StreamClosedEvent(streamID: HTTP2StreamID(Int(id)), reason: HTTP2ErrorCode(networkCode: Int(code.rawValue))))
            }
        }
        closeIfDone(context: context)
    }

    /// A connection error: GOAWAY with the last stream read, and the connection closes.
    func fail(_ code: HTTP2ErrorCodeValue, context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        inbound = nil
        var out = context.channel.allocator.buffer(capacity: 17)
        // Never above a GOAWAY sent before (RFC 9113 §6.8).
        HTTP2Wire.writeGoAway(lastStream: min(lastStream, goAwayStream ?? lastStream), code: code, into: &out)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(out)), promise: nil)
        context.close(promise: nil)
    }

    func noteReset(_ id: UInt32) {
        if recentlyReset.count == 32 { recentlyReset.removeFirst() }
        recentlyReset.append(id)
    }

    func fail(_ pending: CircularBuffer<Pending>) {
        for item in pending {
            switch item {
            case .data(_, _, let promise), .headers(_, _, let promise): promise?.fail(ChannelError.ioOnClosedChannel)
            }
        }
    }
}
