import NIOCore

/// Closes the connection on the idle event of the `IdleStateHandler` before it.
final class CloseWhenIdle: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The client closed its side (connections allow half-closure for HTTP/1.1's sake): nothing more can come
            // on an HTTP/2 connection, which would otherwise stay half open until the idle timeout.
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
