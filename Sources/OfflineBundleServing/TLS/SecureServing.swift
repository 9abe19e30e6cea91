import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import OfflineBundle

/// HTTPS for the channel server: TLS in front of the same answer step, HTTP/1.1 or HTTP/2 as the client's ALPN offer
/// says.
///
/// Over HTTP/1.1 the pipeline is the plain one behind `NIOSSLServerHandler`; the handler then sends no span of the
/// bundle file with `sendfile` (which cannot go through TLS), but reads bodies in chunks. Over HTTP/2 each stream runs the
/// same handler behind ``HTTP2StreamCodec``, which turns the stream's frames into request parts and its response bytes
/// into frames, so both protocols answer from one answer step, one response cache and one set of checks. The
/// connection's frames are read and written by ``HTTP2Connection``, which answers what that cache holds without a
/// stream. Both protocols write through ``TLSWriteCoalescer``.
enum SecureServing {
    /// How many streams of one HTTP/2 connection read and send a large body at once (``BodyGate``).
    static let largeBodiesPerConnection = 2

    /// Adds TLS and the protocol the client chose by ALPN to a new connection. A connection whose handshake has not
    /// ended within `idleTimeout` is closed, as is an HTTP/2 connection that neither sends anything nor takes any of its
    /// answers' bytes for that long.
    static func configure(
        _ channel: any Channel, context: NIOSSLContext, settings: BundleChannelHandler.Settings, cache: ResponseCache?
    ) -> EventLoopFuture<Void> {
        do {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        var unchecked = settings
        unchecked.idleCheck = false
        let streamSettings = unchecked
        let handshake = channel.eventLoop.scheduleTask(in: settings.idleTimeout) { channel.close(promise: nil) }
        // A connection that ends before its handshake does (a scanner, a failed handshake) is not held by the timer.
        channel.closeFuture.whenComplete { _ in handshake.cancel() }
        return channel.configureHTTP2SecureUpgrade(
            h2ChannelConfigurator: { channel in
                handshake.cancel()
                // A stream stalls after a thirtieth of the idle period without progress (2 s of the default 60 s).
                let gate = BodyGate(
                    limit: SecureServing.largeBodiesPerConnection, stallPeriod: .nanoseconds(max(settings.idleTimeout.nanoseconds / 30, 100_000_000)),
                    loop: channel.eventLoop)
                do {
                    try channel.pipeline.syncOperations.addHandler(TLSWriteCoalescer())
                    // Idle when the client sent nothing and nothing went out: a client that reads a long answer slowly
                    // (its window large enough not to send updates) lets the next chunk be written, one that stopped
                    // reading does not.
                    try channel.pipeline.syncOperations.addHandler(CloseWhenIdle(period: settings.idleTimeout))
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
                let streams: NIOChannelInitializer = { stream in
                    stream.eventLoop.makeCompletedFuture {
                        let sync = stream.pipeline.syncOperations
                        try sync.addHandler(HTTP2StreamCodec())
                        try sync.addHandler(BundleChannelHandler(streamSettings, cache: cache, gate: gate))
                    }
                }
                // The connection's frames are read and written by ``HTTP2Connection``, which answers what the cache holds
                // itself; the other requests go on to stream channels made by NIO's multiplexer behind it.
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(HTTP2Connection(settings: settings, cache: cache, gate: gate))
                    try sync.addHandler(HTTP2StreamMultiplexer(mode: .server, channel: channel, inboundStreamInitializer: streams))
                }
            },
            http1ChannelConfigurator: { channel in
                handshake.cancel()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(TLSWriteCoalescer())
                    try BundleChannelHandler.addHTTP1(to: channel, settings: settings, cache: cache)
                }
            })
    }
}
