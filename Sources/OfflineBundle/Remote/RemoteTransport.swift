import Foundation
import HTTPTypes
import Synchronization
import Tracing

/// One HTTP request a remote bundle sends: a `GET` of a byte range (or of the whole object), or a `HEAD`.
public struct RemoteRequest: Sendable {
    /// `GET` or `HEAD`.
    public var method: String
    /// The object's URL, query and all (a presigned URL keeps its signature in the query).
    public var url: String
    /// Header fields to send, in order: the caller's (`Authorization`, …) and the read's own (`Range`, `If-Match`,
    /// `If-None-Match`).
    public var headers: HTTPFields
    /// How long the whole exchange may take, body and all.
    public var timeout: Duration
    /// The most body bytes the caller takes, whatever the reply: a transport stops reading past it and fails the
    /// request.
    public var maxBodyBytes: Int
    /// The most body bytes the caller takes from a reply with this status and these header fields, asked when the head
    /// arrives, before any body byte is read (at most ``maxBodyBytes``; nil takes ``maxBodyBytes`` of any reply). A
    /// transport that knows it stops reading the body once it is past this (at once when `Content-Length` says so, or
    /// when this is 0) and completes with the head, its body empty and ``RemoteReply/overLimit`` set, so a range
    /// answered with more than was asked never costs more than was asked.
    public var bodyLimit: (@Sendable (_ status: Int, _ headers: HTTPFields) -> Int)?
    /// Where the body of a reply with this status and these header fields goes instead of memory, asked when the head
    /// arrives (after ``bodyLimit``); nil, or a nil answer, keeps the body in ``RemoteReply/body``. A transport that
    /// knows it hands each piece of the body to the sink as it arrives (still within the limit), holds none of it, and
    /// completes with the sink in ``RemoteReply/sink``: a remote bundle streams an object sent whole into a file.
    public var sink: (@Sendable (_ status: Int, _ headers: HTTPFields) -> (any RemoteBodySink)?)?

    /// A request as a remote bundle sends it.
    public init(
        method: String, url: String, headers: HTTPFields, timeout: Duration, maxBodyBytes: Int,
        bodyLimit: (@Sendable (_ status: Int, _ headers: HTTPFields) -> Int)? = nil,
        sink: (@Sendable (_ status: Int, _ headers: HTTPFields) -> (any RemoteBodySink)?)? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
        self.bodyLimit = bodyLimit
        self.sink = sink
    }

    /// Where the body of a reply with this head goes (``sink``); nil for a `HEAD`, or to keep it in memory.
    public func sink(status: Int, headers: HTTPFields) -> (any RemoteBodySink)? {
        guard method != "HEAD", let sink else { return nil }
        return sink(status, headers)
    }

    /// The most body bytes taken from a reply with this head: ``bodyLimit`` within ``maxBodyBytes``.
    public func limit(status: Int, headers: HTTPFields) -> Int {
        let cap = max(maxBodyBytes, 0)
        guard method != "HEAD", let bodyLimit else { return cap }
        return min(cap, max(bodyLimit(status, headers), 0))
    }
}

/// Takes a reply's body piece by piece as it arrives, in order, so that it is never held in memory
/// (``RemoteRequest/sink``).
public protocol RemoteBodySink: AnyObject, Sendable {
    /// Takes the body's next bytes; false when they could not be kept (the transport then fails the request).
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool
}

/// What the server answered.
public struct RemoteReply: Sendable {
    /// The status code (206 for a range, 200 for the whole object, 304, 412, …).
    public var status: Int
    /// Header fields as received; look them up with ``value(of:)``.
    public var headers: HTTPFields
    /// The body's bytes (none for a `HEAD`).
    public var body: [UInt8]
    /// Whether the body was left unread because it was longer than the request takes
    /// (``RemoteRequest/limit(status:headers:)``): ``body`` is then empty, and the head is the server's.
    public var overLimit: Bool
    /// The sink the body went to (``RemoteRequest/sink``), ``body`` then empty; nil when the body is in ``body``.
    public var sink: (any RemoteBodySink)?

    /// A reply as a transport received it.
    public init(status: Int, headers: HTTPFields, body: [UInt8], overLimit: Bool = false, sink: (any RemoteBodySink)? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.overLimit = overLimit
        self.sink = sink
    }

    /// The first value of the field `name` (compared without case), or nil.
    public func value(of name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
}

/// Sends a remote bundle's HTTP requests. The runtime speaks HTTP through it and links no HTTP client of its own:
/// `OfflineBundleHTTPClient` gives one over AsyncHTTPClient (``RemoteOptions`` takes any).
///
/// A transport calls `completion` once, with the reply or the failure to get one (a refused connection, a timeout).
/// It must call it from a thread of its own (an event loop), never from Swift's cooperative pool and never by blocking
/// on it: a remote bundle's reads wait for the completion on the thread that reads, which may be a pool's.
public protocol RemoteTransport: Sendable {
    /// Sends `request`, then calls `completion` once with the reply or the failure, from the transport's own thread.
    func send(_ request: RemoteRequest, completion: @escaping @Sendable (Result<RemoteReply, any Error>) -> Void)
}

extension RemoteTransport {
    /// Sends `request` and blocks the calling thread until the reply (call off the cooperative pool).
    package func sendWaiting(_ request: RemoteRequest) -> Result<RemoteReply, any Error> {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<RemoteReply, any Error>?>(nil)
        send(request) { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }
}

extension HTTPFields {
    /// Name and value pairs as fields, in order; a name that is not a valid field name is left out.
    package init(pairs: some Sequence<(name: String, value: String)>) {
        self.init()
        for (name, value) in pairs {
            if let name = HTTPField.Name(name) { append(HTTPField(name: name, value: value)) }
        }
    }

