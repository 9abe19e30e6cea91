import NIOCore

/// The requests a connection read and has not yet answered, in order, as a state machine: what may be read next, which
/// request is answered next, and when a request that could not be parsed gets its 400. The handler tells it what
/// happened and does what it returns; whether an answer is under way (`busy`, ``ConnectionState``) and whether the channel takes more
/// (`writable`) come with each question.
///
/// Reading stops past ``maxWaiting`` requests or ``maxBodyBytes`` of their bodies (a client that pipelines without
/// reading its answers holds that much, not the connection's every request), and for good once a request could not
/// be parsed: that one is answered 400, after the answers to those before it, and ends the connection.
struct RequestQueue<Request> {
    /// Requests waiting past which the connection is not read.
    let maxWaiting: Int
    /// Bytes of the waiting requests' bodies past which the connection is not read.
    let maxBodyBytes: Int
    private var waiting = CircularBuffer<Request>()
    private(set) var bodyBytes = 0
    /// A read the channel asked for while reading was held back.
    private(set) var readHeld = false
    /// The request that could not be parsed, behind requests still waiting or being answered.
    private(set) var refused: (method: String, target: String)?

    init(maxWaiting: Int, maxBodyBytes: Int) {
        self.maxWaiting = maxWaiting
        self.maxBodyBytes = maxBodyBytes
    }

    var isEmpty: Bool { waiting.isEmpty }

    /// A request read whole, which waits its turn; `bodyBytes`: the body it keeps.
    mutating func append(_ request: Request, bodyBytes: Int) {
        waiting.append(request)
        self.bodyBytes += bodyBytes
    }

    /// The next request to answer, when one waits and the connection may answer now; `bodyBytes` says what its body
    /// keeps.
    mutating func next(busy: Bool, writable: Bool, bodyBytes size: (Request) -> Int) -> Request? {
        guard !busy, writable, let next = waiting.popFirst() else { return nil }
        bodyBytes -= size(next)
        return next
    }

    /// The channel asks for a read: true to read now; false when reading is held back (the read is remembered).
    mutating func mayRead(writable: Bool) -> Bool {
        guard full || !writable || refused != nil else { return true }
        readHeld = true
        return false
    }

    /// Once answers went out: true when a read held back may go now (it is then no longer held).
    mutating func resumesRead(writable: Bool) -> Bool {
        guard readHeld, !full, writable, refused == nil else { return false }
        readHeld = false
        return true
    }

    private var full: Bool { waiting.count >= maxWaiting || bodyBytes >= maxBodyBytes }

    /// What to do with a request that could not be parsed.
    enum Refusal: Equatable {
        /// Answer it 400 now, and end the connection.
        case now
        /// Its 400 goes after the answers to the requests before it (``refusalDue(busy:)``).
        case afterWaiting
        /// One was refused already: nothing more is read or answered.
        case ignored
    }

    /// A request could not be parsed, while an answer is under way or not (`busy`).
    mutating func refuse(method: String, target: String, busy: Bool) -> Refusal {
        guard refused == nil else { return .ignored }
        guard busy || !waiting.isEmpty else { return .now }
        refused = (method, target)
        return .afterWaiting
    }

    /// The refused request whose 400 is due now (every request before it answered), once.
    mutating func refusalDue(busy: Bool) -> (method: String, target: String)? {
        guard let due = refused, waiting.isEmpty, !busy else { return nil }
        refused = nil
        return due
    }

    /// The connection ends: nothing waits any more.
    mutating func clear() {
        waiting.removeAll()
        bodyBytes = 0
    }
}
