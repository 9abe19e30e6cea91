import Foundation
import OfflineBundle

/// The one retry loop for every request the build side makes (crawl, robots.txt, verify, refresh).
///
/// Connection errors and timeouts, and the statuses 429, 500, 502, 503 and 504, are retried with exponential
/// backoff and equal jitter (a random wait between half the ceiling and all of it); `Retry-After` (seconds or an HTTP date) is honoured when it is no longer than
/// `retries.max-backoff`. An origin no connection could be made to after every attempt is remembered in
/// ``DownHosts``, and its later requests fail at once as "not tried".
struct RetryLoop: Sendable {
    let retries: Declaration.Retries
    let downHosts: DownHosts
    /// When set, an origin whose requests time out after every retry this many times in a row (no answer between)
    /// is remembered as down too: a server that accepts connections and never answers would otherwise cost every
    /// entry its timeouts. Verify sets it; a crawl does not.
    var timeoutsBeforeDown: Int? = nil

    /// What one attempt came to.
    enum Attempt<Answer> {
        /// The server answered; `status` and `retryAfter` decide whether to try again.
        case answered(Answer, status: Int, retryAfter: String?)
        /// No answer.
        case failed(FetchError)
    }

    /// What all the attempts came to.
    enum Outcome<Answer> {
        /// An answer: a status worth keeping, or a retryable one when the retries ran out.
        case answered(Answer, attempts: Int)
        /// No answer worth keeping after every attempt; ``FetchError/attempts`` says how many were made.
        case failed(FetchError)
    }

    static func retryable(status: Int) -> Bool { status == 429 || status == 500 || status == 502 || status == 503 || status == 504 }

    /// Runs `attempt` (given the attempt number, from 1) until it gives an answer worth keeping or the retries run
    /// out; `discard` is called with each answer that is thrown away for another attempt.
    func run<Answer>(
        origin: HTTPOrigin?, discard: (Answer) -> Void = { _ in }, _ attempt: (Int) async -> Attempt<Answer>
    ) async -> Outcome<Answer> {
        var number = 0
        while true {
            number += 1
            if let origin, let down = downHosts.reason(origin) {
                return .failed(FetchError(.notTried, "not tried: \(down)", attempts: number - 1))
            }
            switch await attempt(number) {
            case .answered(let answer, let status, let retryAfter):
                if timeoutsBeforeDown != nil, let origin { downHosts.answered(origin) }
                guard Self.retryable(status: status), number <= retries.attempts else { return .answered(answer, attempts: number) }
                discard(answer)
                guard let wait = delay(attempt: number, retryAfter: retryAfter) else {
                    return .failed(
                        FetchError(.status, "HTTP \(status), and Retry-After asks for a longer wait than retries.max-backoff", status: status, attempts: number)
                    )
                }
                await Self.sleep(wait)
            case .failed(var error):
                if error.retryable, number <= retries.attempts, let wait = delay(attempt: number, retryAfter: nil) {
                    await Self.sleep(wait)
                    continue
                }
                // No connection after every attempt: the origin is down for the rest of the run.
                if error.code == .cannotConnect, let origin { downHosts.mark(origin, because: "\(origin) could not be reached (\(error.message))") }
                if let limit = timeoutsBeforeDown, let origin, error.code == .timeout, downHosts.timedOut(origin) >= limit {
                    downHosts.mark(origin, because: "\(origin) did not answer in time (\(limit) requests in a row timed out after every retry)")
                }
                error.attempts = number
                return .failed(error)
            }
        }
    }

    /// Seconds to wait before attempt `attempt + 1`; nil when Retry-After asks for more than the maximum.
    func delay(attempt: Int, retryAfter: String?) -> Double? {
        if let retryAfter, let seconds = Self.retryAfterSeconds(retryAfter) {
            return seconds <= retries.maxBackoff ? seconds : nil
        }
        let ceiling = min(retries.maxBackoff, retries.backoff * pow(2, Double(attempt - 1)))
        // Equal jitter: spread retries from many workers so they do not arrive together, never waiting under half.
        return Double.random(in: (ceiling / 2)...max(ceiling / 2, ceiling))
    }

    /// Retry-After as delay-seconds or an HTTP-date.
    static func retryAfterSeconds(_ value: String, now: Date = Date()) -> Double? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed), seconds >= 0 { return Double(seconds) }
        guard let date = HTTPDates.parse(trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    private static func sleep(_ seconds: Double) async {
        try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
    }
}
