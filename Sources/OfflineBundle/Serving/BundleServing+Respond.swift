import Foundation
import HTTPTypes
import Synchronization

/// Runs blocking work (a body's file reads) where blocking is allowed: a server's thread pool. The runtime has no pool
/// of its own; a transport gives the one its framework runs (NIO's `NIOThreadPool`, Vapor's `application.threadPool`).
///
/// ```swift
/// let hop = BlockingHop { work in try await NIOThreadPool.singleton.runIfActive(work) }
/// ```
public struct BlockingHop: Sendable {
    private let hop: @Sendable (_ work: @escaping @Sendable () -> Void) async throws -> Void

    /// A hop that runs the work it is given on a thread that may block, and returns once the work has run (or throws
    /// without running it: a pool shut down).
    public init(_ hop: @escaping @Sendable (_ work: @escaping @Sendable () -> Void) async throws -> Void) {
        self.hop = hop
    }

    /// What `work` returns or throws, run through the hop.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let outcome = Outcome<T>()
        try await hop { outcome.set(Result { try work() }) }
        // A hop that returned without running the work (it should have thrown) answers as a pool shut down would.
        guard let result = outcome.value else { throw CancellationError() }
        return try result.get()
    }

    /// Where the work's result crosses from the pool's thread to the task.
    private final class Outcome<T: Sendable>: Sendable {
        private let result = Mutex<Result<T, any Error>?>(nil)
        func set(_ value: Result<T, any Error>) { result.withLock { $0 = value } }
        var value: Result<T, any Error>? { result.withLock { $0 } }
    }
}

/// What a request gets from ``BundleServing/respond(method:target:host:headers:client:hop:collectBody:)``, ready for a
/// transport to frame: each case maps to one response of its framework.
public enum ServeResponse: Sendable {
    /// Nothing in the bundles answers: the next responder's turn (a server without one answers 404).
    case miss
    /// A response: the status, the header fields to send, the body, and what answered (nil for a status the server
    /// makes itself: 413, 421, 503).
    case response(status: Int, headers: HTTPFields, body: ServeBody, source: BundleResponse.Source?)
    /// The bundle cannot answer rightly: a body that failed its checks, or a recorded status outside 200...599. A
    /// transport answers 500 with `reason` in its error (counted and logged by the loader already).
    case failure(reason: String, source: BundleResponse.Source?)
}

/// A response's body.
public enum ServeBody: Sendable {
    /// No body follows the head (HEAD, 204, 304, an answer the server makes itself).
    case empty
    /// The whole body, read and checked before the head goes out.
    case bytes(Data)
    /// A body of more than one chunk, checked as it streams (``ServeBodyChunks``).
    case stream(ServeBodyChunks)
}

/// A body streamed as checked chunks: the first two were read before the head went out, each later one is read through
/// the transport's ``BlockingHop`` when the transport asks for it, so a response holds one chunk, not its body. A chunk
/// that fails its checks is counted by the loader and thrown: the transport then ends the response short of its
/// Content-Length, which tells the client it failed, never a body sent whole.
public struct ServeBodyChunks: AsyncSequence, Sendable {
    public typealias Element = Data
    let opened: OpenedBody
    let second: Data
    let hop: BlockingHop
    /// Counts a chunk that fails its checks against the URL it answered.
    let loader: OfflineLoader
    let url: String

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: self) }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let chunks: ServeBodyChunks
        var sent = 0

        public mutating func next() async throws -> Data? {
            sent += 1
            if sent == 1 { return chunks.opened.first }
            if sent == 2 { return chunks.second }
            let reader = chunks.opened.reader
            do {
                return try await chunks.hop.run { try reader.next() }
            } catch let error as BundleError {
                chunks.loader.recordError(error, url: chunks.url)
                throw error
            }
        }
    }
}

