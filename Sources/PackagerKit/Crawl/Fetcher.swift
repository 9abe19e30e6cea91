import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Fetches one URL with AsyncHTTPClient, streaming the body to a spool file, retrying what is worth retrying.
///
/// Redirects are not followed here: each hop is a response the crawler
/// records. Connection errors, timeouts, 429 and 5xx are retried with
/// exponential backoff and full jitter, honouring Retry-After up to the
/// declared maximum. A body shorter than its Content-Length, or cut off by
/// the connection, is an error, never a stored body.
final class Fetcher: Sendable {
    /// A response whose body is in a spool file.
    struct Response: Sendable {
        var status: Int
        /// Names lowercased, in received order.
        var headers: [(name: String, value: String)]
        /// The spool file, or nil when the body was empty.
        var bodyPath: String?
        var bodySize: Int64
        var sha256: String
        var fetchedAt: Date
        /// Attempts it took, 1 when the first succeeded.
        var attempts: Int
    }

    /// Why a fetch failed after its retries.
    struct Failure: Error, Sendable {
        var message: String
        /// The last HTTP status seen, when the server answered.
        var status: Int?
        var attempts: Int
    }

    /// Settings the fetcher takes from the declaration.
    struct Settings: Sendable {
        var headers: [Declaration.Header]
        var userAgent: String
        var timeouts: Declaration.Timeouts
        var retries: Declaration.Retries
        var perHost: Int
        var contentEncoding: Declaration.ContentEncodingPolicy
    }

    let client: HTTPClient
    let settings: Settings

