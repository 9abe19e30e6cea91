/// Why a request the build side made (crawl, robots.txt, verify, refresh) got no usable answer: a code that callers
/// decide on, the sentence a report prints (made once, where the error is classified), and the error that caused it.
///
/// Shaped as AsyncHTTPClient's `HTTPClientError` and NIO's `FileSystemError`: a code struct over a private
/// enumeration, so codes can be added without breaking a `switch`.
struct FetchError: Error, CustomStringConvertible {
    /// What kind of failure: what retry, down-host memory and advice decide on.
    struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case timeout, cannotConnect, tls, bodyTooLong, truncated, status, notTried, notAsked, local, other
        }

        private let kind: Kind

        /// No answer, or no whole answer, in time.
        static let timeout = Code(kind: .timeout)
        /// No connection could be made: refused, unreachable, the name did not resolve, or connecting timed out.
        static let cannotConnect = Code(kind: .cannotConnect)
        /// The TLS handshake or session failed: the server answered, so it is not down.
        static let tls = Code(kind: .tls)
        /// The body went past a declared limit (`scope.max-body`, `--max-body`).
        static let bodyTooLong = Code(kind: .bodyTooLong)
        /// The answer ended early: the body short of its Content-Length, or the connection closed mid-answer.
        static let truncated = Code(kind: .truncated)
        /// The server answered only with a status worth retrying (429, 5xx), after every retry.
        static let status = Code(kind: .status)
        /// Not tried: the origin could not be reached earlier in the run.
        static let notTried = Code(kind: .notTried)
        /// Not asked: the address policy refuses the URL's address.
        static let notAsked = Code(kind: .notAsked)
        /// A failure on this machine, not the server's: a spool file that cannot be written (a full disk). Its message
        /// names the system's reason and the path.
        static let local = Code(kind: .local)
        /// Anything else (a URL that cannot be fetched, an error of this tool).
        static let other = Code(kind: .other)

        var description: String { "\(kind)" }
    }

    var code: Code
    /// The sentence a report prints, without type names or build paths.
    var message: String
    /// Whether another attempt may succeed.
    var retryable: Bool
    /// The last status the server sent, when it answered.
    var status: Int?
    /// Attempts made (0 when none was).
    var attempts = 0
    /// For ``Code/notAsked``: the address policy's refusal.
    var refusal: AddressPolicy.Refusal?
    /// The error that caused it, when one did (AsyncHTTPClient's, NIO's, BoringSSL's).
    var cause: (any Error)?

    init(
        _ code: Code, _ message: String, retryable: Bool = false, status: Int? = nil, attempts: Int = 0, refusal: AddressPolicy.Refusal? = nil,
        cause: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.retryable = retryable
        self.status = status
        self.attempts = attempts
        self.refusal = refusal
        self.cause = cause
    }

    var description: String { message }
}
