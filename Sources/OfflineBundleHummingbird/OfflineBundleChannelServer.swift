import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
import ServiceLifecycle
import UnixSignals

/// What one request got, for an access log.
public struct ServedRequest: Sendable {
    /// The client's address, when known.
    public var client: String?
    public var method: String
    /// The request target as the client sent it.
    public var target: String
    public var status: Int
    /// The response's Content-Length, when it has one.
    public var contentLength: String?
    /// What answered; nil for a miss, a refused Host or an error.
    public var source: BundleResponse.Source?

    public init(client: String?, method: String, target: String, status: Int, contentLength: String?, source: BundleResponse.Source?) {
        self.client = client
        self.method = method
        self.target = target
        self.status = status
        self.contentLength = contentLength
        self.source = source
    }
}

/// Serves bundles over plain HTTP/1.1 from a SwiftNIO channel handler, without a web framework: the answers of
/// ``OfflineBundleMiddleware`` (the same loader, routes and checks) at the rate the network stack allows.
///
/// On this machine's benchmark a Hummingbird route answering a fixed body reaches half of nginx's rate and a bare
/// SwiftNIO handler all of it (docs/BENCHMARKS.md); `packager serve` uses this server for plain HTTP and Hummingbird
/// (``OfflineBundleServer``) for HTTPS with HTTP/2.
///
/// Bodies in memory (the mount's cache of inflated bodies, rule content) and bodies of at most 64 KiB are answered on
/// the event loop (one read, from the page cache as a rule, as nginx reads); larger ones are read in chunks on NIO's
/// thread pool, one chunk in flight per response. A body not yet checked in this mount is checked as it goes: one that
/// fails before its head went out is a 500, one that fails later closes the connection short of its Content-Length.
/// Requests on a connection are answered in order.
public final class OfflineBundleChannelServer: Service, Sendable {
    /// The port it listens on, once ``start(handle:routes:host:port:accepts:served:)`` returned.
    public let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// Starts listening and returns once it does.
    ///
    /// - Parameters:
    ///   - serverName: the `Server` header every response carries, when given.
    ///   - idleTimeout: a connection that sends nothing for this long while no response is going out is closed (a
    ///     client that opens connections and goes quiet cannot hold the server's descriptors). It is checked once per
    ///     period, so such a connection closes after one to two periods.
    ///   - accepts: whether a request's Host (without port; nil when it sent none) is answered; others get 421.
    ///   - served: called after each response head, for an access log.
    public static func start(
        handle: LoaderHandle, routes: [BundleRoute], host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil,
        idleTimeout: TimeAmount = .seconds(60), accepts: @escaping @Sendable (String?) -> Bool = { _ in true },
        served: (@Sendable (ServedRequest) -> Void)? = nil
    ) async throws -> OfflineBundleChannelServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(
                        BundleChannelHandler(
                            handle: handle, routes: routes, serverName: serverName, idleTimeout: idleTimeout, accepts: accepts, served: served))
                }
            }
            .bind(host: host, port: port).get()
        return OfflineBundleChannelServer(port: channel.localAddress?.port ?? port, channel: channel)
    }

    /// Serves until a graceful shutdown (a service group's signal), then stops listening.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            self.channel.close(promise: nil)
        }
    }

    /// Serves until one of `shutdownSignals` (or a service group's graceful shutdown), then stops listening.
    public func wait(shutdownSignals: [UnixSignal]) async throws {
        let group = ServiceGroup(
            configuration: .init(services: [self], gracefulShutdownSignals: shutdownSignals, logger: Logger(label: "offline-bundle-channel-server")))
        try await group.run()
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }
}

