import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The only way out of the crawl's browser: an HTTP proxy on loopback that Chromium is started behind
/// (`--proxy-server`, loopback not bypassed), so every connection the browser opens, whatever made it (a page's fetch
/// the DevTools interception let through, a WebSocket, a pop-up, a shared or service worker, WebRTC over TCP), reaches
/// a host only when ``Decide`` allows its origin. DevTools' interception decides requests; this decides connections, so
/// what the interception never sees is still held to the scope and the address rules.
///
/// It speaks just what Chromium sends to an HTTP proxy:
/// - `CONNECT host:port` (HTTPS, and WebSockets of either scheme): allowed, a tunnel to the host; refused, a 403.
/// - A request in absolute form (`GET http://host:port/path`): allowed, sent on to the host in origin form with
///   `Connection: close`, its body (by `Content-Length`) after it, and the host's answer relayed until the host closes;
///   the client's connection then closes too, so one connection carries one request and each is decided.
///
/// Anything else (no request line, a head past 32 KiB, a chunked request body, another target form) is a 400 or 501 and
/// the connection is closed.
final class BrowserProxy: Sendable {
    /// Whether the browser may open a connection to `host`:`port`. `tunnel` is true for CONNECT, whose scheme the
    /// proxy cannot see (https or wss, or ws); false for a plain `http:` request.
    typealias Decide = @Sendable (_ host: String, _ port: Int, _ tunnel: Bool) async -> Bool

    /// The port it listens on, on 127.0.0.1.
    let port: Int
    private let channel: any Channel
    private let refused: NIOLockedValueBox<[String]>

    private init(channel: any Channel, refused: NIOLockedValueBox<[String]>) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.refused = refused
    }

    /// Chromium's switches that send its every connection here: loopback included (`<-loopback>` takes it off the
    /// implicit bypass list), WebRTC kept off UDP (which a proxy cannot carry), and no name resolved by the browser
    /// (the proxy resolves what it lets through), so a page cannot signal out through DNS lookups either.
    var chromiumArguments: [String] {
        [
            "--proxy-server=http://127.0.0.1:\(port)", "--proxy-bypass-list=<-loopback>", "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        ]
    }

    /// Connections refused, as `host:port`, in order.
    var refusedConnections: [String] { refused.withLockedValue { $0 } }

    /// Starts a proxy on 127.0.0.1 (a free port) that allows what `decide` allows.
    static func start(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, decide: @escaping Decide) async throws -> BrowserProxy {
        let refused = NIOLockedValueBox<[String]>([])
        return BrowserProxy(channel: try await bind(group: group, decide: decide, refused: refused).get(), refused: refused)
    }

    /// ``start(group:decide:)`` from synchronous code (not on an event loop).
    static func startBlocking(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, decide: @escaping Decide) throws -> BrowserProxy {
        let refused = NIOLockedValueBox<[String]>([])
        return BrowserProxy(channel: try bind(group: group, decide: decide, refused: refused).wait(), refused: refused)
    }

    private static func bind(group: any EventLoopGroup, decide: @escaping Decide, refused: NIOLockedValueBox<[String]>) -> EventLoopFuture<any Channel> {
        let report: @Sendable (String) -> Void = { who in refused.withLockedValue { $0.append(who) } }
        return ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ProxyConnection(decide: decide, refused: report))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
    }

    /// Stops listening; connections already open end with their peers.
    func stop() async { try? await channel.close() }

    /// ``stop()`` from synchronous code.
    func stopBlocking() { try? channel.close().wait() }

    /// A head's request line, parsed: where it goes and what to send there.
    struct Target: Equatable {
        var host: String
        var port: Int
        /// CONNECT: a tunnel. Otherwise the head to send to the host (origin form, `Connection: close`) and the
        /// request body's length.
        var tunnel: Bool
        var head: [UInt8] = []
        var bodyLength = 0
    }

    /// Why a head is refused: the status and its reason.
    struct Refusal: Error, Equatable {
        var status: Int
        var reason: String
    }

    /// Parses a proxy request's head (without its blank line): a CONNECT or an `http:` request in absolute form.
    static func parse(head: [UInt8]) throws(Refusal) -> Target {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1."), !requestLine[0].isEmpty,
            requestLine[0].utf8.allSatisfy({ (0x41...0x5A).contains($0) || $0 == UInt8(ascii: "-") })
        else { throw Refusal(status: 400, reason: "not an HTTP/1 request line") }
        let method = String(requestLine[0])
        let target = String(requestLine[1])
        if method == "CONNECT" {
            guard let (host, port) = hostAndPort(target, defaultPort: nil) else { throw Refusal(status: 400, reason: "CONNECT to \(target)") }
            return Target(host: host, port: port, tunnel: true)
        }
        guard target.lowercased().hasPrefix("http://") else { throw Refusal(status: 400, reason: "a target not in http: absolute form") }
        let rest = target.dropFirst(7)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        guard let (host, port) = hostAndPort(String(rest[..<authorityEnd]), defaultPort: 80) else {
            throw Refusal(status: 400, reason: "a target without a host")
        }
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        var fields: [String] = []
        var bodyLength = 0
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw Refusal(status: 400, reason: "a header line without a colon") }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "transfer-encoding": throw Refusal(status: 501, reason: "a request body in chunks")
            case "content-length":
                guard let length = Int(value), length >= 0, bodyLength == 0 || bodyLength == length else {
                    throw Refusal(status: 400, reason: "Content-Length \(value)")
                }
                bodyLength = length
                fields.append(line)
            // Hop-by-hop: this connection's, not the host's (one request, then closed).
            case "connection", "proxy-connection", "keep-alive", "proxy-authorization", "te", "upgrade": continue
            default: fields.append(line)
            }
        }
        let sent = ([method + " " + path + " HTTP/1.1"] + fields + ["Connection: close", "", ""]).joined(separator: "\r\n")
        return Target(host: host, port: port, tunnel: false, head: Array(sent.utf8), bodyLength: bodyLength)
    }

    /// `host:port` (a bracketed IPv6 literal too); the port is required unless a default is given.
    static func hostAndPort(_ authority: String, defaultPort: Int?) -> (String, Int)? {
        if authority.contains("@") { return nil }
        var host = authority
        var port = defaultPort
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                port = Int(after.dropFirst())
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = Int(authority[authority.index(after: colon)...])
        }
        guard let port, (1...65535).contains(port), !host.isEmpty else { return nil }
        return (host, port)
    }
}

