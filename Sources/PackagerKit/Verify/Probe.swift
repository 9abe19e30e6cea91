import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// One entry's requests and the comparison of their answers.
///
/// Validators are the cheap path: a conditional GET answered 304, or 200 with the same validators, is fresh. A
/// validator that differs does not prove the content differs (servers rewrite ETags when they compress, and an ETag
/// names a representation, not the bytes: RFC 9110 §8.8.3), so unless ``Verifier/Options/shallow`` is set the body of
/// that same answer is read and hashed, and the content decides.
struct Probe: Sendable {
    let options: Verifier.Options
    let client: HTTPClient
    let pacer: Pacer?
    let retryLoop: RetryLoop
    /// The bundle: its stored pages are read when a changed page's links are compared with the live one's.
    let bundle: MountedBundle
    /// Which addresses may be asked (the crawl's policy: a bundle's keys cannot send the nightly job to internal
    /// services the build would have refused).
    let addresses: AddressPolicy
    /// Why an origin's certificate is refused (an expired certificate is what a nightly job most often meets).
    var diagnosis = TLSDiagnosis()

    /// The live answer's parts that matter.
    struct Answer {
        var status: Int
        var headers: HTTPFields
        /// Whether the body was read (and hashed, unless it was ``longer``).
        var bodyRead = false
        /// SHA-256 of the decoded body, when it was read whole.
        var sha256: String?
        /// The body went past the recorded size: it differs, and was not hashed.
        var longer = false
        /// The decoded body, when it was read and kept (pages whose links may be compared).
        var body: [UInt8]?
        var attempts: Int
        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
    }

    /// The entry's verdict. (An origin no connection could be made to is remembered by the retry loop.)
    func verify(_ recorded: Recorded) async -> EntryVerification {
        var result = EntryVerification(
            url: recorded.key, verdict: .fresh, recordedStatus: recorded.status, liveStatus: nil, method: "", changes: [], error: nil, attempts: 0)
        switch recorded.kind {
        case .substituted:
            result.verdict = .substituted
            result.method = EntryVerification.notProbed
            if options.checkSubstituted { await checkRemote(of: recorded, into: &result) }
            return result
        case .blocked:
            result.verdict = .blocked
            result.method = EntryVerification.notProbed
            return result
        case .recorded:
            break
        }
        // A request that may change the server (POST, PUT, PATCH, DELETE…) is not sent again unless asked.
        if recorded.method != "GET" && !options.resendUnsafe {
            result.verdict = .unverifiable
            result.method = EntryVerification.notProbed
            result.error = "not sent again: a \(recorded.method) may change the server"
            result.advice = "pass --resend-unsafe to send it again and compare its answer"
            return result
        }
        if let problem = recorded.unsendable {
            result.verdict = .unverifiable
            result.method = EntryVerification.notProbed
            result.error = problem
            return result
        }
        let sending = recorded.request?.sending(url: recorded.url, declared: options.declaredRequests, rules: recorded.rules)
        // A header the declaration gives its origin (a credential under `headers:`) is sent all the same (``send(_:method:headers:body:requestBody:)``).
        let given = Set(options.headerRules.headers(forURL: recorded.url).map { $0.name.lowercased() })
        if let missing = sending?.missing.filter({ !given.contains($0) }), !missing.isEmpty {
            // Sent without its credential, the request would get another answer (an anonymous one, a 401).
            result.verdict = .unverifiable
            result.method = EntryVerification.notProbed
            result.error = "not sent: the value of \(missing.joined(separator: ", ")) is a secret the bundle does not keep"
            result.advice = "give --declaration with the request (or its origin's headers), whose ${ENV} values are sent"
            return result
        }
        let asked = sending?.headers ?? []
        do {
            if (300...399).contains(recorded.status) {
                result.method = recorded.method
                let answer = try await send(recorded, headers: asked, body: .skip)
                judgeRedirect(recorded, answer, into: &result)
            } else if (400...499).contains(recorded.status) {
                // A recorded client error: fresh while the server still answers the same status.
                result.method = recorded.method
                let answer = try await send(recorded, headers: asked, body: .skip)
                result.liveStatus = answer.status
                result.attempts = answer.attempts
                if answer.status != recorded.status {
                    result.verdict = .stale
                    result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
                }
            } else {
                try await verifyContent(recorded, into: &result)
            }
        } catch let error as FetchError {
            result.verdict = .unreachable
            result.error = error.message
            result.attempts = error.attempts
            if let refusal = error.refusal {
                result.method = EntryVerification.notProbed
                result.advice =
                    refusal.allowable
                    ? "the check is incomplete: name the origin in --declaration, or pass --allow-private-addresses, to ask it"
                    : "never asked: link-local and cloud-metadata addresses are not fetched"
                return result
            }
            result.advice = advice(for: result, recorded, failure: error.code)
            return result
        } catch {
            result.verdict = .unreachable
            result.error = "\(error)"
        }
        result.advice = advice(for: result, recorded)
        return result
    }