    init(settings: Settings) {
        self.settings = settings
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(settings.timeouts.connect * 1000)), read: .milliseconds(Int64(settings.timeouts.request * 1000))),
            connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: settings.perHost),
            decompression: settings.contentEncoding == .decoded ? .enabled(limit: .ratio(1000)) : .disabled
        )
        configuration.httpVersion = .automatic
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    func shutdown() async {
        try? await client.shutdown()
    }

    /// The longest a body may be, so that the total stays within the declared byte limit.
    typealias Budget = @Sendable (_ received: Int64) -> Bool

    /// Fetches `url` into `spoolPath`, with retries.
    ///
    /// - Parameter withinBudget: called as bytes arrive; returning false aborts the fetch as over the byte limit.
    func fetch(_ url: String, method: HTTPMethod = .GET, spoolPath: String, withinBudget: Budget) async -> Result<Response, Failure> {
        var attempt = 0
        while true {
            attempt += 1
            let outcome = await fetchOnce(url, method: method, spoolPath: spoolPath, withinBudget: withinBudget)
            switch outcome {
            case .success(var response):
                if Self.retryable(status: response.status), attempt <= settings.retries.attempts {
                    if let path = response.bodyPath { unlink(path) }
                    let wait = delay(attempt: attempt, retryAfter: response.headers.first { $0.name == "retry-after" }?.value)
                    guard let wait else {
                        return .failure(Failure(message: "HTTP \(response.status), and Retry-After asks for a longer wait than retries.max-backoff", status: response.status, attempts: attempt))
                    }
                    try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
                    continue
                }
                response.attempts = attempt
                return .success(response)
            case .failure(let failure):
                if failure.retryable, attempt <= settings.retries.attempts, let wait = delay(attempt: attempt, retryAfter: nil) {
                    try? await Task.sleep(nanoseconds: UInt64(wait * 1e9))
                    continue
                }
                return .failure(Failure(message: failure.message, status: nil, attempts: attempt))
            }
        }
    }

    static func retryable(status: Int) -> Bool { status == 429 || status == 500 || status == 502 || status == 503 || status == 504 }

    /// Seconds to wait before attempt `attempt + 1`; nil when Retry-After asks for more than the maximum.
    func delay(attempt: Int, retryAfter: String?) -> Double? {
        if let retryAfter, let seconds = Self.retryAfterSeconds(retryAfter) {
            return seconds <= settings.retries.maxBackoff ? seconds : nil
        }
        let ceiling = min(settings.retries.maxBackoff, settings.retries.backoff * pow(2, Double(attempt - 1)))
        // Full jitter: spread retries from many workers so they do not arrive together.
        return Double.random(in: (ceiling / 2)...max(ceiling / 2, ceiling))
    }

    /// Retry-After as delay-seconds or an HTTP-date.
    static func retryAfterSeconds(_ value: String, now: Date = Date()) -> Double? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 { return Double(seconds) }
        guard let date = HTTPDate.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    private struct AttemptFailure: Error {
        var message: String
        var retryable: Bool
    }

    private func fetchOnce(_ url: String, method: HTTPMethod, spoolPath: String, withinBudget: Budget) async -> Result<Response, AttemptFailure> {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "User-Agent", value: settings.userAgent)
        request.headers.add(name: "Accept", value: "*/*")
        request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        for header in settings.headers {
            request.headers.replaceOrAdd(name: header.name, value: header.value)
        }
        let started = Date()
        let deadline = NIODeadline.now() + .milliseconds(Int64(settings.timeouts.request * 1000))
        let spool: SpoolWriter
        do {
            spool = try SpoolWriter(path: spoolPath)
        } catch {
            return .failure(AttemptFailure(message: "\(error)", retryable: false))
        }
        do {
            let response = try await client.execute(request, deadline: deadline)
            let headers = response.headers.map { (name: $0.name.lowercased(), value: $0.value) }
            let expected = response.headers.first(name: "content-length").flatMap { Int64($0) }
            let encoded = response.headers.first(name: "content-encoding").map { !$0.isEmpty && $0.lowercased() != "identity" } ?? false
            for try await chunk in response.body {
                try chunk.withUnsafeReadableBytes { try spool.write($0) }
                guard withinBudget(spool.size) else {
                    spool.discard()
                    return .failure(AttemptFailure(message: "the body passed the declared byte limit (scope.max-bytes) after \(spool.size) bytes", retryable: false))
                }
                if NIODeadline.now() > deadline {
                    spool.discard()
                    return .failure(AttemptFailure(message: "timed out after \(settings.timeouts.request)s while receiving the body", retryable: true))
                }
            }
            // When the body was decoded, Content-Length counts the encoded bytes; otherwise it must match exactly.
            if let expected, method != .HEAD, !(encoded && settings.contentEncoding == .decoded), expected != spool.size {
                spool.discard()
                return .failure(AttemptFailure(message: "the body ended after \(spool.size) of \(expected) bytes (Content-Length)", retryable: true))
            }
            let size = spool.size
            let digest = spool.finish()
            if size == 0 { unlink(spoolPath) }
            return .success(Response(
                status: Int(response.status.code), headers: headers, bodyPath: size == 0 ? nil : spoolPath, bodySize: size, sha256: digest,
                fetchedAt: started, attempts: 1))
        } catch {
            spool.discard()
            return .failure(Self.describe(error))
        }
    }

    /// A sentence for an AsyncHTTPClient or NIO error, and whether another attempt may succeed.
    private static func describe(_ error: any Error) -> AttemptFailure {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout:
                return .init(message: "timed out (\(error))", retryable: true)
            case .remoteConnectionClosed:
                return .init(message: "the server closed the connection before the response was complete", retryable: true)
            case .invalidURL, .emptyHost, .emptyScheme:
                return .init(message: "not a URL that can be fetched (\(error))", retryable: false)
            case .bodyLengthMismatch:
                return .init(message: "the body length did not match Content-Length", retryable: true)
            default:
                return .init(message: "\(error)", retryable: true)
            }
        }
        if let error = error as? PackagerError { return .init(message: error.message, retryable: false) }
        return .init(message: "\(error)", retryable: true)
    }
}

/// HTTP-date parsing (IMF-fixdate, and the obsolete RFC 850 and asctime forms).
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    static func format(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
