// What HTTP2Connection writes: the stream channels' frames encoded, DATA held until the client's windows and the
// socket take it, header blocks as HEADERS and CONTINUATION frames.
import NIOCore
import NIOHPACK
import NIOHTTP2

extension HTTP2Connection {
    /// A HEADERS frame of the block `fill` writes, after the table size update owed (if any): one frame, or, past the
    /// client's frame size, HEADERS and CONTINUATION frames.
    func writeHeaders(_ id: UInt32, endStream: Bool, into out: inout ByteBuffer, _ fill: (inout ByteBuffer) -> Void) {
        let start = out.writerIndex
        let endFlag = endStream ? HTTP2Wire.Flag.endStream : 0
        HTTP2Wire.writeHeader(length: 0, type: HTTP2Wire.FrameType.headers, flags: HTTP2Wire.Flag.endHeaders | endFlag, stream: id, into: &out)
        if tableSizeUpdate {
            out.writeInteger(HPACKLiterals.tableSizeUpdateToZero)
            tableSizeUpdate = false
        }
        fill(&out)
        guard out.writerIndex - start - 9 > peerMaxFrameSize else { return HTTP2Wire.setLength(ofFrameAt: start, in: &out) }
        // A block larger than a frame (a head of many fields): written again as pieces.
        var block = out.getSlice(at: start + 9, length: out.writerIndex - start - 9)!
        out.moveWriterIndex(to: start)
        var first = true
        repeat {
            let piece = block.readSlice(length: min(block.readableBytes, peerMaxFrameSize))!
            let flags = (block.readableBytes == 0 ? HTTP2Wire.Flag.endHeaders : 0) | (first ? endFlag : 0)
            HTTP2Wire.writeHeader(
                length: piece.readableBytes, type: first ? HTTP2Wire.FrameType.headers : HTTP2Wire.FrameType.continuation, flags: flags, stream: id,
                into: &out)
            out.writeImmutableBuffer(piece)
            first = false
        } while block.readableBytes > 0
    }

