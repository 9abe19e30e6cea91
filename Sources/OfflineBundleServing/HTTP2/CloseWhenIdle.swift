import NIOCore

/// Closes an HTTP/2 connection that stays quiet for its idle period: nothing read from the client, nothing flushed to
/// it, and its channel not drained (writable again) at two checks half a period apart (``QuietWatch``). A client that
/// reads a long answer slowly lets the answer's next chunk be written and flushed, so it is not quiet; one that stopped
/// reading lets nothing through, and is. Counters instead of NIO's `IdleStateHandler`, which adds a promise and a
/// callback to every frame written (by perf, about a twentieth of the samples of an HTTP/2 connection answering small
/// pages).
/// The end of the client's side closes it too: nothing more can come on an HTTP/2 connection, which would otherwise
/// stay half open until the idle timeout.
final class CloseWhenIdle: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny

    private let period: TimeAmount
    private var activity = 0
    private var watch = QuietWatch()
    private var check: Scheduled<Void>?

    init(period: TimeAmount) { self.period = period }

    func handlerAdded(context: ChannelHandlerContext) { scheduleCheck(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
    }

    private func scheduleCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleTask(in: .nanoseconds(period.nanoseconds / 2)) {
            let (handler, context) = bound.value
            if handler.watch.check(activity: handler.activity) { return context.close(promise: nil) }
            handler.scheduleCheck(context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        activity &+= 1
        context.fireChannelRead(data)
    }

    func flush(context: ChannelHandlerContext) {
        activity &+= 1
        context.flush()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { activity &+= 1 }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