/// One browser connection to the proxy: its head read and decided, then relayed to the host or refused.
private final class ProxyConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum State {
        case head
        case deciding
        case relaying(any Channel)
        case closed
    }

    private let decide: BrowserProxy.Decide
    private let refused: @Sendable (String) -> Void
    private var state = State.head
    private var received: ByteBuffer?
    /// Body bytes still to send to the host for a plain request; the client's bytes past them are not forwarded.
    private var bodyLeft = Int.max
    static let maxHead = 32 << 10

    init(decide: @escaping BrowserProxy.Decide, refused: @escaping @Sendable (String) -> Void) {
        self.decide = decide
        self.refused = refused
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch state {
        case .head, .deciding:
            if received == nil { received = bytes } else { received!.writeBuffer(&bytes) }
            if case .head = state { readHead(context: context) }
        case .relaying(let peer):
            forward(bytes, to: peer)
        case .closed:
            break
        }
    }

    private func readHead(context: ChannelHandlerContext) {
        guard let buffer = received else { return }
        let view = buffer.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else {
            if view.count > Self.maxHead { refuse(431, "the request head is past 32 KiB", context: context) }
            return
        }
        let target: BrowserProxy.Target
        do {
            target = try BrowserProxy.parse(head: Array(view[view.startIndex..<end.lowerBound]))
        } catch {
            return refuse(error.status, error.reason, context: context)
        }
        received!.moveReaderIndex(forwardBy: end.upperBound - view.startIndex)
        state = .deciding
        context.channel.setOption(.autoRead, value: false).whenComplete { _ in }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let decide = self.decide
        context.eventLoop.makeFutureWithTask { await decide(target.host, target.port, target.tunnel) }.whenComplete { result in
            let (handler, context) = bound.value
            guard case .deciding = handler.state else { return }
            guard case .success(true) = result else {
                handler.refused("\(target.host):\(target.port)")
                return handler.refuse(403, "\(target.host):\(target.port) is outside the crawl's scope", context: context)
            }
            handler.connect(target, context: context)
        }
    }

    private func connect(_ target: BrowserProxy.Target, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let client = context.channel
        ClientBootstrap(group: context.eventLoop)
            .connectTimeout(.seconds(10))
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { peer in
                peer.eventLoop.makeCompletedFuture { try peer.pipeline.syncOperations.addHandler(RelayBack(to: client)) }
            }
            .connect(host: target.host, port: target.port)
            .hop(to: context.eventLoop)
            .whenComplete { result in
                let (handler, context) = bound.value
                switch result {
                case .failure:
                    handler.refuse(502, "cannot reach \(target.host):\(target.port)", context: context)
                case .success(let peer):
                    guard case .deciding = handler.state else {
                        peer.close(promise: nil)
                        return
                    }
                    handler.state = .relaying(peer)
                    if target.tunnel {
                        context.writeAndFlush(handler.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection Established\r\n\r\n")), promise: nil)
                    } else {
                        handler.bodyLeft = target.bodyLength
                        peer.writeAndFlush(ByteBuffer(bytes: target.head), promise: nil)
                    }
                    if let rest = handler.received, rest.readableBytes > 0 { handler.forward(rest, to: peer) }
                    handler.received = nil
                    context.channel.setOption(.autoRead, value: true).whenComplete { _ in }
                    context.read()
                }
            }
    }

    /// Client bytes to the host: all of them in a tunnel, only the declared body after a plain request's head.
    private func forward(_ bytes: ByteBuffer, to peer: any Channel) {
        var bytes = bytes
        if bodyLeft != Int.max {
            guard bodyLeft > 0 else { return }
            let take = min(bodyLeft, bytes.readableBytes)
            bytes = bytes.getSlice(at: bytes.readerIndex, length: take)!
            bodyLeft -= take
        }
        peer.writeAndFlush(bytes, promise: nil)
    }

    private func refuse(_ status: Int, _ reason: String, context: ChannelHandlerContext) {
        if case .closed = state { return }
        state = .closed
        let words =
            [400: "Bad Request", 403: "Forbidden", 431: "Request Header Fields Too Large", 501: "Not Implemented", 502: "Bad Gateway"][status] ?? "Error"
        let body = "packager's browser proxy: " + reason + "\n"
        let head = "HTTP/1.1 \(status) \(words)\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: head + body))).whenComplete { _ in bound.value.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .relaying(let peer) = state { peer.close(promise: nil) }
        state = .closed
        context.fireChannelInactive()
    }

    /// The browser reads slower than the host sends: the host is not read until the browser has taken what waits.
    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if case .relaying(let peer) = state { peer.setOption(.autoRead, value: context.channel.isWritable).whenComplete { _ in } }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The browser half-closed: the host hears the end of what it sends.
        if event as? ChannelEvent == .inputClosed, case .relaying(let peer) = state {
            peer.close(mode: .output, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// The host's bytes back to the browser's connection, which closes when the host does.
private final class RelayBack: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let client: any Channel

    init(to client: any Channel) { self.client = client }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        client.writeAndFlush(unwrapInboundIn(data), promise: nil)
        // Not read further until the browser has taken what waits (its side turns reading back on).
        if !client.isWritable { context.channel.setOption(.autoRead, value: false).whenComplete { _ in } }
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeClientOnceWritten()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .inputClosed { closeClientOnceWritten() }
        context.fireUserInboundEventTriggered(event)
    }

    /// The host is done: the browser gets every byte relayed (writes complete in order), then the end.
    private func closeClientOnceWritten() {
        let client = self.client
        client.writeAndFlush(ByteBuffer()).whenComplete { _ in client.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
        client.close(promise: nil)
    }
}