    /// What a stream channel writes: at once, or after the handler's own work when it comes in the middle of it.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        guard depth == 0 else {
            if case .windowUpdate(let increment) = frame.payload {
                if let bytes = windowUpdate(frame.streamID, increment) { deferred.append(.bytes(bytes, promise)) } else { promise?.succeed() }
            } else {
                deferred.append(.frame(frame, promise))
            }
            return
        }
        enter()
        handle(frame, promise: promise, context: context)
        leave(context: context)
    }

    func handle(_ frame: HTTP2Frame, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        let id = UInt32(Int32(frame.streamID))
        switch frame.payload {
        case .headers(let headers):
            guard var stream = streams[id], !stream.endQueued else {
                promise?.fail(NIOHTTP2Errors.noSuchStream(streamID: frame.streamID))
                return
            }
            if headers.endStream { stream.endQueued = true }
            if !stream.pending.isEmpty {
                stream.pending.append(.headers(headers.headers, endStream: headers.endStream, promise: promise))
                streams[id] = stream
                return
            }
            streams[id] = stream
            sendHeaders(id, headers.headers, endStream: headers.endStream, promise: promise, context: context)
        case .data(let data):
            guard var stream = streams[id], !stream.endQueued, case .byteBuffer(let bytes) = data.data else {
                promise?.fail(NIOHTTP2Errors.noSuchStream(streamID: frame.streamID))
                return
            }
            stream.pending.append(.data(bytes, endStream: data.endStream, promise: promise))
            if data.endStream { stream.endQueued = true }
            streams[id] = stream
            sendPending(id, context: context)
        case .rstStream(let code):
            var out = context.channel.allocator.buffer(capacity: 13)
            HTTP2Wire.writeRstStream(id, code: HTTP2ErrorCodeValue(rawValue: UInt32(code.networkCode)), into: &out)
            context.write(wrapOutboundOut(.byteBuffer(out)), promise: promise)
            noteReset(id)
            if let stream = remove(id) {
                fail(stream.pending)
                if stream.onChannel { fire(StreamClosedEvent(streamID: frame.streamID, reason: code)) }
            }
            closeIfDone(context: context)
        case .windowUpdate(let increment):
            guard let bytes = windowUpdate(frame.streamID, increment) else {
                promise?.succeed()
                return
            }
            context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
        default:
            // PRIORITY and the rest: nothing a server's stream needs to send.
            promise?.succeed()
        }
    }

    /// Counts a WINDOW_UPDATE a stream channel gives, and tells the stream its window; its bytes, or nil when there is
    /// nothing to give (a stream gone or ended, a window past the largest). The connection's window is this handler's
    /// to give (as DATA comes): the multiplexer, never told it, writes none.
    func windowUpdate(_ stream: HTTP2StreamID, _ increment: Int) -> ByteBuffer? {
        let id = UInt32(Int32(stream))
        guard id != 0, var open = streams[id], !open.requestEnded, open.receiveWindow + increment <= HTTP2Wire.maxWindow else { return nil }
        open.receiveWindow += increment
        streams[id] = open
        fire(NIOHTTP2WindowUpdatedEvent(streamID: stream, inboundWindowSize: open.receiveWindow, outboundWindowSize: nil))
        var out = ByteBuffer()
        HTTP2Wire.writeWindowUpdate(id, increment: increment, into: &out)
        return out
    }

    func flush(context: ChannelHandlerContext) {
        guard depth == 0 else {
            flushDeferred = true
            return
        }
        unflushed = false
        context.flush()
    }

    func sendHeaders(_ id: UInt32, _ headers: HPACKHeaders, endStream: Bool, promise: EventLoopPromise<Void>?, context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: 256)
        writeHeaders(id, endStream: endStream, into: &out) { HPACKLiterals.write(headers, tableSizeUpdate: false, into: &$0) }
        context.write(wrapOutboundOut(.byteBuffer(out)), promise: promise)
        if endStream {
            streams[id]?.responseEnded = true
            closeIfEnded(id, context: context)
        }
    }

    /// Sends what waits on a stream as far as the windows let it.
    func sendPending(_ id: UInt32, context: ChannelHandlerContext) {
        guard var stream = streams[id] else { return }
        while let next = stream.pending.first {
            switch next {
            case .headers(let headers, let endStream, let promise):
                stream.pending.removeFirst()
                streams[id] = stream
                sendHeaders(id, headers, endStream: endStream, promise: promise, context: context)
                guard let after = streams[id] else { return }
                stream = after
            case .data(var bytes, let endStream, let promise):
                // Not while the socket takes nothing (NIO's handler holds DATA so too): on when it is writable again.
                guard context.channel.isWritable else {
                    block(id, &stream)
                    return
                }
                let room = min(stream.sendWindow, connectionSendWindow, peerMaxFrameSize)
                if bytes.readableBytes > 0 && room <= 0 {
                    // The connection's window opens for all (`blocked`), a stream's for itself (its WINDOW_UPDATE).
                    if connectionSendWindow <= 0 {
                        block(id, &stream)
                    } else {
                        streams[id] = stream
                    }
                    return
                }
                let piece = bytes.readSlice(length: max(0, min(room, bytes.readableBytes)))!
                let done = bytes.readableBytes == 0
                stream.sendWindow -= piece.readableBytes
                connectionSendWindow -= piece.readableBytes
                var head = context.channel.allocator.buffer(capacity: 9)
                HTTP2Wire.writeHeader(
                    length: piece.readableBytes, type: HTTP2Wire.FrameType.data, flags: done && endStream ? HTTP2Wire.Flag.endStream : 0, stream: id,
                    into: &head)
                write(head, context: context)
                if done {
                    stream.pending.removeFirst()
                    context.write(wrapOutboundOut(.byteBuffer(piece)), promise: promise)
                    if endStream {
                        stream.responseEnded = true
                        streams[id] = stream
                        closeIfEnded(id, context: context)
                        return
                    }
                } else {
                    stream.pending[stream.pending.startIndex] = .data(bytes, endStream: endStream, promise: promise)
                    context.write(wrapOutboundOut(.byteBuffer(piece)), promise: nil)
                }
                unflushed = true
            }
        }
        streams[id] = stream
    }

    /// Keeps `stream` waiting among the blocked ones.
    func block(_ id: UInt32, _ stream: inout Stream) {
        if !stream.isBlocked {
            stream.isBlocked = true
            blocked.append(id)
        }
        streams[id] = stream
    }

    func write(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: nil)
        unflushed = true
    }

    /// A frame the client's own frame asks for (PING and SETTINGS acknowledgements). A client that sends them and reads
    /// nothing makes them pile up: past the limit, the connection is closed.
    func writeControl(_ bytes: ByteBuffer, context: ChannelHandlerContext) throws {
        if !context.channel.isWritable {
            controlWhileUnwritable += 1
            guard controlWhileUnwritable <= limits.bufferedControlFrames else { throw ConnectionError(code: .enhanceYourCalm) }
        }
        write(bytes, context: context)
    }
}
