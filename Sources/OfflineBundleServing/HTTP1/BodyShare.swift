import OfflineBundle

/// What one connection holds of the server's budget for request bodies (``BodyBudget``), counted against its client's
/// share: the bytes of the bodies it keeps (the one being read and those of requests waiting their turn), and what the
/// current request's Content-Length reserved ahead and has not yet sent. Every reservation and release goes through it,
/// so what the connection holds is always what it gives back when it goes.
struct BodyShare {
    let budget: BodyBudget
    /// The client's address key (``BodyBudget/clientKey(_:)``), once the channel knows it.
    var client: String?
    /// Bytes of bodies kept.
    private(set) var held = 0
    /// Bytes reserved ahead from the current request's Content-Length and not yet received.
    private(set) var reservedAhead = 0

    init(budget: BodyBudget) { self.budget = budget }

    /// Reserves a body's whole `length` before it is read; false when the budget has no room (a 503 now, not after the
    /// client sent it all).
    mutating func reserveAhead(_ length: Int) -> Bool {
        guard budget.reserve(length, client: client) else { return false }
        reservedAhead += length
        return true
    }

    /// Moves `bytes` of the body being read onto what is held: from what was reserved ahead, else from the budget.
    /// False when the budget has no room.
    mutating func take(_ bytes: Int) -> Bool {
        if reservedAhead >= bytes {
            reservedAhead -= bytes
        } else {
            guard budget.reserve(bytes - reservedAhead, client: client) else { return false }
            reservedAhead = 0
        }
        held += bytes
        return true
    }

    /// The body being read, of `bytes`, is let go (dropped, or its connection closing), with what was reserved ahead.
    mutating func dropBody(of bytes: Int) {
        budget.release(bytes + reservedAhead, client: client)
        held -= bytes
        reservedAhead = 0
    }

    /// The body ended: what its Content-Length reserved and it did not send goes back.
    mutating func bodyEnded() {
        budget.release(reservedAhead, client: client)
        reservedAhead = 0
    }

    /// A kept body of `bytes` was copied out for its answer: the connection holds it no longer.
    mutating func answered(_ bytes: Int) {
        budget.release(bytes, client: client)
        held -= bytes
    }

    /// The connection goes: all it holds goes back.
    mutating func releaseAll() {
        budget.release(held + reservedAhead, client: client)
        held = 0
        reservedAhead = 0
    }
}
