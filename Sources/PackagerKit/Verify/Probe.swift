import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// One entry's requests and the comparison of their answers.
struct Probe: Sendable {
    let options: Verifier.Options
    let client: HTTPClient
    let pacer: Pacer?
    let retryLoop: RetryLoop
    /// Why an origin's certificate is refused (an expired certificate is what a nightly job most often meets).
    var diagnosis = TLSDiagnosis()

    /// The live answer's parts that matter.
    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var sha256: String?
        var attempts: Int
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    struct Unreachable: Error {
        var message: String
        var attempts: Int
    }

    /// The entry's verdict. (An origin no connection could be made to is remembered by the retry loop.)
    func verify(_ recorded: Recorded) async -> EntryVerification {
        var result = EntryVerification(
            url: recorded.url, verdict: .fresh, recordedStatus: recorded.status, liveStatus: nil, method: "", changes: [], error: nil, attempts: 0)
        switch recorded.kind {
        case .substituted:
            result.verdict = .substituted
            result.method = "not probed"
            return result
        case .blocked:
            result.verdict = .blocked
            result.method = "not probed"
            return result
        case .recorded:
            break
        }
        do {
            if (300...399).contains(recorded.status) {
                result.method = "GET"
                let answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                judgeRedirect(recorded, answer, into: &result)
            } else if (400...499).contains(recorded.status) {
                // A recorded client error: fresh while the server still answers the same status.
                result.method = "GET"
                let answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                result.liveStatus = answer.status
                result.attempts = answer.attempts
                if answer.status != recorded.status {
                    result.verdict = .stale
                    result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
                }
            } else if recorded.etag != nil || recorded.lastModified != nil {
                result.method = "conditional GET"
                var conditions: [(String, String)] = []
                if let etag = recorded.etag { conditions.append(("If-None-Match", etag)) }
                if let lastModified = recorded.lastModified { conditions.append(("If-Modified-Since", lastModified)) }
                let answer = try await send(recorded.url, method: .GET, headers: conditions, body: .skip)
                judge(recorded, answer, into: &result, validated: true)
            } else {
                result.method = "HEAD"
                var answer = try await send(recorded.url, method: .HEAD, headers: [], body: .skip)
                if answer.status == 405 || answer.status == 501 {
                    result.method = "GET"
                    answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                }
                if options.deep, (200...299).contains(answer.status) {
                    result.method = "deep GET"
                    // A body longer than the recorded one has changed: reading one byte past its size is enough.
                    answer = try await send(recorded.url, method: .GET, headers: [], body: .hash(limit: (recorded.size ?? 0) + 1))
                }
                judge(recorded, answer, into: &result, validated: false)
            }
        } catch let error as Unreachable {
            result.verdict = .unreachable
            result.error = error.message
            result.attempts = error.attempts
            return result
        } catch {
            result.verdict = .unreachable
            result.error = "\(error)"
        }
        return result
    }

    enum BodyHandling: Equatable {
        case skip
        /// SHA-256 of the body, reading at most `limit` bytes (an endless body is not hashed forever).
        case hash(limit: UInt64)
    }

    /// Sends one request with retries on connection errors, timeouts, 429 and 5xx (``RetryLoop``).
    func send(_ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling) async throws -> Answer {
        // Verify asks for canonical keys: their origin is read off the key, without canonicalizing it again.
        let origin = HTTPOrigin(key: url) ?? HTTPOrigin(url: url)
        let outcome = await retryLoop.run(origin: origin) { _ -> RetryLoop.Attempt<Answer> in
            if let pacer { await pacer.wait() }
            do {
                let answer = try await sendOnce(url, method: method, headers: extra, body: body)
                return .answered(answer, status: answer.status, retryAfter: answer.header("retry-after"))
            } catch {
                var message = HTTPTransport.describe(error)
                if HTTPTransport.isUntrustedCertificate(error), let origin, let reason = await diagnosis.explain(origin) { message = reason }
                return .failed(message: message, retryable: HTTPTransport.isRetryable(error), cannotConnect: HTTPTransport.isConnectFailure(error))
            }
        }
        switch outcome {
        case .answered(var answer, let attempts):
            answer.attempts = attempts
            // Still 429 or 5xx after every retry: the server cannot say whether the entry changed.
            if RetryLoop.retryable(status: answer.status) {
                throw Unreachable(message: "HTTP \(answer.status) after \(attempts) attempts", attempts: attempts)
            }
            return answer
        case .failed(let failure):
            throw Unreachable(message: failure.message, attempts: failure.attempts)
        }
    }

    /// One attempt: the request, and the body read as `body` asks.
    private func sendOnce(_ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.tlsConfiguration = options.tls.requestConfiguration(forURL: url)
        request.headers.add(name: "User-Agent", value: options.userAgent)
        // Identity, so Content-Length and digests compare with the stored (decoded) body.
        request.headers.add(name: "Accept-Encoding", value: "identity")
        // Only the headers declared for this origin.
        for header in options.headerRules.headers(forURL: url) { request.headers.replaceOrAdd(name: header.name, value: header.value) }
        for (name, value) in extra { request.headers.replaceOrAdd(name: name, value: value) }
        let response = try await client.execute(request, timeout: .milliseconds(Int64(options.timeouts.request * 1000)))
        var digest: String?
        if case .hash(let limit) = body {
            var hasher = SHA256()
            var received: UInt64 = 0
            let deadline = NIODeadline.now() + .milliseconds(Int64(options.timeouts.request * 1000))
            for try await chunk in response.body {
                received += UInt64(chunk.readableBytes)
                if received > limit {
                    digest = "more than \(limit - 1) bytes"
                    break
                }
                guard NIODeadline.now() <= deadline else { throw HTTPClientError.deadlineExceeded }
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            }
            if digest == nil { digest = hexString(Array(hasher.finalize())) }
        } else {
            // The body is not needed: stop reading it (the connection is closed if it was not empty).
            for try await _ in response.body { break }
        }
        return Answer(status: Int(response.status.code), headers: response.headers, sha256: digest, attempts: 1)
    }
}
