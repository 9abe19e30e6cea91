import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import OfflineBundle

/// Fetches one URL with AsyncHTTPClient, keeping the body in memory or a spool file, retrying what is worth retrying.
///
/// Redirects are not followed here: each hop is a response the crawler
/// records. Connection errors, timeouts, 429 and 5xx are retried with
/// exponential backoff and full jitter, honouring Retry-After up to the
/// declared maximum. A body shorter than its Content-Length, or cut off by
/// the connection, is an error, never a stored body.
final class Fetcher: Sendable {
    /// Where a received body is kept.
    enum Body: Sendable {
        case none
        /// Small bodies, within the crawl's memory budget.
        case memory(Data)
        /// Larger ones, or any once the budget is spent: a spool file.
        case file(String)
    }

    /// A response and its body.
    struct Response: Sendable {
        var status: Int
        /// Names lowercased, in received order.
        var headers: [(name: String, value: String)]
        var body: Body
        var bodySize: Int64
        var fetchedAt: Date
        /// Attempts it took, 1 when the first succeeded.
        var attempts: Int
        /// The protocol the answer came over: `HTTP/2`, `HTTP/1.1`.
        var httpVersion = "HTTP/1.1"
    }

    /// Settings the fetcher takes from the declaration.
    struct Settings: Sendable {
        /// Which declared headers go to which origin.
        var headerRules: RequestHeaderRules
        var userAgent: String
        var timeouts: Declaration.Timeouts
        var retries: Declaration.Retries
        var perHost: Int
        var contentEncoding: Declaration.ContentEncodingPolicy
        var tls: TLSSettings

        init(
            headerRules: RequestHeaderRules, userAgent: String, timeouts: Declaration.Timeouts, retries: Declaration.Retries, perHost: Int,
            contentEncoding: Declaration.ContentEncodingPolicy, tls: TLSSettings = .system
        ) {
            self.tls = tls
            self.headerRules = headerRules
            self.userAgent = userAgent
            self.timeouts = timeouts
            self.retries = retries
            self.perHost = perHost
            self.contentEncoding = contentEncoding
        }

        /// The settings a declaration gives.
        init(_ declaration: Declaration) {
            self.init(
                headerRules: RequestHeaderRules(declaration), userAgent: declaration.userAgent, timeouts: declaration.timeouts,
                retries: declaration.retries, perHost: declaration.concurrency.perHost, contentEncoding: declaration.contentEncoding,
                tls: TLSSettings(declaration))
        }
    }

    let client: HTTPClient
    let settings: Settings
    /// Origins that refused every attempt: their other URLs fail at once.
    let downHosts: DownHosts
    let retryLoop: RetryLoop
    /// Why an origin's certificate is refused, asked once per origin.
    let diagnosis = TLSDiagnosis()

    init(settings: Settings, downHosts: DownHosts = DownHosts()) {
        self.settings = settings
        self.downHosts = downHosts
        retryLoop = RetryLoop(retries: settings.retries, downHosts: downHosts)
        client = HTTPTransport.makeClient(
            timeouts: settings.timeouts, perHost: settings.perHost, decompress: settings.contentEncoding == .decoded, tls: settings.tls)
    }

    func shutdown() async {
        try? await client.shutdown()
    }

    /// Whether a body of this many bytes so far may go on (within `scope.max-body` and the declared byte limit).
    typealias WithinLimit = @Sendable (_ received: Int64) -> Bool

    /// Fetches `url` into `spoolPath`, with retries.
    ///
    /// - Parameter withinBudget: called as bytes arrive; returning false aborts the fetch as over the byte limit.
    func fetch(
        _ url: String, method: HTTPMethod = .GET, headers: [(name: String, value: String)] = [], body: Data? = nil, spoolPath: String,
        memory: MemoryBudget? = nil, withinBudget: WithinLimit, limitName: String = "the declared byte limit (scope.max-bytes)"
    ) async -> Result<Response, FetchError> {
        let origin = HTTPOrigin(url: url)
        let discard = { (response: Response) in response.discard(returningTo: memory) }
        let outcome = await retryLoop.run(origin: origin, discard: discard) { _ in
            switch await fetchOnce(
                url, origin: origin, method: method, headers: headers, body: body, spoolPath: spoolPath, memory: memory, withinBudget: withinBudget,
                limitName: limitName)
            {
            case .success(let response):
                return .answered(response, status: response.status, retryAfter: response.headers.first { $0.name == "retry-after" }?.value)
            case .failure(let error):
                return .failed(error)
            }
        }
        switch outcome {
        case .answered(var response, let attempts):
            response.attempts = attempts
            return .success(response)
        case .failed(let error):
            return .failure(error)
        }
    }

