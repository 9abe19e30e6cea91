import Foundation
import HTTPTypes

/// What every HTTP client integration does with an answer, so that each only converts: the bundle's body read and
/// checked (``OfflineLoader/clientBody(of:url:hop:chunkSize:)``), and a network body kept for the last-seen cache as it
/// passes (``LastSeenRecording``, for a client that streams it; one that reads it whole calls
/// ``OfflineLoader/remember(_:status:headers:body:)``).
extension OfflineLoader {
    /// The body of `answer` (this loader's answer for `url`) as a client hands it over: nothing; the whole of it when one
    /// chunk holds it (most pages); else checked chunks (``ServeBodyChunks``), each later one read through `hop` when the
    /// client asks for it. The first chunks are read and checked before this returns, through `hop` unless the body is
    /// in memory now: a body that fails its checks is counted against `url` and thrown, never handed over.
    ///
    /// A client that reads the body whole passes ``BundleResponse/wholeChunkSize``: one read, one hop.
    public func clientBody(of answer: BundleResponse, url: String, hop: BlockingHop, chunkSize: Int = 64 << 10) async throws -> ServeBody {
        let opened: OpenedBody?
        do {
            if answer.bodyPlace == .memory, let inMemory = try answer.openBodyIfInMemory(chunkSize: chunkSize) {
                opened = inMemory
            } else {
                opened = try await hop.run { try answer.openBody(chunkSize: chunkSize) }
            }
        } catch {
            recordError(error, url: url)
            throw error
        }
        guard let opened else { return .empty }
        guard let second = opened.second else { return .bytes(opened.first) }
        return .stream(ServeBodyChunks(opened: opened, second: second, hop: hop, loader: self, url: url))
    }
}

extension BundleResponse {
    /// A chunk size that reads the body in one chunk, up to 1 MiB (no buffer larger than the body).
    public var wholeChunkSize: Int { Int(min(entry?.body?.size ?? (1 << 20), 1 << 20)) }
}

extension ServeBody {
    /// The whole body, its chunks read (and checked) and joined: for a client that hands bodies over whole.
    public func collected() async throws -> Data {
        switch self {
        case .empty: return Data()
        case .bytes(let data): return data
        case .stream(let chunks):
            var data = Data()
            for try await chunk in chunks { data.append(chunk) }
            return data
        }
    }
}

extension BlockingHop {
    /// A Dispatch global thread: for a client with no thread pool of its own.
    public static let dispatch = BlockingHop { work in
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                work()
                done.resume()
            }
        }
    }
}

/// A network answer's body kept in a loader's last-seen cache (``LoaderOptions/lastSeen``) as a client passes it on:
/// each chunk added as it goes by, the whole kept once the body has been read to the end; a body that grows past the
/// cache's entry limit is passed on and not kept.
public struct LastSeenRecording: Sendable {
    private let loader: OfflineLoader
    private let request: BundleRequest
    private let headers: HTTPFields
    private let limit: Int
    private var collected: Data? = Data()

    /// A recording of the 200 the network answered to `request` with `headers`; nil when the cache would not keep it
    /// (another status, a request the loader does not remember, or no last-seen cache).
    public init?(loader: OfflineLoader, request: BundleRequest, status: Int, headers: HTTPFields) {
        guard status == 200, loader.mayRemember(request), let lastSeen = loader.options.lastSeen else { return nil }
        self.loader = loader
        self.request = request
        self.headers = headers
        limit = Int(min(lastSeen.maxEntryBytes, UInt64(Int.max)))
    }

    /// Adds a chunk of the body as it passes.
    public mutating func add(_ chunk: some Collection<UInt8>) {
        guard collected != nil else { return }
        if collected!.count + chunk.count > limit {
            collected = nil
        } else {
            collected!.append(contentsOf: chunk)
        }
    }

    /// The body was read to the end: keeps it (once).
    public mutating func finish() {
        guard let body = collected else { return }
        collected = nil
        loader.remember(request, status: 200, headers: headers, body: body)
    }
}

/// A network response's body passed through as a client reads it, and kept in the loader's last-seen cache once read
/// to the end (``LastSeenRecording``): what each client wraps its network body in, whatever its chunks' type.
public struct RecordedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element: Sendable {
    public typealias Element = Base.Element
    let base: Base
    let recording: LastSeenRecording
    let bytes: @Sendable (Base.Element, inout LastSeenRecording) -> Void

    /// `base` recorded by `recording`; `bytes` adds a chunk's bytes to it (`{ $1.add($0) }` for chunks that are
    /// collections of bytes).
    public init(_ base: Base, recording: LastSeenRecording, bytes: @escaping @Sendable (Base.Element, inout LastSeenRecording) -> Void) {
        self.base = base
        self.recording = recording
        self.bytes = bytes
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var upstream: Base.AsyncIterator
        var recording: LastSeenRecording
        let bytes: @Sendable (Base.Element, inout LastSeenRecording) -> Void

        public mutating func next() async throws -> Base.Element? {
            guard let chunk = try await upstream.next() else {
                recording.finish()
                return nil
            }
            bytes(chunk, &recording)
            return chunk
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(upstream: base.makeAsyncIterator(), recording: recording, bytes: bytes) }
}

extension RecordedBody where Base.Element: Collection<UInt8> {
    /// `base`, whose chunks are collections of bytes, recorded by `recording`.
    public init(_ base: Base, recording: LastSeenRecording) {
        self.init(base, recording: recording) { $1.add($0) }
    }
}
