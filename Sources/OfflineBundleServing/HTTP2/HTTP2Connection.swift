// The connection's state and its reading of frames: the preface and settings, streams opened, their DATA and windows,
// resets, the limits on what a client sends, the ends. Answers from the cache are in HTTP2Connection+Answer.swift,
// writing in HTTP2Connection+Write.swift.
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

    // MARK: Reading frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        enter()
        defer { leave(context: context) }
        var bytes = unwrapInboundIn(data)
        if var held = inbound {
            inbound = nil
            held.writeBuffer(&bytes)
            bytes = held
        }
        do {
            try read(&bytes, context: context)
        } catch let error as ConnectionError {
            return fail(error.code, context: context)
        } catch {
            return fail(.internalError, context: context)
        }
        if bytes.readableBytes > 0, !closing {
            // Only the start of a frame is held, not the bytes before it.
            bytes.discardReadBytes()
            inbound = bytes
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func read(_ bytes: inout ByteBuffer, context: ChannelHandlerContext) throws {
        if !prefaceRead {
            guard bytes.readableBytes >= HTTP2Wire.preface.count else {
                if !HTTP2Wire.preface.starts(with: bytes.readableBytesView) { throw ConnectionError(code: .protocolError) }
                return
            }
            guard bytes.readBytes(length: HTTP2Wire.preface.count) == HTTP2Wire.preface else { throw ConnectionError(code: .protocolError) }
            prefaceRead = true
        }
        while !closing, let header = HTTP2Wire.header(at: bytes) {
            // We never raise SETTINGS_MAX_FRAME_SIZE above its default (RFC 9113 §4.2).
            guard header.length <= HTTP2Wire.defaultMaxFrameSize else { throw ConnectionError(code: .frameSizeError) }
            guard bytes.readableBytes >= 9 + header.length else { return }
            bytes.moveReaderIndex(forwardBy: 9)
            let payload = bytes.readSlice(length: header.length)!
            // The first frame is SETTINGS (RFC 9113 §3.4).
            if !settingsRead {
                guard header.type == HTTP2Wire.FrameType.settings, !header.has(HTTP2Wire.Flag.ack) else { throw ConnectionError(code: .protocolError) }
                settingsRead = true
            }
            if let open = block, header.type != HTTP2Wire.FrameType.continuation || header.stream != open.stream {
                throw ConnectionError(code: .protocolError)
            }
            try frame(header, payload, context: context)
            drainEvents(context: context)
        }
    }

    func frame(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws {
        var payload = payload
        switch header.type {
        case HTTP2Wire.FrameType.data: try data(header, payload, context: context)
        case HTTP2Wire.FrameType.headers:
            guard header.stream != 0, header.stream & 1 == 1 else { throw ConnectionError(code: .protocolError) }
            try unpad(header, &payload)
            var dependsOnItself = false
            if header.has(HTTP2Wire.Flag.priority) {
                guard let dependency = payload.readInteger(as: UInt32.self), payload.readInteger(as: UInt8.self) != nil else {
                    throw ConnectionError(code: .frameSizeError)
                }
                dependsOnItself = dependency & 0x7fff_ffff == header.stream
            }
            let open = OpenBlock(stream: header.stream, endStream: header.has(HTTP2Wire.Flag.endStream), fragment: payload, dependsOnItself: dependsOnItself)
            if header.has(HTTP2Wire.Flag.endHeaders) {
                try headers(open, context: context)
            } else {
                block = open
            }
        case HTTP2Wire.FrameType.continuation:
            guard var open = block else { throw ConnectionError(code: .protocolError) }
            open.continuations += 1
            // A block no decoded list could fit, or a flood of tiny frames (CVE-2024-27316's kind).
            guard open.continuations <= limits.maxContinuations, open.fragment.readableBytes + payload.readableBytes <= limits.maxHeaderListSize
            else { throw ConnectionError(code: .enhanceYourCalm) }
            open.fragment.writeImmutableBuffer(payload)
            if header.has(HTTP2Wire.Flag.endHeaders) {
                block = nil
                try headers(open, context: context)
            } else {
                block = open
            }
        case HTTP2Wire.FrameType.priority:
            guard header.stream != 0 else { throw ConnectionError(code: .protocolError) }
            try countControlFrame()
            // A stream error on a stream that was opened; on one that never was, RST_STREAM may not go (§6.4).
            let idle = header.stream > lastStream
            guard header.length == 5 else {
                if idle { throw ConnectionError(code: .frameSizeError) }
                return streamError(header.stream, .frameSizeError, context: context)
            }
            if payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff == header.stream {
                if idle { throw ConnectionError(code: .protocolError) }
                streamError(header.stream, .protocolError, context: context)
            }
        case HTTP2Wire.FrameType.rstStream:
            guard header.stream != 0, header.stream <= lastStream else { throw ConnectionError(code: .protocolError) }
            guard header.length == 4 else { throw ConnectionError(code: .frameSizeError) }
            try countReset()
            let code = payload.readInteger(as: UInt32.self)!
            if let stream = remove(header.stream) {
                fail(stream.pending)
                if stream.onChannel {
                    fire(StreamClosedEvent(streamID: HTTP2StreamID(Int(header.stream)), reason: HTTP2ErrorCode(networkCode: Int(code))))
                }
            }
            closeIfDone(context: context)
        case HTTP2Wire.FrameType.settings: try settingsFrame(header, payload, context: context)
        case HTTP2Wire.FrameType.pushPromise: throw ConnectionError(code: .protocolError)
        case HTTP2Wire.FrameType.ping:
            guard header.stream == 0 else { throw ConnectionError(code: .protocolError) }
            guard header.length == 8 else { throw ConnectionError(code: .frameSizeError) }
            try countControlFrame()
            guard !header.has(HTTP2Wire.Flag.ack) else { return }
            var out = context.channel.allocator.buffer(capacity: 17)
            HTTP2Wire.writePingAck(payload.readInteger(as: UInt64.self)!, into: &out)
            try writeControl(out, context: context)
        case HTTP2Wire.FrameType.goAway:
            guard header.stream == 0 else { throw ConnectionError(code: .protocolError) }
            guard header.length >= 8 else { throw ConnectionError(code: .frameSizeError) }
            peerGoingAway = true
            closeIfDone(context: context)
        case HTTP2Wire.FrameType.windowUpdate: try windowUpdate(header, payload, context: context)
        default:
            // Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            break
        }
    }

    /// Strips a PADDED frame's padding (RFC 9113 §6.1, §6.2).
    func unpad(_ header: HTTP2Wire.FrameHeader, _ payload: inout ByteBuffer) throws {
        guard header.has(HTTP2Wire.Flag.padded) else { return }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw ConnectionError(code: .protocolError)
        }
        payload = payload.readSlice(length: payload.readableBytes - Int(padding))!
    }

    func headers(_ open: OpenBlock, context: ChannelHandlerContext) throws {
        emptyDataFrames = 0
        var fragment = open.fragment
        // Every block is decoded, whatever becomes of its stream: the client's encoder and this decoder share a table.
        let fields: HPACKHeaders
        do {
            fields = try decoder.decodeHeaders(from: &fragment)
        } catch {
            throw ConnectionError(code: .compressionError)
        }
        let id = open.stream
        if id > lastStream {
            lastStream = id
            // After a GOAWAY, streams it did not let through are not read (RFC 9113 §6.8).
            if let goAwayStream, id > goAwayStream { return }
            if peerGoingAway { return refuse(id, context: context) }
            if open.dependsOnItself { return streamError(id, .protocolError, context: context) }
            guard case .wellFormed(let contentLength) = HTTP2RequestCheck.request(fields), !open.endStream || (contentLength ?? 0) == 0 else {
                return streamError(id, .protocolError, context: context)
            }
            guard streams.count < limits.maxConcurrentStreams else { return streamError(id, .refusedStream, context: context) }
            if open.endStream, answer(id, fields, context: context) { return }
            streams[id] = Stream(
                requestEnded: open.endStream, onChannel: true, sendWindow: peerInitialWindow, receiveWindow: HTTP2Wire.defaultWindow,
                expectedLength: contentLength)
            let stream = HTTP2StreamID(Int(id))
            fire(
                NIOHTTP2StreamCreatedEvent(
                    streamID: stream, localInitialWindowSize: UInt32(HTTP2Wire.defaultWindow), remoteInitialWindowSize: UInt32(peerInitialWindow)))
            context.fireChannelRead(wrapInboundOut(HTTP2Frame(streamID: stream, payload: .headers(.init(headers: fields, endStream: open.endStream)))))
            return
        }
        guard var stream = streams[id], stream.onChannel else {
            // A block on a stream a GOAWAY sent did not let through is ignored, as is one the client sent before it
            // knew of a reset. One on a stream whose request ended and whose
            // answer goes out is a stream error (half-closed, RFC 9113 §5.1); on any other lower stream (closed, or
            // never opened: a client's streams open in increasing order, §5.1.1), a connection error.
            if recentlyReset.contains(id) { return }
            if let goAwayStream, id > goAwayStream { return }
            guard streams[id] != nil else { throw ConnectionError(code: .protocolError) }
            return streamError(id, .streamClosed, context: context)
        }
        // Trailers: they end the request, and hold no pseudo-field.
        guard !stream.requestEnded else { return streamError(id, .streamClosed, context: context) }
        guard open.endStream, HTTP2RequestCheck.trailers(fields), stream.expectedLength.map({ $0 == stream.received }) ?? true else {
            return streamError(id, .protocolError, context: context)
        }
        stream.requestEnded = true
        streams[id] = stream
        context.fireChannelRead(wrapInboundOut(HTTP2Frame(streamID: HTTP2StreamID(Int(id)), payload: .headers(.init(headers: fields, endStream: true)))))
        closeIfEnded(id, context: context)
    }

    func data(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws {
        guard header.stream & 1 == 1, header.stream <= lastStream else { throw ConnectionError(code: .protocolError) }
        // The connection's window counts the whole payload, padding too, whatever becomes of the stream (§6.9.1).
        connectionReceiveWindow -= header.length
        guard connectionReceiveWindow >= 0 else { throw ConnectionError(code: .flowControlError) }
        connectionConsumed += header.length
        if connectionConsumed >= HTTP2Wire.defaultWindow / 2 {
            var out = context.channel.allocator.buffer(capacity: 13)
            HTTP2Wire.writeWindowUpdate(0, increment: connectionConsumed, into: &out)
            connectionReceiveWindow += connectionConsumed
            connectionConsumed = 0
            write(out, context: context)
        }
        var payload = payload
        try unpad(header, &payload)
        let end = header.has(HTTP2Wire.Flag.endStream)
        if payload.readableBytes == 0 && !end {
            emptyDataFrames += 1
            guard emptyDataFrames <= limits.maxEmptyDataFrames else { throw ConnectionError(code: .enhanceYourCalm) }
        } else {
            emptyDataFrames = 0
        }
        if let goAwayStream, header.stream > goAwayStream { return }
        guard var stream = streams[header.stream], stream.onChannel, !stream.requestEnded else {
            if streams[header.stream] == nil, recentlyReset.contains(header.stream) { return }
            return streamError(header.stream, .streamClosed, context: context)
        }
        stream.receiveWindow -= header.length
        guard stream.receiveWindow >= 0 else { return streamError(header.stream, .flowControlError, context: context) }
        stream.received += payload.readableBytes
        if let expected = stream.expectedLength, stream.received > expected || (end && stream.received != expected) {
            return streamError(header.stream, .protocolError, context: context)
        }
        stream.requestEnded = end
        streams[header.stream] = stream
        let id = HTTP2StreamID(Int(header.stream))
        context.fireChannelRead(wrapInboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(payload), endStream: end)))))
        // The stream channel gives the window back as it reads (toward the multiplexer's target, this initial window).
        if !end { fire(NIOHTTP2WindowUpdatedEvent(streamID: id, inboundWindowSize: stream.receiveWindow, outboundWindowSize: nil)) }
        if end { closeIfEnded(header.stream, context: context) }
    }

    func settingsFrame(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws {
        guard header.stream == 0 else { throw ConnectionError(code: .protocolError) }
        try countControlFrame()
        if header.has(HTTP2Wire.Flag.ack) {
            guard header.length == 0 else { throw ConnectionError(code: .frameSizeError) }
            return
        }
        guard header.length % 6 == 0 else { throw ConnectionError(code: .frameSizeError) }
        var payload = payload
        var windowDelta = 0
        while let id = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch id {
            case HTTP2Wire.Setting.headerTableSize: tableSizeUpdate = true
            case HTTP2Wire.Setting.enablePush: guard value <= 1 else { throw ConnectionError(code: .protocolError) }
            case HTTP2Wire.Setting.initialWindowSize:
                guard value <= UInt32(HTTP2Wire.maxWindow) else { throw ConnectionError(code: .flowControlError) }
                windowDelta += Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
            case HTTP2Wire.Setting.maxFrameSize:
                guard value >= UInt32(HTTP2Wire.defaultMaxFrameSize), value <= 0xff_ffff else { throw ConnectionError(code: .protocolError) }
                peerMaxFrameSize = Int(value)
            default: continue
            }
        }
        var out = context.channel.allocator.buffer(capacity: 9)
        HTTP2Wire.writeSettingsAck(into: &out)
        try writeControl(out, context: context)
        guard windowDelta != 0 else { return }
        // A new initial window moves every stream's window by the difference (RFC 9113 §6.9.2); one may go below zero.
        for id in Array(streams.keys) {
            streams[id]!.sendWindow += windowDelta
            guard streams[id]!.sendWindow <= HTTP2Wire.maxWindow else { throw ConnectionError(code: .flowControlError) }
        }
        if windowDelta > 0 { for id in Array(streams.keys) { sendPending(id, context: context) } }
    }

    func windowUpdate(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws {
        guard header.length == 4 else { throw ConnectionError(code: .frameSizeError) }
        let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7fff_ffff)
        if header.stream == 0 {
            guard increment > 0 else { throw ConnectionError(code: .protocolError) }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maxWindow else { throw ConnectionError(code: .flowControlError) }
            unblock(context: context)
            return
        }
        guard header.stream <= lastStream else { throw ConnectionError(code: .protocolError) }
        guard var stream = streams[header.stream] else { return }
        guard increment > 0 else { return streamError(header.stream, .protocolError, context: context) }
        stream.sendWindow += increment
        guard stream.sendWindow <= HTTP2Wire.maxWindow else { return streamError(header.stream, .flowControlError, context: context) }
        streams[header.stream] = stream
        sendPending(header.stream, context: context)
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
    func countReset() throws {
        guard resets.add(limit: limits.resets, window: limits.rateWindow) else { throw ConnectionError(code: .enhanceYourCalm) }
    }

    /// One more PING, SETTINGS or PRIORITY frame: each costs an answer or work for nothing (CVE-2019-9512, -9515, -9513).
    func countControlFrame() throws {
        guard controlFrames.add(limit: limits.controlFrames, window: limits.rateWindow) else { throw ConnectionError(code: .enhanceYourCalm) }
    }

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