    /// The headers a declared request is sent with again: those recorded, and a secret's (which the bundle does not
    /// keep) from the declaration's request for the same method and URL.
    func requestHeaders(for recorded: Recorded) -> [(String, String)] {
        recorded.request?.sending(url: recorded.url, declared: options.declaredRequests, rules: recorded.rules).headers ?? []
    }

    /// Sends the entry's request (its method, body and `headers`) to its URL.
    func send(_ recorded: Recorded, headers: [(String, String)], body: BodyHandling) async throws -> Answer {
        try await send(recorded.url, method: HTTPMethod(rawValue: recorded.method), headers: headers, body: body, requestBody: recorded.request?.body)
    }

    /// A content entry: by its body unless `--shallow`, by validators first when the origin gave some.
    private func verifyContent(_ recorded: Recorded, into result: inout EntryVerification) async throws {
        // A body stored still coded cannot be compared with a decoded live one: validators and lengths only.
        let byContent = !options.shallow && !recorded.storedCoded
        let hasValidators = recorded.etag != nil || recorded.lastModified != nil
        let asked = requestHeaders(for: recorded)
        if recorded.comparesStableJSON && !options.shallow {
            // Fields that change on every answer are left out: the rest of the JSON decides, and validators (which
            // change with them) are notes.
            result.method = "\(recorded.method), volatile fields left out"
            let answer = try await send(recorded, headers: asked, body: .hash(limit: options.maxBodyBytes, keep: true))
            judgeStableJSON(recorded, answer, into: &result)
        } else if options.deep && byContent {
            result.method = "deep \(recorded.method)"
            let answer = try await send(recorded, headers: asked, body: .hash(limit: recorded.size ?? 0, keep: recorded.isHTML))
            judgeContent(recorded, answer, into: &result)
        } else if recorded.method != "GET" {
            result.method = recorded.method
            let answer = try await send(recorded, headers: asked, body: .hash(limit: recorded.size ?? 0, keep: false))
            judgeContent(recorded, answer, into: &result)
        } else if hasValidators {
            result.method = "conditional GET"
            var conditions: [(String, String)] = []
            if let etag = recorded.etag { conditions.append(("If-None-Match", etag)) }
            if let lastModified = recorded.lastModified { conditions.append(("If-Modified-Since", lastModified)) }
            // The body of the same answer is read only when its headers differ from the recorded ones.
            let body: BodyHandling =
                byContent
                ? .hashWhen { status, headers in
                    guard status == recorded.status, !Self.headerChanges(recorded, headers: headers).isEmpty else { return nil }
                    return (recorded.size ?? 0, recorded.isHTML)
                } : .skip
            let answer = try await send(recorded, headers: asked + conditions, body: body)
            if answer.bodyRead {
                result.method = "conditional GET, body compared"
                judgeContent(recorded, answer, into: &result)
            } else {
                judgeValidated(recorded, answer, into: &result)
            }
        } else if byContent {
            result.method = "GET"
            let answer = try await send(recorded, headers: asked, body: .hash(limit: recorded.size ?? 0, keep: recorded.isHTML))
            judgeContent(recorded, answer, into: &result)
        } else {
            result.method = "HEAD"
            var answer = try await send(recorded.url, method: .HEAD, headers: asked, body: .skip)
            if answer.status == 405 || answer.status == 501 {
                result.method = "GET"
                answer = try await send(recorded, headers: asked, body: .skip)
            }
            judgeShallow(recorded, answer, into: &result)
        }
    }