    private func fetchOnce(
        _ url: String, origin: HTTPOrigin?, method: HTTPMethod, headers extra: [(name: String, value: String)], body: Data?, spoolPath: String,
        memory: MemoryBudget?, withinBudget: WithinLimit, limitName: String
    ) async -> Result<Response, FetchError> {
        let request = HTTPTransport.request(
            url, method: method, body: body, tls: settings.tls, userAgent: settings.userAgent, accept: "*/*",
            declared: origin.map(settings.headerRules.headers(for:)) ?? [], extra: extra)
        let started = Date()
        let deadline = NIODeadline.now() + .milliseconds(Int64(settings.timeouts.request * 1000))
        let sink = BodySink(spoolPath: spoolPath, memory: memory)
        do {
            let response = try await client.execute(request, deadline: deadline)
            let headers = response.headers.map { (name: $0.name.lowercased(), value: $0.value) }
            let expected = response.headers.first(name: "content-length").flatMap { Int64($0) }
            // Only gzip and deflate are decoded by the client; any other coding (x-gzip, br) stays in the bytes.
            let decodedByClient =
                settings.contentEncoding == .decoded
                && response.headers.first(name: "content-encoding").map { ["gzip", "deflate"].contains($0.lowercased()) } == true
            for try await chunk in response.body {
                try chunk.withUnsafeReadableBytes { try sink.write($0) }
                guard withinBudget(sink.size) else {
                    sink.discard()
                    return .failure(FetchError(.bodyTooLong, "body longer than \(limitName)"))
                }
                if NIODeadline.now() > deadline {
                    sink.discard()
                    return .failure(FetchError(.timeout, "timed out after \(settings.timeouts.request)s while receiving the body", retryable: true))
                }
            }
            // When the body was decoded, Content-Length counts the encoded bytes; otherwise it must match exactly.
            if let expected, method != .HEAD, !decodedByClient, expected != sink.size {
                sink.discard()
                return .failure(FetchError(.truncated, "the body ended after \(sink.size) of \(expected) bytes (Content-Length)", retryable: true))
            }
            let size = sink.size
            let version = response.version.major >= 2 ? "HTTP/\(response.version.major)" : "HTTP/\(response.version.major).\(response.version.minor)"
            return .success(
                Response(
                    status: Int(response.status.code), headers: headers, body: sink.finish(), bodySize: size, fetchedAt: started, attempts: 1,
                    httpVersion: version))
        } catch {
            sink.discard()
            var failure = HTTPTransport.fetchError(error)
            // "Not trusted" has many causes; the certificate itself says which (expired, self-signed, an unknown CA).
            if HTTPTransport.isUntrustedCertificate(error), let origin, let reason = await diagnosis.explain(origin) { failure.message = reason }
            return .failure(failure)
        }
    }

}

extension Fetcher.Response {
    /// The SHA-256 of the body as received, read from its spool file in chunks (a body of any size costs a chunk of
    /// memory); nil when the spool file cannot be read.
    func bodyDigest() -> [UInt8]? {
        var hasher = SHA256()
        switch body {
        case .none: break
        case .memory(let data): hasher.update(data: data)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
            defer { try? handle.close() }
            while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        }
        return Array(hasher.finalize())
    }

    /// The body's bytes (read from its spool file when it has one).
    func bodyBytes() -> [UInt8] {
        switch body {
        case .none: return []
        case .memory(let data): return [UInt8](data)
        case .file(let path): return [UInt8](FileManager.default.contents(atPath: path) ?? Data())
        }
    }

    /// Deletes the spool file, or gives an in-memory body's bytes back to the budget they were taken from.
    func discard(returningTo memory: MemoryBudget?) {
        switch body {
        case .file(let path): unlink(path)
        case .memory(let data): memory?.give(data.count)
        case .none: break
        }
    }
}

/// Receives one body: in memory while it is small and the budget allows, in a spool file otherwise.
final class BodySink {
    private let spoolPath: String
    private let memory: MemoryBudget?
    private var buffer: [UInt8] = []
    private var taken = 0
    private var spool: SpoolWriter?
    private(set) var size: Int64 = 0

    init(spoolPath: String, memory: MemoryBudget?) {
        self.spoolPath = spoolPath
        self.memory = memory
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        size += Int64(bytes.count)
        if spool == nil, let memory, buffer.count + bytes.count <= memory.perBody, memory.take(bytes.count) {
            buffer.append(contentsOf: bytes)
            taken += bytes.count
            return
        }
        if spool == nil {
            let writer = try SpoolWriter(path: spoolPath)
            try buffer.withUnsafeBytes { try writer.write($0) }
            memory?.give(taken)
            taken = 0
            buffer = []
            spool = writer
        }
        try spool?.write(bytes)
    }

    /// The body as received; its memory stays taken from the budget until the bundle is written.
    func finish() -> Fetcher.Body {
        if let spool {
            spool.finish()
            return .file(spoolPath)
        }
        return buffer.isEmpty ? .none : .memory(Data(buffer))
    }

    func discard() {
        spool?.discard()
        memory?.give(taken)
        taken = 0
        buffer = []
    }
}