    /// These fields and one more, `name: value` (a name that is not a valid field name adds nothing).
    package func adding(_ name: String, _ value: String) -> HTTPFields {
        var fields = self
        if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        return fields
    }
}

/// How a remote bundle is read: through which transport, with which headers, cached where, and how patient.
public struct RemoteOptions: Sendable {
    /// What a server that answers a range request with the whole object (status 200) gets.
    public enum WholeObjectAnswer: Sendable {
        /// The whole object is kept in the cache once (a warning is logged) and read from there.
        case download
        /// The mount fails, saying that the server does not serve ranges.
        case refuse
    }

    /// Sends the requests.
    public var transport: any RemoteTransport
    /// Sent with every request: `Authorization` for a private bucket, or any field a CDN wants.
    public var headers: HTTPFields
    /// Where fetched ranges are kept across restarts and shared between processes on one host (one file per bundle
    /// digest, holding only bodies that passed their SHA-256); nil keeps them in a file of this process's own, removed
    /// when it ends. Made with mode 0700 when missing, its files 0600 and never opened through a link; a folder that
    /// another user owns, or that others may write to, is refused.
    public var cacheDirectory: String?
    /// The most bytes the cache folder holds: bundles least recently mounted are removed first when a mount finds it
    /// over; a bundle larger than this keeps what it fetches past the bound in no file (read again when asked again).
    public var cacheBytes: UInt64
    /// How long one request may take, body and all.
    public var timeout: Duration
    /// Attempts after the first on a connection error, a timeout or a 5xx answer (backing off 0.2 s, 0.4 s, …).
    public var retries: Int
    /// What a server that ignores ranges gets.
    public var wholeObject: WholeObjectAnswer
    /// Whether a mount may use what the cache holds when the server cannot be reached (warm cache, offline).
    public var offlineFromCache: Bool
    /// How long a read of a body may wait for the server in all, retries included: past it the read fails (serve answers
    /// 503 with Retry-After) and the fetch goes on, for the cache. Without it, a stalled server would hold each read
    /// for ``timeout`` times the attempts. Mounting and ``MountedBundle/fetchWhole()`` are not bound by it.
    public var readDeadline: Duration
    /// Where each request to the server and each read of a body are traced (``fetchSpanName``, ``readSpanName``); nil:
    /// `InstrumentationSystem.tracer`, the one the service bootstraps.
    public var tracer: (any Tracer)?

    /// The span of each request a remote bundle sends (a client span): `http.request.method`, `offline_bundle.url`
    /// (without its query, which may hold a presigned URL's signature), `offline_bundle.range` (the `Range` asked),
    /// `http.response.status_code`, `offline_bundle.bytes` (body bytes received) and `offline_bundle.attempts` (retries
    /// included). The request carries the trace in its headers (W3C `traceparent` with swift-otel).
    public static let fetchSpanName = "offline-bundle.remote-fetch"
    /// The span of each body a reader starts on (its range, local header and all, or the first 4 MiB of a larger one),
    /// and of each other read that the cache could not answer (an index, a manifest): `offline_bundle.url`,
    /// `offline_bundle.range`, `offline_bundle.bytes` and `offline_bundle.cache_hit` (whether the cache file held all
    /// of it). The fetch spans it caused are its children.
    public static let readSpanName = "offline-bundle.remote-read"

    /// Options with the defaults `packager` uses: 1 GiB of cache, 30 s per request, 3 retries, a read's wait for the
    /// server bound to 10 s, servers that ignore ranges downloaded whole once, and the cache used when the server cannot
    /// be reached.
    public init(
        transport: any RemoteTransport, headers: HTTPFields = [:], cacheDirectory: String? = nil, cacheBytes: UInt64 = 1 << 30,
        timeout: Duration = .seconds(30), retries: Int = 3, wholeObject: WholeObjectAnswer = .download, offlineFromCache: Bool = true,
        readDeadline: Duration = .seconds(10),
        tracer: (any Tracer)? = nil
    ) {
        self.readDeadline = readDeadline
        self.tracer = tracer
        self.transport = transport
        self.headers = headers
        self.cacheDirectory = cacheDirectory
        self.cacheBytes = cacheBytes
        self.timeout = timeout
        self.retries = retries
        self.wholeObject = wholeObject
        self.offlineFromCache = offlineFromCache
    }

    /// Whether `location` names a remote bundle (an `http://` or `https://` URL) rather than a file.
    public static func isRemote(_ location: String) -> Bool {
        let lower = location.prefix(8).lowercased()
        return lower.hasPrefix("http://") || lower.hasPrefix("https://")
    }
}
