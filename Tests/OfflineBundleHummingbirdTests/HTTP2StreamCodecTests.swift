import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import OfflineBundleServing

/// The stream codec turns the handler's typed answer into frames: a HEADERS frame of the fields given (nothing read
/// back from bytes), DATA frames up to the Content-Length, the stream ended by the last frame that belongs to it.
@Suite("HTTP/2 stream codec")
struct HTTP2StreamCodecTests {
    /// A codec on a channel whose request was `method`.
    func stream(_ method: String) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: HTTP2StreamCodec())
        let request = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", "/page.html"), (":authority", "docs.example.com")])
        try channel.writeInbound(HTTP2Frame.FramePayload.headers(.init(headers: request, endStream: true)))
        return channel
    }

    func frames(_ channel: EmbeddedChannel) throws -> [HTTP2Frame.FramePayload] {
        var frames: [HTTP2Frame.FramePayload] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.FramePayload.self) { frames.append(frame) }
        return frames
    }

    func head(_ status: Int, length: Int) -> HTTP2StreamCodec.Part {
        .head(
            HTTP2Head.fields(status: status, fields: [.contentType: "text/html", .contentLength: String(length), .age: "3"], serverName: "packager"),
            status: status, contentLength: length)
    }

    @Test("a GET: the head's fields as given (no Age, which each request adds), then DATA frames, the last one ending the stream")
    func headThenBody() throws {
        let channel = try stream("GET")
        try channel.writeOutbound(head(200, length: 10))
        try channel.writeOutbound(HTTP2StreamCodec.Part.body(.byteBuffer(ByteBuffer(string: "hello"))))
        try channel.writeOutbound(HTTP2StreamCodec.Part.body(.byteBuffer(ByteBuffer(string: "world"))))
        let frames = try frames(channel)
        #expect(frames.count == 3, "\(frames)")
        guard case .headers(let headers) = frames.first else {
            Issue.record("\(frames)")
            return
        }
        #expect(!headers.endStream)
        #expect(headers.headers.map { "\($0.name): \($0.value)" } == [":status: 200", "content-type: text/html", "content-length: 10", "server: packager"])
        let ends = frames.dropFirst().map { frame -> Bool? in if case .data(let data) = frame { data.endStream } else { nil } }
        #expect(ends == [false, true])
    }

    @Test("a HEAD, a 204 and a 304 end the stream with their HEADERS frame; bytes written after it are not sent")
    func bodylessHeads() throws {
        for (method, status) in [("HEAD", 200), ("GET", 204), ("GET", 304)] {
            let channel = try stream(method)
            try channel.writeOutbound(head(status, length: 5))
            try channel.writeOutbound(HTTP2StreamCodec.Part.body(.byteBuffer(ByteBuffer(string: "hello"))))
            let frames = try frames(channel)
            guard frames.count == 1, case .headers(let headers) = frames[0] else {
                Issue.record("\(method) \(status): \(frames)")
                continue
            }
            #expect(headers.endStream, "\(method) \(status)")
        }
    }

    @Test("a body before its head, or a second head, is refused and the stream closed")
    func outOfOrder() throws {
        let channel = try stream("GET")
        #expect(throws: (any Error).self) { try channel.writeOutbound(HTTP2StreamCodec.Part.body(.byteBuffer(ByteBuffer(string: "hello")))) }
        #expect(!channel.isActive)
        let again = try stream("GET")
        try again.writeOutbound(head(200, length: 5))
        #expect(throws: (any Error).self) { try again.writeOutbound(head(200, length: 5)) }
        #expect(!again.isActive)
    }
}
