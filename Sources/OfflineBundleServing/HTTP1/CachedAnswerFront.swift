import Foundation
import NIOCore
import OfflineBundle

/// The front of an HTTP/1.1 connection: a plain GET whose whole answer the response cache keeps is answered from the
/// bytes it came in, without NIO's decoder, its request head and header objects; every other request goes on to the
/// decoder and ``BundleChannelHandler``, whole, in order.
///
/// A request is answered here only when the handler behind has nothing in hand (no answer going out, none waiting), so
/// answers keep the order of the requests; and only when ``PlainRequestHead`` reads it, a grammar narrower than the
/// decoder's, so the two never read the same bytes differently. After a request with a body, an upgrade, or bytes that
/// grammar does not read, the connection's bytes all go to the decoder: it alone knows where such a request ends.
/// Answers are the handler's own (``BundleChannelHandler/answerKept(_:target:)``): the same head, Date, access-log
/// record and metrics as a kept answer given behind the decoder.
final class CachedAnswerFront: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let answers: BundleChannelHandler
    private let cache: ResponseCache
    private let handle: LoaderHandle
    /// The start of a head whose end has not come yet.
    private var held: ByteBuffer?
    /// The bytes of `held` known to hold no blank line.
    private var searched = 0
    /// The decoder reads every byte from here on.
    private var handingOn = false
    /// Bytes went on to the decoder since the last end of a read.
    private var handedOn = false

    init(answers: BundleChannelHandler, cache: ResponseCache, handle: LoaderHandle) {
        self.answers = answers
        self.cache = cache
        self.handle = handle
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !handingOn else { return context.fireChannelRead(data) }
        var bytes = unwrapInboundIn(data)
        if var earlier = held {
            held = nil
            earlier.writeBuffer(&bytes)
            bytes = earlier
        }
        while bytes.readableBytes > 0 {
            let reading = bytes.withUnsafeReadableBytes { PlainRequestHead.read($0, searched: searched) }
            switch reading {
            case .incomplete:
                searched = bytes.readableBytes
                held = bytes
                return
            case .other:
                handingOn = true
                searched = 0
                handedOn = true
                return context.fireChannelRead(wrapInboundOut(bytes))
            case .request(let head):
                searched = 0
                if head.answerable, answers.answersNext(on: context.channel), let found = kept(head, in: bytes) {
                    bytes.moveReaderIndex(forwardBy: head.length)
                    switch found {
                    case .wire(let wire, let after): answers.sendWire(wire, after: after)
                    case .answer(let answer, let target): answers.answerKept(answer, target: target)
                    }
                } else {
                    handedOn = true
                    context.fireChannelRead(wrapInboundOut(bytes.readSlice(length: head.length)!))
                }
            }
        }
    }

    /// What the cache keeps for `head`: the bytes to send, when nothing is told of answers (no access log, no metrics);
    /// else the answer and the target, for the record the handler makes of it.
    private enum Kept {
        case wire(ByteBuffer, after: ByteBuffer?)
        case answer(ResponseCache.Answer, target: String)
    }

    /// The kept answer to `head`, when the cache has one for the bundle mounted now.
    private func kept(_ head: PlainRequestHead, in bytes: ByteBuffer) -> Kept? {
        let key = bytes.withUnsafeReadableBytes { raw in
            ResponseCache.Key(
                host: head.host.map { String(decoding: raw[$0], as: UTF8.self) }, target: String(decoding: raw[head.target], as: UTF8.self),
                acceptEncoding: head.acceptEncoding.map { String(decoding: raw[$0], as: UTF8.self) })
        }
        let generation = handle.generation
        if !answers.tellsOfAnswers, let (wire, after) = cache.http1Wire(for: key, generation: generation, now: time(nil)) {
            return .wire(wire, after: after)
        }
        guard let answer = cache.answer(for: key, generation: generation), answer.body.stillThere else { return nil }
        return .answer(answer, target: key.target)
    }

    /// The end of a read: when every request of it was answered here, the handler's own end of a read (its flush) is
    /// called at once, not through the decoder, which has nothing to do with it; else it goes down the pipeline.
    func channelReadComplete(context: ChannelHandlerContext) {
        guard !handingOn, !handedOn, let own = answers.ownContext else {
            handedOn = false
            return context.fireChannelReadComplete()
        }
        answers.channelReadComplete(context: own)
    }

    /// The end of the input, or a graceful shutdown: the start of a head held goes to the decoder (which answers it or
    /// refuses it as it would have), and so does everything after.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if (event as? ChannelEvent) == .inputClosed || event is ChannelShouldQuiesceEvent {
            handingOn = true
            if let held {
                self.held = nil
                context.fireChannelRead(wrapInboundOut(held))
            }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
