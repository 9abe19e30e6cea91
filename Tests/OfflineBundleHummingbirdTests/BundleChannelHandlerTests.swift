import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import OfflineBundle
import TestSupport
import Testing

@testable import OfflineBundleServing

@Suite("BundleChannelHandler on an embedded channel: the order of answers on one connection")
struct BundleChannelHandlerTests {
    @Test(
        "requests that waited for the channel to drain are answered one after the other, even when a handler in front reports the channel writable from inside one of an answer's writes"
    )
    func writableInsideAWriteDoesNotInterleave() throws {
        let folder = try TemporaryFolder()
        let first = Data(repeating: UInt8(ascii: "a"), count: 3000)
        let second = Data(repeating: UInt8(ascii: "b"), count: 2000)
        try writeBundle(["https://docs.example.com/a.txt": first, "https://docs.example.com/b.txt": second], to: folder.path + "/b.zip")
        let settings = embeddedSettings(LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip")))
        let channel = EmbeddedChannel()
        let inFront = WritableInsideWrite()
        try channel.pipeline.syncOperations.addHandler(inFront)
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
        try channel.pipeline.syncOperations.addHandler(BundleChannelHandler(settings, cache: nil))

        // Both requests arrive while the channel holds too much: they wait.
        channel.isWritable = false
        let asked = "GET /a.txt HTTP/1.1\r\nHost: docs.example.com\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: docs.example.com\r\n\r\n"
        try channel.writeInbound(ByteBuffer(string: asked))
        #expect(try channel.readOutbound(as: IOData.self) == nil, "nothing is answered while the channel is not writable")

        // It drains; the first answer's head goes out, and the handler in front says "writable" from inside that write.
        inFront.armed = true
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.run()
        #expect(!inFront.armed, "the handler in front reported writability inside a write")

        var out: [UInt8] = []
        while case .byteBuffer(let buffer)? = try channel.readOutbound(as: IOData.self) { out += buffer.readableBytesView }
        let text = String(decoding: out, as: UTF8.self)
        let answers = text.components(separatedBy: "HTTP/1.1 200 OK\r\n").filter { !$0.isEmpty }
        try #require(answers.count == 2, "two answers: \(text.prefix(200))")
        // Each answer is its head and then its own body, whole: the second does not start inside the first.
        #expect(answers[0].hasSuffix("\r\n\r\n" + String(repeating: "a", count: 3000)))
        #expect(answers[1].hasSuffix("\r\n\r\n" + String(repeating: "b", count: 2000)))
        _ = try channel.finish()
    }
}

@Suite("the HTTP/1.1 front on an embedded channel: which requests it answers itself")
struct CachedAnswerFrontEmbeddedTests {
    @Test(
        "a plain GET whose answer the cache keeps is answered by the front, the decoder never seeing it (with Connection: keep-alive as browsers send it, or none); a first request and a conditional one go on to the decoder"
    )
    func frontAnswersKeptAnswers() throws {
        let folder = try TemporaryFolder()
        let page = Data(repeating: UInt8(ascii: "p"), count: 3000)
        try writeBundle(["https://docs.example.com/a.txt": page], to: folder.path + "/b.zip")
        let handle = LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip"))
        let settings = embeddedSettings(handle)
        let channel = EmbeddedChannel()
        let answers = BundleChannelHandler(settings, cache: ResponseCache(budget: 16 << 20))
        let passed = CountingReads()
        try channel.pipeline.syncOperations.addHandler(CachedAnswerFront(answers: answers, cache: answers.cache!, handle: handle))
        try channel.pipeline.syncOperations.addHandler(passed)
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder()))
        try channel.pipeline.syncOperations.addHandler(answers)

        /// Sends `request`; the answer's text and the bytes the front passed on to the decoder.
        func ask(_ request: String) throws -> (answer: String, passedOn: Int) {
            let before = passed.bytes
            try channel.writeInbound(ByteBuffer(string: request))
            channel.embeddedEventLoop.run()
            var out: [UInt8] = []
            while case .byteBuffer(let buffer)? = try channel.readOutbound(as: IOData.self) { out += buffer.readableBytesView }
            return (String(decoding: out, as: UTF8.self), passed.bytes - before)
        }
        let get = "GET /a.txt HTTP/1.1\r\nHost: docs.example.com\r\n\r\n"
        // The first asks the bundle, through the decoder, and keeps the answer.
        let first = try ask(get)
        #expect(first.answer.hasPrefix("HTTP/1.1 200 OK") && first.answer.hasSuffix(String(decoding: page, as: UTF8.self)) && first.passedOn == get.utf8.count)
        // Then the front answers, the same answer, and passes nothing on.
        for request in [get, "GET /a.txt HTTP/1.1\r\nHost: docs.example.com\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"] {
            let again = try ask(request)
            #expect(again.passedOn == 0, "answered by the front: \(request)")
            #expect(again.answer.hasPrefix("HTTP/1.1 200 OK") && again.answer.hasSuffix(String(decoding: page, as: UTF8.self)), "\(again.answer.prefix(200))")
        }
        // A conditional request is the handler's (it may answer 304).
        let conditional = "GET /a.txt HTTP/1.1\r\nHost: docs.example.com\r\nIf-None-Match: \"x\"\r\n\r\n"
        #expect(try ask(conditional).passedOn == conditional.utf8.count)
        _ = try channel.finish()
    }
}

/// A handler's settings for an embedded channel: the bundle `handle` holds under docs.example.com, no sendfile (an
/// embedded channel takes bytes only).
private func embeddedSettings(_ handle: LoaderHandle) -> BundleChannelHandler.Settings {
    var settings = BundleChannelHandler.Settings(
        serving: BundleServing(handle: handle, routes: [.init(origin: "https://docs.example.com")], policy: ServerPolicy()), serverName: nil,
        idleTimeout: .seconds(60))
    settings.sendfile = false
    return settings
}

/// Counts the bytes that pass on to the next handler.
private final class CountingReads: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    var bytes = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bytes += unwrapInboundIn(data).readableBytes
        context.fireChannelRead(data)
    }
}

/// Reports the channel writable from inside the next write it passes on, once armed: as a handler that flushes on its
/// own within a write would (NIO tells the pipeline of writability changes synchronously).
private final class WritableInsideWrite: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    var armed = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        guard armed else { return }
        armed = false
        context.fireChannelWritabilityChanged()
    }
}
