// How HTTP2Connection reads: the frames off the bytes, each checked as RFC 9113 says and bounded, header blocks decoded,
// requests answered from the cache or passed on to the streams with their DATA, windows and ends.
import NIOCore
import NIOHPACK
import NIOHTTP2

extension HTTP2Connection {
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

    func countReset() throws {
        guard resets.add(limit: limits.resets, window: limits.rateWindow) else { throw ConnectionError(code: .enhanceYourCalm) }
    }

    /// One more PING, SETTINGS or PRIORITY frame: each costs an answer or work for nothing (CVE-2019-9512, -9515, -9513).
    func countControlFrame() throws {
        guard controlFrames.add(limit: limits.controlFrames, window: limits.rateWindow) else { throw ConnectionError(code: .enhanceYourCalm) }
    }
}
