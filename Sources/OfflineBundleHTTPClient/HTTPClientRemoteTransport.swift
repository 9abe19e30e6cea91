import AsyncHTTPClient
import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import OfflineBundle
import Synchronization

/// A ``RemoteTransport`` over AsyncHTTPClient: what mounts a remote bundle (`MountedBundle.mount(.remote(url, options))`) in a
/// service that has AsyncHTTPClient, and in `packager`.
///
/// Replies complete on the client's event loops, as the transport protocol asks. Redirects are not followed: a
/// bucket's credentials are never sent to another host, and the URL to mount is the object's own.
///
/// ```swift
/// let transport = try HTTPClientRemoteTransport(caFile: "/etc/ssl/internal-ca.pem")
/// let remote = RemoteOptions(transport: transport, headers: [.authorization: token], cacheDirectory: "/var/cache/bundles")
/// let bundle = try await MountedBundle.mount(.remote("https://cdn.example.com/release.bundle.zip", remote))
/// ```
public final class HTTPClientRemoteTransport: RemoteTransport {
    /// The client requests go through.
    public let client: HTTPClient
    private let owned: Bool

    /// A transport over `client` (which the caller shuts down).
    public init(client: HTTPClient) {
        self.client = client
        owned = false
    }

    /// A transport with a client of its own: trusting the system's roots and the PEM certificates in `caFile`;
    /// connections time out after `connectTimeout`. Shut it down with ``shutdown()``.
    ///
    /// - Throws: when `caFile` cannot be read as PEM certificates.
    public convenience init(caFile: String? = nil, connectTimeout: Duration = .seconds(10)) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(caFile))]
            } catch {
                throw BundleError(.invalidArgument, "cannot read the CA file \(caFile) as PEM certificates: \(error)")
            }
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
        configuration.timeout.connect = .milliseconds(Int64(connectTimeout.seconds * 1000))
        configuration.decompression = .disabled
        // AsyncHTTPClient otherwise dials a refused port again and again until the connect timeout (10 s an
        // attempt); one refused dial is one failed attempt, which the remote options' retries and backoff follow.
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.init(client: client, owned: true)
    }

    private init(client: HTTPClient, owned: Bool) {
        self.client = client
        self.owned = owned
    }

    /// Shuts down the client this transport made (a no-op for a client given to it).
    public func shutdown() async throws {
        if owned { try await client.shutdown() }
    }

    deinit {
        // Without blocking: the last reference may go on one of the client's own event loops.
        if owned { client.shutdown(queue: .global()) { _ in } }
    }

    /// Sends `request` through the client within `request.timeout`; `completion` runs on the client's event loop. The
    /// body is streamed in and kept only up to what the request takes from the reply's head
    /// (``RemoteRequest/limit(status:headers:)``): past it (or at once, when `Content-Length` says so) the request is
    /// cancelled and the reply completes with its head alone, ``RemoteReply/overLimit`` set. A body the request gives a
    /// sink (``RemoteRequest/sink``) goes to it piece by piece and is not held. A connection that cannot be made fails
    /// with ``ConnectionFailure``.
    public func send(_ request: RemoteRequest, completion: @escaping @Sendable (Result<RemoteReply, any Error>) -> Void) {
        let prepared: HTTPClient.Request
        do {
            prepared = try HTTPClient.Request(url: request.url, method: HTTPMethod(rawValue: request.method), headers: HTTPHeaders(request.headers))
        } catch {
            completion(.failure(error))
            return
        }
        let delegate = BoundedReply(request: request)
        let deadline = NIODeadline.now() + .milliseconds(Int64(min(request.timeout.seconds, 1e9) * 1000))
        client.execute(request: prepared, delegate: delegate, deadline: deadline).futureResult.whenComplete { outcome in
            switch outcome {
            case .success(let reply): completion(.success(reply))
            case .failure(let error as BoundedReply.Stopped): completion(.success(error.reply))
            case .failure(let error): completion(.failure(Self.readable(error)))
            }
        }
    }

    /// Collects a reply's body up to what its request takes from the reply's head, and stops the request past it.
    final class BoundedReply: HTTPClientResponseDelegate {
        typealias Response = RemoteReply

        /// The request was stopped on purpose: its head said more than the request takes, or the body ran past it.
        struct Stopped: Error {
            var reply: RemoteReply
        }

        private struct State {
            var status = 0
            var headers = HTTPFields()
            var limit = 0
            var body: [UInt8] = []
            var received = 0
            var sink: (any RemoteBodySink)?
        }

        /// The request's sink could not keep the body (a file that could not be written).
        struct SinkFailed: Error, CustomStringConvertible {
            var description: String { "the reply's body could not be written to a file" }
        }

        private let request: RemoteRequest
        private let state = Mutex(State())

        init(request: RemoteRequest) { self.request = request }

        func didReceiveHead(task: HTTPClient.Task<RemoteReply>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
            let status = Int(head.status.code)
            let headers = HTTPFields(head.headers)
            let limit = request.limit(status: status, headers: headers)
            let announced = head.headers.first(name: "Content-Length").flatMap { Int($0) }
            // A HEAD's Content-Length announces the object, not a body.
            if request.method != "HEAD", let announced, announced > limit {
                return task.eventLoop.makeFailedFuture(Stopped(reply: RemoteReply(status: status, headers: headers, body: [], overLimit: true)))
            }
            // Asked only of a reply the request takes a body of: the sink may make a file.
            let sink = limit > 0 ? request.sink(status: status, headers: headers) : nil
            state.withLock {
                $0.status = status
                $0.headers = headers
                $0.limit = limit
                $0.sink = sink
                // Memory for what was announced, when it is small: a body of a sink is never held.
                if sink == nil, let announced, announced <= min(limit, 4 << 20) { $0.body.reserveCapacity(announced) }
            }
            return task.eventLoop.makeSucceededVoidFuture()
        }

        func didReceiveBodyPart(task: HTTPClient.Task<RemoteReply>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
            enum Outcome {
                case more
                case over(RemoteReply)
                case failed
            }
            let outcome = state.withLock { state -> Outcome in
                guard state.received + buffer.readableBytes <= state.limit else {
                    state.body = []
                    return .over(RemoteReply(status: state.status, headers: state.headers, body: [], overLimit: true))
                }
                state.received += buffer.readableBytes
                if let sink = state.sink {
                    return buffer.withUnsafeReadableBytes { sink.write($0) } ? .more : .failed
                }
                state.body += buffer.readableBytesView
                return .more
            }
            switch outcome {
            case .more: return task.eventLoop.makeSucceededVoidFuture()
            case .over(let reply): return task.eventLoop.makeFailedFuture(Stopped(reply: reply))
            case .failed: return task.eventLoop.makeFailedFuture(SinkFailed())
            }
        }

        func didFinishRequest(task: HTTPClient.Task<RemoteReply>) throws -> RemoteReply {
            state.withLock { RemoteReply(status: $0.status, headers: $0.headers, body: $0.body, sink: $0.sink) }
        }
    }

    /// A system call's failure said by its reason alone ("Connection refused"): NIO's own wording also names where it
    /// saw the failure ("connection reset (error set): Connection refused (errno: 111)" for a refused connection).
    static func readable(_ error: any Error) -> any Error {
        switch error {
        case let io as IOError: return ConnectionFailure(reason: String(cString: strerror(io.errnoCode)), underlying: io)
        case let failed as NIOConnectionError:
            // An address dialled says why it failed; otherwise the name did not resolve.
            if let dialled = failed.connectionErrors.first {
                return ConnectionFailure(reason: (readable(dialled.error) as? ConnectionFailure)?.reason ?? "\(dialled.error)", underlying: failed)
            }
            if failed.dnsAError != nil || failed.dnsAAAAError != nil { return ConnectionFailure(reason: "the host name did not resolve", underlying: failed) }
            return failed
        case let client as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout].contains(client):
            return TimedOut(underlying: client)
        default: return error
        }
    }

    /// A request that took longer than its timeout (``RemoteRequest/timeout``), or a connection that took longer than
    /// the connect timeout.
    public struct TimedOut: Error, CustomStringConvertible {
        /// The error AsyncHTTPClient reported.
        public var underlying: HTTPClientError
        public var description: String { underlying == .connectTimeout ? "connection failed: timed out" : "timed out" }
    }

    /// A connection to the bundle's server that could not be made or broke: the system's reason, and NIO's error.
    public struct ConnectionFailure: Error, CustomStringConvertible {
        /// The system's reason, as `strerror` gives it ("Connection refused"), or that the host name did not resolve.
        public var reason: String
        /// The error NIO reported (an `IOError` or a `NIOConnectionError`).
        public var underlying: any Error
        public var description: String { "connection failed: \(reason)" }
    }
}
