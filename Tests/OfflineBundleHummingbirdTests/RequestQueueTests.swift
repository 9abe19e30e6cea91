import Testing

@testable import OfflineBundleServing

/// A connection's queue of requests read and not yet answered, alone: when it reads, what it answers next, and when a
/// request it could not parse gets its 400.
@Suite("a connection's queue of requests")
struct RequestQueueTests {
    @Test("reading is held back past the waiting requests' count or their bodies' bytes, or while the channel takes nothing, and resumes once answers went")
    func readsHeldAndResumed() {
        var queue = RequestQueue<Int>(maxWaiting: 2, maxBodyBytes: 100)
        let size = { (request: Int) in request == 3 ? 100 : 0 }
        var steps: [String] = []
        func step(_ name: String, _ value: some CustomStringConvertible) { steps.append("\(name) \(value)") }
        step("read", queue.mayRead(writable: true))
        step("read unwritable", queue.mayRead(writable: false))
        step("resumes", queue.resumesRead(writable: true))
        queue.append(1, bodyBytes: 0)
        queue.append(2, bodyBytes: 0)
        step("read with 2 waiting", queue.mayRead(writable: true))
        // Not while an answer is under way, nor while the channel takes nothing: the request waits.
        step("next busy", queue.next(busy: true, writable: true, bodyBytes: size).map(String.init) ?? "-")
        step("next unwritable", queue.next(busy: false, writable: false, bodyBytes: size).map(String.init) ?? "-")
        step("resumes", queue.resumesRead(writable: true))
        step("next", queue.next(busy: false, writable: true, bodyBytes: size).map(String.init) ?? "-")
        step("resumes", queue.resumesRead(writable: true))
        // A body at the bound holds reading back too, until its request is answered.
        queue.append(3, bodyBytes: 100)
        step("read with a large body waiting", queue.mayRead(writable: true))
        step("next", queue.next(busy: false, writable: true, bodyBytes: size).map(String.init) ?? "-")
        step("resumes", queue.resumesRead(writable: true))
        step("next", queue.next(busy: false, writable: true, bodyBytes: size).map(String.init) ?? "-")
        step("resumes", queue.resumesRead(writable: true))
        #expect(
            steps == [
                "read true", "read unwritable false", "resumes true", "read with 2 waiting false", "next busy -", "next unwritable -", "resumes false",
                "next 1", "resumes true", "read with a large body waiting false", "next 2", "resumes false", "next 3", "resumes true",
            ])
        #expect(queue.isEmpty && queue.bodyBytes == 0)
    }

    @Test("a request that could not be parsed: 400 now when nothing is before it, else after the answers before it; then nothing more is read")
    func refusal() {
        var idle = RequestQueue<Int>(maxWaiting: 16, maxBodyBytes: 100)
        let now = idle.refuse(method: "GET", target: "/a", busy: false)
        #expect(now == .now)
        var behind = RequestQueue<Int>(maxWaiting: 16, maxBodyBytes: 100)
        behind.append(1, bodyBytes: 0)
        let after = behind.refuse(method: "GET", target: "/b", busy: false)
        let again = behind.refuse(method: "GET", target: "/c", busy: false)
        let reads = behind.mayRead(writable: true)
        let early = behind.refusalDue(busy: false)
        let first = behind.next(busy: false, writable: true, bodyBytes: { _ in 0 })
        let whileBusy = behind.refusalDue(busy: true)
        let due = behind.refusalDue(busy: false)
        let twice = behind.refusalDue(busy: false)
        #expect(after == .afterWaiting && again == .ignored && !reads)
        #expect(early == nil && first == 1 && whileBusy == nil && due?.target == "/b" && twice == nil)
    }
}
