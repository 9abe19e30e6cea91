import NIOCore

/// An HTTP/2 connection's turns for large bodies (those read off the event loop), shared by its streams' handlers, on
/// the connection's event loop: at most `limit` read and send at once, the others wait in order. A stream holds its
/// body's first chunks and the one in flight, so a connection holds `limit` times that, however many streams it opens.
///
/// A stream that holds a turn and makes no progress for ``stallPeriod`` gives it to the next one (a browser stops
/// reading a video's stream once its buffer is full, and other answers must not wait for it), while fewer than
/// ``stalledLimit`` are stalled so: a connection holds the chunks of `limit + stalledLimit` bodies at most.
///
/// It also bounds the kept answers' bodies a connection has in flight (``keptLimit``), which go out as the response
/// cache's own buffers.
final class BodyGate: Sendable {
    let limit: Int
    let stalledLimit: Int
    let stallPeriod: TimeAmount
    let loop: any EventLoop
    /// What the gate counts, reachable only on `loop` (every stream of a connection runs on the connection's event loop;
    /// the box checks it).
    private let state: NIOLoopBoundBox<State>

    private struct State {
        var active = 0
        var stalled = 0
        var waiting = CircularBuffer<@Sendable () -> Void>()
        var keptInFlight = 0
        var keptWaiting = CircularBuffer<@Sendable () -> Void>()
    }

    init(limit: Int, stalledLimit: Int = 4, stallPeriod: TimeAmount, loop: any EventLoop) {
        self.limit = limit
        self.stalledLimit = stalledLimit
        self.stallPeriod = stallPeriod
        self.loop = loop
        state = NIOLoopBoundBox(State(), eventLoop: loop)
    }

    /// A holder that made no progress gives its turn to the next, if fewer than `stalledLimit` are stalled; true when
    /// it did (it then counts as stalled until ``unstall()``).
    func stall() -> Bool {
        guard state.value.stalled < stalledLimit else { return false }
        state.value.stalled += 1
        leave()
        return true
    }

    /// A stalled holder's answer ended.
    func unstall() { state.value.stalled -= 1 }

    /// Runs `go` now when a turn is free, else once one is given back (on the loop, never inside `leave`).
    func enter(_ go: @escaping @Sendable () -> Void) {
        if state.value.active < limit {
            state.value.active += 1
            go()
        } else {
            state.value.waiting.append(go)
        }
    }

    /// Gives a turn back: to the first waiting, or free.
    func leave() {
        if let next = state.value.waiting.popFirst() {
            loop.execute(next)
        } else {
            state.value.active -= 1
        }
    }

    /// The most bytes of kept answers' bodies (the response cache's own buffers, sent without a copy) written on the
    /// connection and not yet taken by the socket, past the first such answer. A client whose windows take nothing holds
    /// them in NIO's flow-control buffers, and the cache's budget stops counting them once it lets those answers go: a
    /// connection asking again and again for answers the cache then replaced would hold a copy of each. Past it, the
    /// next kept answer waits until the socket took some (``whenKeptFits(_:)``), holding nothing meanwhile; a client
    /// that never reads is then closed by the idle timeout. (The limit is the largest body the cache keeps, so a kept
    /// answer always goes when none is in flight.) A client that leaves one stream's window shut while it reads others
    /// holds later kept answers of that connection until it reads that stream or closes it: browsers ask media, which
    /// they pause, with Range requests, which are never answered from the cache.
    static let keptLimit = ResponseCache.maxBody

    /// Whether a kept body of `bytes` may go out now without a copy (always when none is in flight: no kept body is larger
    /// than the limit).
    func mayWriteKept(_ bytes: Int) -> Bool { state.value.keptInFlight + bytes <= Self.keptLimit }

    /// Writes `data` (a kept body of `bytes`) through `context`, counting it in flight until the write completes.
    func writeKept(_ data: NIOAny, bytes: Int, context: ChannelHandlerContext) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.write(data, promise: written)
        holdKept(bytes, until: written.futureResult)
    }

    /// Counts `bytes` of a kept body as in flight until `written` completes; then the answers that waited try again.
    func holdKept(_ bytes: Int, until written: EventLoopFuture<Void>) {
        state.value.keptInFlight += bytes
        written.whenComplete { _ in
            self.state.value.keptInFlight -= bytes
            // Each tries again in order, on the loop; one that still finds no room waits again, behind a write whose
            // completion wakes it.
            while let next = self.state.value.keptWaiting.popFirst() { self.loop.execute(next) }
        }
    }

    /// Runs `go` once kept bytes in flight complete (called when ``mayWriteKept(_:)`` said no, so some are).
    func whenKeptFits(_ go: @escaping @Sendable () -> Void) { state.value.keptWaiting.append(go) }
}
