// The peer in the serve benchmark: Hummingbird's own FileMiddleware serving a folder from disk. With ROOT given as
// `--hello`, a Hummingbird route that answers every request with the same 6 KiB body (the framework's ceiling); as
// `--nio-hello`, SwiftNIO's HTTP/1 server doing the same with a channel handler and no framework (NIO's ceiling); as
// `--raw-hello`, a channel handler on the bytes, without NIO's HTTP decoder, on one thread (the ceiling of serve's
// CachedAnswerFront).
//
// Usage: packager-bench-fileserver ROOT PORT
import Foundation
import Hummingbird
import HummingbirdLauncher
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// Answers every request with the same body, on the event loop.
final class FixedAnswer: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let body: ByteBuffer
    let head: HTTPResponseHead

    init(body: ByteBuffer) {
        self.body = body
        head = HTTPResponseHead(
            version: .http1_1, status: .ok, headers: ["content-type": "text/html", "content-length": "\(body.readableBytes)"])
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

/// Answers each request (its head found by the blank line that ends it) with the same bytes: no HTTP decoder, no
/// response encoder: NIO's channel alone.
final class RawFixedAnswer: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let response: ByteBuffer

    init(body: ByteBuffer) {
        var response = ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: \(body.readableBytes)\r\n\r\n")
        response.writeImmutableBuffer(body)
        self.response = response
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let ends = buffer.withUnsafeReadableBytes { bytes in
            var count = 0
            var index = 3
            while index < bytes.count {
                if bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 { count += 1 }
                index += 1
            }
            return count
        }
        for _ in 0..<ends { context.write(wrapOutboundOut(response), promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[2]) else {
    print("usage: packager-bench-fileserver ROOT PORT")
    exit(2)
}
let hello = ByteBuffer(repeating: UInt8(ascii: "x"), count: 6 << 10)
if arguments[1] == "--raw-hello" {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup(numberOfThreads: 1))
        .serverChannelOption(.backlog, value: 256)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RawFixedAnswer(body: hello)) }
        }
        .bind(host: "127.0.0.1", port: port).get()
    try await channel.closeFuture.get()
    exit(0)
}
if arguments[1] == "--nio-hello" {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.backlog, value: 256)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                try channel.pipeline.syncOperations.addHandler(FixedAnswer(body: hello))
            }
        }
        .bind(host: "127.0.0.1", port: port).get()
    try await channel.closeFuture.get()
    exit(0)
}
var logger = Logger(label: "file-server")
logger.logLevel = .warning
let router = Router()
if arguments[1] == "--hello" {
    router.get("**") { _, _ in Response(status: .ok, headers: [.contentType: "text/html"], body: .init(byteBuffer: hello)) }
} else {
    router.add(middleware: FileMiddleware(arguments[1], searchForIndexHtml: true, logger: logger))
}
let server = try await HummingbirdServer.start(
    responder: router.buildResponder(), port: port, shutdownSignals: [.sigterm, .sigint], logger: logger)
try await server.wait()