    enum BodyHandling: Sendable {
        case skip
        /// SHA-256 of the decoded body, reading at most one byte past `limit` (a longer body differs; an endless one is
        /// not read forever). `keep` keeps the bytes read, for pages whose links may be compared.
        case hash(limit: UInt64, keep: Bool)
        /// As `hash`, with the limit and whether to keep the bytes that `decide` returns for the answer's status and
        /// headers; when it returns nil, the body is not read.
        case hashWhen(_ decide: @Sendable (Int, HTTPFields) -> (limit: UInt64, keep: Bool)?)
    }

    /// Sends one request with retries on connection errors, timeouts, 429 and 5xx (``RetryLoop``).
    func send(_ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling, requestBody: Data? = nil) async throws -> Answer {
        if let refusal = addresses.refusal(forURL: url) {
            throw FetchError(.notAsked, "not asked: \(refusal.reason)", refusal: refusal)
        }
        // Verify asks for canonical keys: their origin is read off the key, without canonicalizing it again.
        let origin = HTTPOrigin(key: url) ?? HTTPOrigin(url: url)
        let outcome = await retryLoop.run(origin: origin) { _ -> RetryLoop.Attempt<Answer> in
            if let pacer { await pacer.wait() }
            do {
                let answer = try await sendOnce(url, method: method, headers: extra, body: body, requestBody: requestBody)
                return .answered(answer, status: answer.status, retryAfter: answer.header("retry-after"))
            } catch {
                var failure = HTTPTransport.fetchError(error)
                if HTTPTransport.isUntrustedCertificate(error), let origin, let reason = await diagnosis.explain(origin) { failure.message = reason }
                return .failed(failure)
            }
        }
        switch outcome {
        case .answered(var answer, let attempts):
            answer.attempts = attempts
            // Still 429 or 5xx after every retry: the server cannot say whether the entry changed.
            if RetryLoop.retryable(status: answer.status) {
                throw FetchError(.status, "HTTP \(answer.status) after \(attempts) attempts", status: answer.status, attempts: attempts)
            }
            return answer
        case .failed(let failure):
            throw failure
        }
    }

    /// One attempt: the request, and the body read as `body` asks.
    private func sendOnce(
        _ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling, requestBody: Data?
    ) async throws -> Answer {
        let request = HTTPTransport.request(
            url, method: method, body: requestBody, tls: options.tls, userAgent: options.userAgent, declared: options.headerRules.headers(forURL: url),
            extra: extra.map { (name: $0.0, value: $0.1) })
        let response = try await client.execute(request, timeout: .milliseconds(Int64(options.timeouts.request * 1000)))
        var answer = Answer(status: Int(response.status.code), headers: HTTPFields(response.headers), sha256: nil, attempts: 1)
        let reading: (limit: UInt64, keep: Bool)? =
            switch body {
            case .skip: nil
            case .hash(let limit, let keep): (limit, keep)
            case .hashWhen(let decide): decide(answer.status, answer.headers)
            }
        guard let reading, method != .HEAD else {
            // The body is not needed: stop reading it (the connection is closed if it was not empty).
            for try await _ in response.body { break }
            return answer
        }
        var hasher = SHA256()
        var received: UInt64 = 0
        var kept: [UInt8] = []
        // A page is read on past the recorded size (up to the crawl's parse limit), so its links can be compared.
        let stopAt = reading.keep ? max(reading.limit, min(UInt64(Crawler.parseLimit), options.maxBodyBytes)) : reading.limit
        var truncated = false
        let deadline = NIODeadline.now() + .milliseconds(Int64(options.timeouts.request * 1000))
        for try await chunk in response.body {
            received += UInt64(chunk.readableBytes)
            // Longer than the recorded body: it differs, whatever follows.
            if received > reading.limit { answer.longer = true }
            if answer.longer && received > stopAt {
                truncated = true
                break
            }
            // A recorded body past the cap cannot be compared without reading past it.
            if !answer.longer && received > options.maxBodyBytes {
                throw FetchError(.bodyTooLong, "body longer than \(options.maxBodyBytes) bytes (the --max-body limit); not compared")
            }
            guard NIODeadline.now() <= deadline else { throw HTTPClientError.deadlineExceeded }
            chunk.withUnsafeReadableBytes { raw in
                hasher.update(bufferPointer: raw)
                if reading.keep { kept.append(contentsOf: raw) }
            }
        }
        answer.bodyRead = true
        if !answer.longer { answer.sha256 = hexString(Array(hasher.finalize())) }
        if reading.keep && !truncated { answer.body = kept }
        return answer
    }
}
