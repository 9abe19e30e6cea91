import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import OfflineBundle

/// The one AsyncHTTPClient configuration and the one reading of transport errors that crawl, verify and refresh share.
enum HTTPTransport {
    /// A client that follows no redirect (each hop is the caller's to judge), traces nothing, and fails a request as
    /// soon as its connection cannot be made, so the caller's own retries and backoff decide what happens next.
    static func makeClient(timeouts: Declaration.Timeouts, perHost: Int, decompress: Bool, tls: TLSSettings = .system) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls.configuration(),
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(timeouts.connect * 1000)), read: .milliseconds(Int64(timeouts.request * 1000))),
            connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: perHost),
            decompression: decompress ? .enabled(limit: .ratio(1000)) : .disabled
        )
        configuration.httpVersion = .automatic
        // AsyncHTTPClient otherwise keeps re-dialling a refused port until the connect timeout (40 s for a
        // link to a closed port with the default retries); one refused dial is one failed attempt.
        configuration.connectionPool.retryConnectionEstablishment = false
        // No tracing: with the default (no-op) tracer, every request still builds a span and parses its URL again.
        configuration.tracing.tracer = nil
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// A request as crawl, verify and refresh send it: its body, the TLS configuration for its origin (a client
    /// certificate goes only to the origins it is declared for), `User-Agent`, the codings the crawl accepts (so that a
    /// server that compresses selects the representation whose validators the bundle recorded; the client decodes
    /// them), then the headers declared for its origin, and `extra` (a declared request's own) over those.
    static func request(
        _ url: String, method: HTTPMethod, body: Data?, tls: TLSSettings, userAgent: String, accept: String? = nil, declared: [Declaration.Header],
        extra: [(name: String, value: String)]
    ) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        request.tlsConfiguration = tls.requestConfiguration(forURL: url)
        request.headers.add(name: "User-Agent", value: userAgent)
        if let accept { request.headers.add(name: "Accept", value: accept) }
        request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        for header in declared { request.headers.replaceOrAdd(name: header.name, value: header.value) }
        for header in extra { request.headers.replaceOrAdd(name: header.name, value: header.value) }
        return request
    }

    /// The errno values that mean no connection could be made at all.
    static let connectErrors: Set<Int32> = [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT, EADDRNOTAVAIL]

    /// Whether the error means no connection was made (as opposed to one that failed mid-answer, say by a reset).
    static func isConnectFailure(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError, error == .connectTimeout { return true }
        if let error = error as? IOError { return connectErrors.contains(error.errnoCode) }
        // Every address of the host was tried and none connected (or the name did not resolve).
        return error is NIOConnectionError
    }

    /// A sentence for a TLS failure, or nil when `error` is not one. The server answered: it is not down.
    static func describeTLS(_ error: any Error) -> String? {
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return "TLS: name mismatch: the server's certificate is not for this host name"
        }
        // In TLS 1.3 the server refuses a missing client certificate after the handshake, as an alert on the first read.
        if let error = error as? BoringSSLError {
            let text = "\(error)"
            if text.contains("CERTIFICATE_REQUIRED") {
                return "TLS: the server requires a client certificate (none is declared for this origin: tls.client-cert, tls.client-cert-origins)"
            }
            if text.contains("ALERT") { return "TLS: the server ended the connection with an alert (it may require a client certificate)" }
            return "TLS: the connection failed"
        }
        guard let error = error as? NIOSSLError else { return nil }
        switch error {
        case .handshakeFailed(let underlying):
            let text = "\(underlying)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return "TLS: the server's certificate is not trusted (self-signed, signed by a CA this machine does not trust, "
                    + "or expired; add its CA with tls.ca-file or --ca-file)"
            }
            if text.contains("WRONG_VERSION_NUMBER") { return "TLS: the server did not answer in TLS (is it plain http?)" }
            if text.contains("CERTIFICATE_REQUIRED") {
                return "TLS: the server requires a client certificate (none is declared for this origin: tls.client-cert, tls.client-cert-origins)"
            }
            if text.contains("HANDSHAKE_FAILURE") {
                return "TLS: the handshake failed (the server may require a client certificate)"
            }
            return "TLS: the handshake failed"
        case .uncleanShutdown:
            return "TLS: the server closed the connection without a TLS close"
        default:
            return "TLS: \(error)"
        }
    }

    /// Whether `error` is a certificate that failed verification (BoringSSL says no more than that).
    static func isUntrustedCertificate(_ error: any Error) -> Bool {
        guard let error = error as? NIOSSLError, case .handshakeFailed(let underlying) = error else { return false }
        return "\(underlying)".contains("CERTIFICATE_VERIFY_FAILED")
    }

    /// A sentence for an AsyncHTTPClient or NIO error, without type names or build paths.
    static func describe(_ error: any Error) -> String {
        if let tls = describeTLS(error) { return tls }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "cannot connect: timed out"
            case .deadlineExceeded, .readTimeout, .writeTimeout: return "timed out"
            case .remoteConnectionClosed: return "the server closed the connection before the response was complete"
            case .bodyLengthMismatch: return "the body length did not match Content-Length"
            case .invalidURL, .emptyHost, .emptyScheme: return "not a URL that can be fetched"
            default: return "\(error)"
            }
        }
        if let error = error as? IOError {
            let reason = SystemCallError(error.errnoCode).description
            return connectErrors.contains(error.errnoCode) ? "cannot connect: " + reason : "connection error: " + reason
        }
        if let error = error as? NIOConnectionError {
            if let dns = error.dnsAAAAError ?? error.dnsAError {
                // The resolver's own words, without NIO's type name.
                if let unknown = dns as? SocketAddressError.UnknownHost {
                    return "cannot connect: the host name \(unknown.host) did not resolve: \(unknown.errorDescription.lowercased())"
                }
                return "cannot connect: the host name did not resolve (\(dns))"
            }
            let reasons = error.connectionErrors.map { describe($0.error) }
            return reasons.first ?? "cannot connect"
        }
        return "\(error)"
    }

    /// `error` (AsyncHTTPClient's, NIO's, BoringSSL's, this tool's) as a fetch error: its code, its sentence, whether
    /// another attempt may succeed, and the error itself as the cause.
    static func fetchError(_ error: any Error) -> FetchError {
        if let error = error as? FetchError { return error }
        // This machine's failure (a spool file on a full disk): the system's reason and the path, never the server's fault.
        if let error = error as? PackagerError { return FetchError(error.code == .io ? .local : .other, error.description, cause: error) }
        let code: FetchError.Code
        if describeTLS(error) != nil {
            code = .tls
        } else if isConnectFailure(error) {
            code = .cannotConnect
        } else if let client = error as? HTTPClientError, [.deadlineExceeded, .readTimeout, .writeTimeout].contains(client) {
            code = .timeout
        } else if let client = error as? HTTPClientError, [.remoteConnectionClosed, .bodyLengthMismatch].contains(client) {
            code = .truncated
        } else {
            code = .other
        }
        return FetchError(code, describe(error), retryable: isRetryable(error), cause: error)
    }

    /// Whether another attempt may succeed after `error`.
    static func isRetryable(_ error: any Error) -> Bool {
        // A certificate that is not trusted now will not be trusted on the next attempt.
        if error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError { return false }
        if let error = error as? HTTPClientError {
            switch error {
            case .invalidURL, .emptyHost, .emptyScheme: return false
            default: return true
            }
        }
        return !(error is PackagerError)
    }
}

/// Origins no connection could be made to after every retry, remembered for the rest of a run so their other URLs
/// fail at once instead of each waiting through the same retries.
final class DownHosts: Sendable {
    private let reasons = NIOLockedValueBox<[HTTPOrigin: String]>([:])

    /// Why `origin` is down, or nil when it is not known to be.
    func reason(_ origin: HTTPOrigin) -> String? { reasons.withLockedValue { $0[origin] } }

    /// Remembers `origin` as down (the first reason stays).
    func mark(_ origin: HTTPOrigin, because reason: String) {
        reasons.withLockedValue { if $0[origin] == nil { $0[origin] = reason } }
    }

    /// Requests to each origin that timed out after every retry since it last answered.
    private let timeouts = NIOLockedValueBox<[HTTPOrigin: Int]>([:])

    /// Counts one more request to `origin` that timed out after every retry; returns how many in a row.
    func timedOut(_ origin: HTTPOrigin) -> Int {
        timeouts.withLockedValue {
            $0[origin, default: 0] += 1
            return $0[origin]!
        }
    }

    /// `origin` answered: its run of timeouts ends.
    func answered(_ origin: HTTPOrigin) {
        timeouts.withLockedValue { if $0[origin] != nil { $0[origin] = nil } }
    }
}
