/// What a connection (or an HTTP/2 stream's handler) is doing between requests, as a state machine: whether an answer
/// is under way, whether an answer's parts are being written, whether the client half-closed (or the server asked it to
/// quiesce), whether the connection is ending. The handler tells it what happened and asks it what to do; the requests
/// waiting are ``RequestQueue``'s, asked beside it.
struct ConnectionState: Equatable {
    /// Whether the connection goes on.
    enum Phase: Equatable {
        case open
        /// The client half-closed, or a graceful shutdown began: the answers to what it sent still go out, then the
        /// connection closes.
        case inputClosed
        /// A response ended the connection (a 400, `Connection: close`, a failed stream): later requests are not
        /// answered.
        case closing
    }

    /// What to do with a request read whole.
    enum Arrival: Equatable {
        case answer
        /// It waits its turn behind what is under way.
        case wait
    }

    private(set) var phase = Phase.open
    /// An answer is read off the event loop, streamed, or waits (for a replaced bundle, for room): later requests wait,
    /// and the connection is not idle.
    private(set) var answering = false
    /// An answer's parts are being written. A handler in front may report the channel writable from inside one of those
    /// writes (one that flushes on its own, as a TLS coalescer past its buffer does): the requests that wait are then
    /// answered once this answer's writes are done, never between them.
    private(set) var writing = false
    /// Requests were to be resumed while an answer was written: they are, once it is.
    private var resumeDue = false

    var isClosing: Bool { phase == .closing }

    /// Nothing under way: no answer pending or being written, and the connection open to more requests.
    var isQuiet: Bool { phase == .open && !answering && !writing }

    /// Whether a request read now would be answered at once by what this state says (a `100 Continue` is sent only
    /// then).
    var answersAtOnce: Bool { !answering && !writing }

    /// An answer went off the event loop, streams, or waits.
    mutating func answerStarted() { answering = true }

    /// That answer is done (or handed on to be written now).
    mutating func answerEnded() { answering = false }

    /// The client half-closed, or a graceful shutdown began. A connection ending already stays so.
    mutating func inputEnded() { if phase == .open { phase = .inputClosed } }

    /// A response ended the connection.
    mutating func ending() { phase = .closing }

    /// A request read whole: answered now, or it waits behind an answer under way, others waiting (`othersWaiting`),
    /// or a channel that takes no more. One read while an answer is written is taken once that answer's writes are done.
    mutating func arrival(othersWaiting: Bool, writable: Bool) -> Arrival {
        if writing { resumeDue = true }
        return answering || writing || othersWaiting || !writable ? .wait : .answer
    }

    /// Whether the requests waiting may be taken now: not while an answer is written (they are once it is).
    mutating func mayResume() -> Bool {
        guard writing else { return true }
        resumeDue = true
        return false
    }

    /// An answer's writes begin; true for the outermost (writes may nest: an answer written while another's are).
    mutating func writesBegin() -> Bool {
        defer { writing = true }
        return !writing
    }

    /// The writes begun by ``writesBegin()`` (which returned `outermost`) are done; true when the requests waiting are
    /// to be resumed now.
    mutating func writesEnd(outermost: Bool) -> Bool {
        guard outermost else { return false }
        writing = false
        defer { resumeDue = false }
        return resumeDue
    }

    /// Whether a half-closed connection closes now: nothing answers, and nothing waits or is refused (`nothingWaits`).
    func closesAfterInput(nothingWaits: Bool) -> Bool { phase == .inputClosed && !answering && nothingWaits }
}