extension BundleServing {
    /// The whole exchange a framework's middleware runs, so that the middleware only converts: the request's body read
    /// where a bundle matches by it, within ``bodyBudget`` (413 past ``BundleRequest/maxBodySize``, 503 past the
    /// budget or the client's share of it), the answer step (``answer(method:target:host:headers:body:loader:)``),
    /// and the body opened and checked (its first two chunks, through `hop` unless it is in memory).
    ///
    /// One loader answers the whole request: a swap between reading the body and answering does not pair one bundle's
    /// decision to keep the body with another's answer.
    ///
    /// - Parameters:
    ///   - client: the client's address, whose share of the body budget a body counts against.
    ///   - collectBody: reads the request's body, up to the limit it is given (it throws past it), leaving it
    ///     readable by a next responder; called only where a bundle matches requests by their bodies.
    public func respond(
        method: String, target: String, host: String?, headers: HTTPFields, client: String?, hop: BlockingHop,
        collectBody: (_ limit: Int) async throws -> Data
    ) async -> ServeResponse {
        let loader = handle.loader
        var body: Data?
        if method != "HEAD", matchesBody(method: method, target: target, host: host, loader: loader) {
            let declared = headers[.contentLength].flatMap { Int($0) }
            if let declared, declared > BundleRequest.maxBodySize { return .response(status: 413, headers: [:], body: .empty, source: nil) }
            let reserved = declared ?? BundleRequest.maxBodySize
            // One client address holds at most its share of the budget (BodyBudget.perClient), so one cannot starve the rest.
            let key = client.map(BodyBudget.clientKey)
            guard bodyBudget.reserve(reserved, client: key) else { return .response(status: 503, headers: [:], body: .empty, source: nil) }
            defer { bodyBudget.release(reserved, client: key) }
            guard let collected = try? await collectBody(BundleRequest.maxBodySize) else {
                return .response(status: 413, headers: [:], body: .empty, source: nil)
            }
            body = collected
        }
        let answer: ServeAnswer
        switch self.answer(method: method, target: target, host: host, headers: headers, body: body, loader: loader) {
        case .miss: return .miss
        case .status(500): return .failure(reason: "the bundle records an invalid status for this resource", source: nil)
        case .status(let code): return .response(status: code, headers: [:], body: .empty, source: nil)
        case .answer(let found): answer = found
        }
        // The first chunk (for most pages, the whole body) is read and checked before the head goes out.
        let opened: OpenedBody?
        do {
            switch answer.bodyPlace {
            case .none: opened = nil
            case .memory:
                // Unless the mount's cache let it go meanwhile: then it is read as any other.
                if let inMemory = try answer.openBodyIfInMemory() {
                    opened = inMemory
                } else {
                    opened = try await hop.run { try answer.openBody() }
                }
            case .small, .large: opened = try await hop.run { try answer.openBody() }
            }
        } catch {
            // Never half-serve: a body that fails its checks is an error response (counted and logged by the loader).
            return .failure(reason: "the bundle's copy of this resource is damaged", source: answer.source)
        }
        let served: ServeBody
        if let opened {
            served =
                opened.second.map { .stream(ServeBodyChunks(opened: opened, second: $0, hop: hop, loader: answer.loader, url: answer.url)) }
                ?? .bytes(opened.first)
        } else {
            served = .empty
        }
        return .response(status: answer.status, headers: answer.headers, body: served, source: answer.source)
    }

    /// Runs `respond` and tells the policy's access log, when there is one, how it went: the status and Content-Length
    /// that `outcome` reads from the transport's final response (a miss's from the next responder), or `failed`'s
    /// status for an error thrown. `respond` sets the source it is given to what answered.
    public func logging<Response>(
        method: String, target: String, client: String?, _ respond: (_ source: inout BundleResponse.Source?) async throws -> Response,
        outcome: (Response) -> (status: Int, contentLength: String?), failed: (any Error) -> Int
    ) async throws -> Response {
        guard let log = policy.accessLog else {
            var source: BundleResponse.Source?
            return try await respond(&source)
        }
        var served = ServedRequest(client: client, method: method, target: target, status: 500)
        do {
            let response = try await respond(&served.source)
            (served.status, served.contentLength) = outcome(response)
            log(served)
            return response
        } catch {
            // What answered stays in the line: a damaged body is the bundle's 500.
            served.status = failed(error)
            log(served)
            throw error
        }
    }
}
