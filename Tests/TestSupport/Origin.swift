import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdLauncher
import Logging
import NIOConcurrencyHelpers
import NIOCore
import OfflineBundleServing

/// SOCK_STREAM as `socket` and `ai_socktype` take it: an enumeration's raw value in Glibc, an Int32 elsewhere.
#if canImport(Glibc)
    private let streamSocketType = Int32(SOCK_STREAM.rawValue)
#else
    private let streamSocketType = SOCK_STREAM
#endif

/// A real HTTP origin on loopback whose content, faults and validators a test sets and changes while it runs.
///
/// Built on Hummingbird. Every request is logged with its headers, so tests
/// can check what the crawler sent; resources can be slow, fail a number of
/// times with Retry-After, cut their body short, or refuse HEAD.
public final class Origin: @unchecked Sendable {
    /// What the origin answers for one path (with its query, when it has one).
    public struct Resource: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]
        /// Seconds to wait before answering.
        public var delay: Double = 0
        /// The first this-many requests get ``failureStatus`` (with ``retryAfter`` when set).
        public var failures = 0
        public var failureStatus = 503
        public var retryAfter: String?
        /// Sends a Content-Length for the whole body, then only this many bytes, then closes the connection.
        public var truncateAt: Int?
        /// Whether HEAD is answered (405 otherwise).
        public var allowsHEAD = true
        /// Sends the body chunked, without a Content-Length: this many bytes, then closes the connection without the last chunk.
        public var dropAfter: Int?
        /// Sends the Content-Length and this many bytes, then stalls for ``stallSeconds`` before closing.
        public var stallAfter: Int?
        public var stallSeconds: Double = 10
        /// Streams a chunked body that never ends (until the client goes away, or 1 GiB).
        public var endless = false
        /// How many GET requests get the faults above and ``truncateAt``; later ones are answered whole. (A HEAD has no body to cut.)
        public var faultyRequests = Int.max

        public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = []) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// A text resource with its Content-Type.
        public static func text(_ text: String, type: String, status: Int = 200, headers: [(String, String)] = []) -> Resource {
            Resource(status: status, headers: [("Content-Type", type)] + headers, body: Array(text.utf8))
        }

        /// A redirect to `location`.
        public static func redirect(_ location: String, status: Int = 301) -> Resource {
            Resource(status: status, headers: [("Location", location)])
        }
    }

    /// One request the origin received.
    public struct Received: Sendable {
        public var method: String
        public var path: String
        public var headers: [String: String]
        /// The request body (of a route's requests; empty for others).
        public var body = Data()
    }

    /// An answer made for each request (an API: by method, headers and body).
    public typealias Handler = @Sendable (Received) -> Resource

    private let lock = NSLock()
    private var resources: [String: Resource] = [:]
    private var handlers: [String: Handler] = [:]
    private var served: [String: Int] = [:]
    private var servedGET: [String: Int] = [:]
    private var log: [Received] = []
    private var server: HummingbirdServer?
    public private(set) var port = 0

    public init() {}

    /// `http://127.0.0.1:PORT`.
    public var base: String { "http://127.0.0.1:\(port)" }

    public func set(_ path: String, _ resource: Resource) { lock.withLock { resources[path] = resource } }
    /// Answers requests for `path` (with its query) by `handler`, which sees the method, headers and body.
    public func route(_ path: String, _ handler: @escaping Handler) { lock.withLock { handlers[path] = handler } }
    public func remove(_ path: String) { lock.withLock { _ = resources.removeValue(forKey: path) } }
    public var requests: [Received] { lock.withLock { log } }
    public func count(_ path: String) -> Int { lock.withLock { log.filter { $0.path == path }.count } }

    /// Starts listening on a free loopback port.
    public func start() async throws {
        let responder = CallbackResponder<BasicRequestContext> { [self] request, _ in try await self.respond(request) }
        // Stopped with a graceful shutdown, which lets open responses finish, rather than by cancellation.
        let server = try await HummingbirdServer.start(responder: responder)
        lock.withLock { self.server = server }
        port = server.port
    }

    /// Stops the server; requests to it then fail to connect.
    public func stop() async {
        let server = lock.withLock { () -> HummingbirdServer? in
            defer { self.server = nil }
            return self.server
        }
        await server?.stop()
    }

    private func respond(_ request: Request) async throws -> Response {
        let path = request.uri.path + (request.uri.query.map { "?" + $0 } ?? "")
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        var request = request
        let handler = lock.withLock { handlers[path] }
        let requestBody = handler == nil ? Data() : Data((try await request.collectBody(upTo: 1 << 22)).readableBytesView)
        let received = Received(method: request.method.rawValue, path: path, headers: headers, body: requestBody)
        let (resource, attempt, getAttempt): (Resource?, Int, Int) = lock.withLock {
            log.append(received)
            let resource = handler.map { $0(received) } ?? resources[path]
            served[path, default: 0] += 1
            if request.method == .get { servedGET[path, default: 0] += 1 }
            return (resource, served[path]!, servedGET[path, default: 0])
        }
        guard let resource else {
            return Response(status: .notFound, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "not found")))
        }
        if resource.delay > 0 { try await Task.sleep(nanoseconds: UInt64(resource.delay * 1e9)) }
        if attempt <= resource.failures {
            var fields = HTTPFields()
            if let retryAfter = resource.retryAfter { fields[.retryAfter] = retryAfter }
            return Response(status: .init(code: resource.failureStatus), headers: fields)
        }
        if request.method == .head && !resource.allowsHEAD { return Response(status: .methodNotAllowed) }
        var fields = HTTPFields()
        for (name, value) in resource.headers {
            if let field = HTTPField.Name(name) { fields.append(HTTPField(name: field, value: value)) }
        }
        // Conditional requests, as a real server answers them.
        if let etag = fields[.eTag], let match = headers["if-none-match"],
            match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag })
        {
            return Response(status: .notModified, headers: fields)
        }
        if headers["if-none-match"] == nil, let modified = fields[.lastModified], headers["if-modified-since"] == modified {
            return Response(status: .notModified, headers: fields)
        }
        let body = resource.body
        let faulty = request.method == .get && getAttempt <= resource.faultyRequests
        if resource.endless, faulty {
            return Response(
                status: .init(code: resource.status), headers: fields,
                body: ResponseBody { writer in
                    let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 << 10)
                    for _ in 0..<(1 << 14) { try await writer.write(chunk) }
                    try await writer.finish(nil)
                })
        }
        if let cut = resource.dropAfter, faulty {
            return Response(
                status: .init(code: resource.status), headers: fields,
                body: ResponseBody { writer in
                    try await writer.write(ByteBuffer(bytes: body.prefix(cut)))
                    throw CancellationError()
                })
        }
        if let cut = resource.stallAfter, faulty {
            let seconds = resource.stallSeconds
            return Response(
                status: .init(code: resource.status), headers: fields,
                body: ResponseBody(contentLength: body.count) { writer in
                    try await writer.write(ByteBuffer(bytes: body.prefix(cut)))
                    try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                    throw CancellationError()
                })
        }
        if let cut = resource.truncateAt, faulty {
            return Response(
                status: .init(code: resource.status), headers: fields,
                body: ResponseBody(contentLength: body.count) { writer in
                    try await writer.write(ByteBuffer(bytes: body.prefix(cut)))
                    throw CancellationError()
                })
        }
        if request.method == .head {
            fields[.contentLength] = String(body.count)
            return Response(status: .init(code: resource.status), headers: fields)
        }
        return Response(status: .init(code: resource.status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Runs `body` with a started origin, and stops the origin before returning, whether `body` threw or not.
public func withOrigin<T>(_ body: (Origin) async throws -> T) async throws -> T {
    let origin = Origin()
    try await origin.start()
    do {
        let result = try await body(origin)
        await origin.stop()
        return result
    } catch {
        await origin.stop()
        throw error
    }
}

/// Runs `body` with two started origins on different ports (two origins of one host), stopping both before returning.
public func withOrigins<T>(_ body: (Origin, Origin) async throws -> T) async throws -> T {
    try await withOrigin { a in try await withOrigin { b in try await body(a, b) } }
}

/// A loopback port nothing listens on, and nothing else can take: its socket stays bound (never listening) until the
/// test process ends, so a connection to it is refused at once. (Freed at once, as ``freePort()`` does, the port went
/// back to the pool that servers binding port 0 and outgoing connections draw from: in a full parallel run another
/// test's server could take it, and a dial meant to be refused waited for a timeout instead.)
public func closedPort() throws -> Int {
    let (fd, port) = try boundLoopbackSocket()
    // Held, never closed: a few descriptors per test process.
    heldPorts.withLockedValue { $0.append(fd) }
    return port
}

/// A loopback port free a moment ago, for a server a test starts to listen on (bound, read, and closed again; the
/// server's start is retried on another port when something took this one in between).
public func freePort() throws -> Int {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
}

/// A TCP socket bound to a port of 127.0.0.1 the system chose, and the port.
private func boundLoopbackSocket() throws -> (Int32, Int) {
    let fd = socket(AF_INET, streamSocketType, 0)
    guard fd >= 0 else { throw POSIXError(.EBADF) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else {
        close(fd)
        throw POSIXError(.EADDRINUSE)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

private let heldPorts = NIOLockedValueBox<[Int32]>([])