/// One connection's requests, answered in order (the pipeline's pipelining helper holds the next until this one ended).
final class BundleChannelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let handle: LoaderHandle
    let routes: [BundleRoute]
    let accepts: @Sendable (String?) -> Bool
    let served: (@Sendable (ServedRequest) -> Void)?
    let serverName: String?
    private var head: HTTPRequestHead?
    let idleTimeout: TimeAmount
    private var idleCheck: Scheduled<Void>?
    /// Request parts received, and how many there were at the last idle check.
    private var reads = 0
    private var readsAtLastCheck = 0
    /// Whether a response is being written (a long download is not idle).
    private var responding = false
    /// The `Date` value (RFC 9110 §6.6.1: an origin server with a clock sends one), made once a second.
    private var date = (second: 0, value: "")

    init(
        handle: LoaderHandle, routes: [BundleRoute], serverName: String?, idleTimeout: TimeAmount, accepts: @escaping @Sendable (String?) -> Bool,
        served: (@Sendable (ServedRequest) -> Void)?
    ) {
        self.idleTimeout = idleTimeout
        self.handle = handle
        self.routes = routes
        self.serverName = serverName
        self.accepts = accepts
        self.served = served
    }

    func handlerAdded(context: ChannelHandlerContext) { scheduleIdleCheck(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { idleCheck?.cancel() }

    /// Once a period: a connection that sent nothing since the last check and has no response going out is closed. A
    /// counter and a flag per request, instead of a timestamp per read and write (an `IdleStateHandler` cost a tenth
    /// of the request rate).
    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.scheduleTask(in: idleTimeout) {
            let (handler, context) = bound.value
            if handler.reads == handler.readsAtLastCheck && !handler.responding {
                context.close(promise: nil)
            } else {
                handler.readsAtLastCheck = handler.reads
                handler.scheduleIdleCheck(context: context)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reads &+= 1
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            responding = true
            respond(to: head, context: context)
        }
    }

    private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
        let keepAlive = request.isKeepAlive
        var record = ServedRequest(
            client: context.channel.remoteAddress?.ipAddress, method: request.method.rawValue, target: request.uri, status: 500, contentLength: nil,
            source: nil)
        let host = request.headers.first(name: "host").flatMap { HTTPRules.host(ofAuthority: $0) }
        guard accepts(host) else { return empty(421, record, keepAlive: keepAlive, context: context) }
        guard let (url, route) = BundleRoute.key(target: request.uri, host: host, in: routes) else {
            return empty(404, record, keepAlive: keepAlive, context: context)
        }
        var fields = HTTPFields()
        for header in request.headers {
            if let name = HTTPField.Name(header.name) { fields.append(HTTPField(name: name, value: header.value)) }
        }
        let loader = handle.loader
        guard let answer = loader.response(for: BundleRequest(method: request.method.rawValue, url: url, headers: fields)) else {
            return empty(404, record, keepAlive: keepAlive, context: context)
        }
        // Mounting refuses statuses outside 200...599; checked again, as the middleware does.
        guard (200...599).contains(answer.status) else { return empty(500, record, keepAlive: keepAlive, context: context) }
        record.source = answer.source
        var headers = HTTPHeaders()
        headers.reserveCapacity(answer.headers.count)
        for field in answer.headers {
            // A recorded redirect to the origin itself stays on this server.
            let value = field.name == .location || field.name == .contentLocation ? route.localize(field.value) : field.value
            headers.add(name: field.name.canonicalName, value: value)
        }
        record.status = answer.status
        record.contentLength = answer.headers[.contentLength]
        let status = answer.status
        if status == 204 || status == 304 || request.method == .HEAD {
            served?(record)
            write(head: status, headers, keepAlive: keepAlive, context: context)
            return end(keepAlive: keepAlive, context: context)
        }
        let fail: @Sendable (any Error) -> Void = { error in loader.recordError(error, url: url) }
        // Checked before and sent as stored: from the file to the socket (sendfile), no copy through this process.
        if let span = answer.fileSpan() {
            guard span.descriptor >= 0 else { return empty(500, record, keepAlive: keepAlive, context: context) }
            served?(record)
            write(head: status, headers, keepAlive: keepAlive, context: context)
            if !span.prefix.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: span.prefix)))), promise: nil) }
            let file = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: span.descriptor)
            let region = FileRegion(fileHandle: file, readerIndex: Int(span.offset), endIndex: Int(span.offset + span.count))
            let channel = context.channel
            context.write(wrapOutboundOut(.body(.fileRegion(region)))).whenComplete { result in
                try? file.close()
                // A file cut short fails the write: the connection closes short of the Content-Length.
                if case .failure = result { channel.close(promise: nil) }
            }
            if !span.suffix.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: span.suffix)))), promise: nil) }
            return end(keepAlive: keepAlive, context: context)
        }
        // In memory, or a small body of the bundle (one read of at most 64 KiB, from the page cache as a rule, as nginx
        // reads): answered where it stands, without a hop to the thread pool.
        let small: Bool
        switch answer.body {
        case .gzip(let entry): small = (entry.body?.storedSize ?? .max) <= Self.smallBody
        case .entry(let entry), .range(let entry, _): small = entry.body.map { $0.size <= Self.smallBody && $0.storedSize <= Self.smallBody } ?? false
        case .content, .empty: small = false
        }
        if let reader = small ? nil : answer.bodyReaderIfInMemory() {
            readHere(status: status, headers, record: record, reader: { reader }, keepAlive: keepAlive, fail: fail, context: context)
            return
        }
        if small {
            readHere(status: status, headers, record: record, reader: { try answer.bodyReader() }, keepAlive: keepAlive, fail: fail, context: context)
            return
        }
        // The first chunks are read (and checked) on NIO's thread pool before the head goes out.
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        let sent = record
        let head = headers
        NIOThreadPool.singleton.runIfActive(eventLoop: loop) { () -> FirstChunks? in
            guard let reader = try answer.bodyReader() else { return nil }
            return FirstChunks(reader: reader, first: try reader.next(), second: try reader.next())
        }.whenComplete { result in
            let (handler, context) = bound.value
            switch result {
            case .success(let chunks?):
                handler.start(
                    status: status, head, record: sent, reader: chunks.reader, first: chunks.first, second: chunks.second, keepAlive: keepAlive,
                    fail: fail, context: context)
            case .success(nil):
                handler.served?(sent)
                handler.write(head: status, head, keepAlive: keepAlive, context: context)
                handler.end(keepAlive: keepAlive, context: context)
            case .failure(let error):
                // Never half-serve: a body that fails its checks is an error response, counted and logged.
                fail(error)
                handler.empty(500, sent, keepAlive: keepAlive, context: context)
            }
        }
    }

    /// Bodies up to this size are read on the event loop: the stored stream of a gzip answer, or both the stored and the
    /// inflated size of an identity answer (which inflates).
    static let smallBody: UInt64 = 64 << 10

    /// Answers with a body read on the event loop.
    private func readHere(
        status: Int, _ headers: HTTPHeaders, record: ServedRequest, reader make: () throws -> BodyReader?, keepAlive: Bool,
        fail: @escaping @Sendable (any Error) -> Void, context: ChannelHandlerContext
    ) {
        do {
            guard let reader = try make() else {
                served?(record)
                write(head: status, headers, keepAlive: keepAlive, context: context)
                return end(keepAlive: keepAlive, context: context)
            }
            let first = try reader.next()
            let second = try reader.next()
            start(status: status, headers, record: record, reader: reader, first: first, second: second, keepAlive: keepAlive, fail: fail, context: context)
        } catch {
            // Never half-serve: a body that fails its checks is an error response, counted and logged.
            fail(error)
            empty(500, record, keepAlive: keepAlive, context: context)
        }
    }

    /// A body's reader and its first two chunks.
    private struct FirstChunks: Sendable {
        var reader: BodyReader
        var first: Data?
        var second: Data?
    }

    /// An answer without a body: 421, a miss, an error.
    private func empty(_ status: Int, _ record: ServedRequest, keepAlive: Bool, context: ChannelHandlerContext) {
        var record = record
        record.status = status
        record.contentLength = "0"
        record.source = nil
        served?(record)
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "0")
        write(head: status, headers, keepAlive: keepAlive, context: context)
        end(keepAlive: keepAlive, context: context)
    }

    /// The head and the first chunks; the rest follows one chunk at a time.
    private func start(
        status: Int, _ headers: HTTPHeaders, record: ServedRequest, reader: BodyReader, first: Data?, second: Data?, keepAlive: Bool,
        fail: @escaping @Sendable (any Error) -> Void, context: ChannelHandlerContext
    ) {
        served?(record)
        write(head: status, headers, keepAlive: keepAlive, context: context)
        if let first { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: first)))), promise: nil) }
        guard let second else { return end(keepAlive: keepAlive, context: context) }
        let written = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: second)))))
        pump(reader, after: written, keepAlive: keepAlive, fail: fail, context: context)
    }

    /// Sends the rest of a body: the next chunk is read once the previous one is written, so a response holds one chunk.
    private func pump(
        _ reader: BodyReader, after written: EventLoopFuture<Void>, keepAlive: Bool, fail: @escaping @Sendable (any Error) -> Void,
        context: ChannelHandlerContext
    ) {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        written.flatMap {
            NIOThreadPool.singleton.runIfActive(eventLoop: loop) { try reader.next() }
        }.whenComplete { result in
            let (handler, context) = bound.value
            switch result {
            case .success(let chunk?):
                let next = context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: chunk)))))
                handler.pump(reader, after: next, keepAlive: keepAlive, fail: fail, context: context)
            case .success(nil):
                handler.end(keepAlive: keepAlive, context: context)
            case .failure(let error):
                // Mid-stream: the head has gone out; closing short of the Content-Length tells the client it failed.
                if error is BundleError { fail(error) }
                context.close(promise: nil)
            }
        }
    }

    private func write(head status: Int, _ headers: HTTPHeaders, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = headers
        let now = time(nil)
        if now != date.second { date = (now, HTTPDates.format(Date(timeIntervalSince1970: TimeInterval(now)))) }
        headers.add(name: "date", value: date.value)
        if let serverName { headers.add(name: "server", value: serverName) }
        if !keepAlive { headers.replaceOrAdd(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
    }

    private func end(keepAlive: Bool, context: ChannelHandlerContext) {
        responding = false
        if keepAlive {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
