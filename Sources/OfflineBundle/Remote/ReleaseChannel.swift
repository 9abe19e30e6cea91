import Crypto
import Foundation
import HTTPTypes
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Follows a release channel: a signed ``ChannelDocument`` at a URL, asked for again with a conditional `GET`, which
/// names the release to serve. A ``BundleReloader`` made with ``BundleReloader/init(channel:mountOptions:policy:overrides:options:interval:signals:logger:report:)``
/// polls it and mounts each new release by its URL (through the cache folder shared across releases, so what an
/// earlier release fetched is not fetched again).
///
/// What it refuses, keeping what it holds: a document not signed by its key, one whose version is lower than the one
/// held (a replayed old channel), one of the same version that says something else, and a move to a release that an
/// expired document names (a frozen channel: it warns, and serves on). A release whose digest or size is not what
/// the document says fails to mount. The last document taken is kept in the cache folder, so a node that restarts
/// while the channel cannot be reached serves the release it last followed.
public final class ReleaseChannel: Sendable {
    /// The channel's URL, query and all (sent, never printed).
    public let url: String
    /// The URL without its query: what messages and logs name.
    public let shownURL: String
    private let publicKey: [UInt8]
    /// How the channel and its releases are read.
    public let remote: RemoteOptions
    private let state: Mutex<State>
    private let logger: Logger

    private struct State {
        var document: ChannelDocument?
        var etag: String?
        var warnedExpired = false
        /// The SHA-256 of the last document refused.
        var refusedBody: [UInt8]?
        var polls = 0
        /// The release this channel mounted last (the base a delta from it stands over).
        var mounted: MountedBundle?
    }

    /// Every this many polls, one asks without the ETag.
    static let unconditionalEvery = 10

    /// What a poll found.
    public enum Poll: Sendable, Equatable {
        /// The document held is still the channel's (a 304, or the same document).
        case unchanged
        /// A newer document, now held: its release is to be mounted.
        case updated(ChannelDocument)
        /// A document that was not taken, and why; the one held stays.
        case refused(String)
        /// The channel could not be read, and why; the one held stays.
        case unreachable(String)
    }

    /// A channel at `url` whose documents are signed by `publicKey` (32 raw bytes), read through `remote`. Reads it once
    /// now; when it cannot be read, takes the document last kept in the cache folder, if any.
    ///
    /// - Throws: ``BundleError``: `.signature` when the document is refused and none was kept, `.remote` when it cannot
    ///   be read and none was kept.
    public init(url: String, publicKey: [UInt8], remote: RemoteOptions, logger: Logger = Logger(label: "offline-bundle.channel")) throws {
        self.url = url
        shownURL = RemoteObject.shown(url)
        self.publicKey = publicKey
        self.remote = remote
        self.logger = logger
        state = Mutex(State())
        let first = poll()
        switch first {
        case .updated, .unchanged:
            return
        case .refused(let reason), .unreachable(let reason):
            guard let kept = keptDocument() else {
                if case .unreachable = first { throw BundleError(.remote, reason) }
                throw BundleError(.signature, reason)
            }
            state.withLock { $0.document = kept }
            logger.warning(
                "the channel was not taken; following the document last kept in the cache folder",
                metadata: ["url": "\(shownURL)", "reason": "\(reason)", "version": "\(kept.version)"])
        }
    }

    /// The document held: the newest taken.
    public var document: ChannelDocument? { state.withLock { $0.document } }

    /// The URL of the release the held document names (resolved against the channel's URL).
    public var releaseURL: String? { document.map { resolve($0.release.url) } }

    /// `reference` resolved against the channel's URL (an absolute URL as it is).
    public func resolve(_ reference: String) -> String {
        if RemoteOptions.isRemote(reference) { return reference }
        return URL(string: reference, relativeTo: URL(string: url))?.absoluteURL.absoluteString ?? reference
    }

    /// Asks the server for the channel (conditional on the ETag last seen), checks what it sends, and takes it when it
    /// is newer than the document held. Blocks while it asks.
    public func poll() -> Poll {
        var headers = remote.headers
        // Conditional on the ETag last seen, but every tenth poll not (a server may keep an ETag over a change).
        let etag = state.withLock { state -> String? in
            state.polls += 1
            return state.polls % Self.unconditionalEvery == 0 ? nil : state.etag
        }
        if let etag { headers[.ifNoneMatch] = etag }
        let request = RemoteRequest(method: "GET", url: url, headers: headers, timeout: remote.timeout, maxBodyBytes: ChannelEnvelope.maxBytes)
        let reply: RemoteReply
        do {
            reply = try RemoteObject.send(request, options: remote, shownURL: shownURL)
        } catch {
            return .unreachable((error as? BundleError)?.message ?? "cannot read \(shownURL): \(error)")
        }
        switch reply.status {
        case 304:
            warnIfExpired()
            return .unchanged
        case 200:
            break
        default:
            return .unreachable("\(shownURL) answered \(reply.status)")
        }
        guard !reply.overLimit else { return .refused("\(shownURL) sent more than \(ChannelEnvelope.maxBytes) bytes: not a channel document") }
        // The same refused document again (the server sent no ETag to ask by): said once.
        let bodyDigest = Array(SHA256.hash(data: reply.body))
        if state.withLock({ $0.refusedBody == bodyDigest }) { return .unchanged }
        let document: ChannelDocument
        do {
            document = try ChannelEnvelope.open(reply.body, publicKey: publicKey, source: shownURL)
        } catch {
            return refuse((error as? BundleError)?.message ?? "\(error)", reply: reply, body: bodyDigest)
        }
        let held = state.withLock { $0.document }
        if let held {
            if document.version < held.version {
                return refuse(
                    "\(shownURL) sent version \(document.version), lower than the version \(held.version) held: a replayed old channel is not followed",
                    reply: reply, body: bodyDigest)
            }
            if document.version == held.version {
                guard document == held else {
                    return refuse(
                        "\(shownURL) sent another document under the version \(held.version) held: a version names one document", reply: reply,
                        body: bodyDigest)
                }
                state.withLock {
                    $0.etag = Self.validator(reply)
                    $0.refusedBody = nil
                }
                warnIfExpired()
                return .unchanged
            }
            if document.expired() {
                return refuse(
                    "\(shownURL) sent version \(document.version), which expired at \(document.expires): the channel may be frozen; the release served now is served on",
                    reply: reply, body: bodyDigest)
            }
        } else if document.expired() {
            // Nothing held: better its release, said, than none.
            logger.warning(
                "the channel's document expired: the channel may be frozen", metadata: ["url": "\(shownURL)", "expires": "\(document.expires)"])
        }
        state.withLock {
            $0.document = document
            $0.etag = Self.validator(reply)
            $0.warnedExpired = false
            $0.refusedBody = nil
        }
        keep(reply.body)
        return .updated(document)
    }

    /// The reply's ETag, when it may be asked by: not when the document was modified in the second the reply was
    /// made (its `Last-Modified` is its `Date`). A server that makes ETags of the modification second and the size
    /// (nginx) gives a document replaced within that second by one of the same size the same ETag: asking by it would
    /// hide the new one (RFC 9110 §8.8.2.2 calls such a validator weak).
    private static func validator(_ reply: RemoteReply) -> String? {
        guard let etag = reply.value(of: "ETag") else { return nil }
        guard let modified = reply.value(of: "Last-Modified").flatMap(HTTPDates.parse), let date = reply.value(of: "Date").flatMap(HTTPDates.parse)
        else { return etag }
        return date.timeIntervalSince(modified) >= 1 ? etag : nil
    }

    /// Refuses the document the server sent (its ETag and the digest of its bytes): said now, and not again while the
    /// server sends the same (a conditional GET on that ETag, or the same bytes, is then no news).
    private func refuse(_ reason: String, reply: RemoteReply, body: [UInt8]) -> Poll {
        state.withLock {
            $0.etag = Self.validator(reply)
            $0.refusedBody = body
        }
        logger.error("channel document refused; the release held is served on", metadata: ["url": "\(shownURL)", "reason": "\(reason)"])
        return .refused(reason)
    }

    /// Warns once per document that the one held has expired (the channel may be frozen).
    private func warnIfExpired() {
        let warn = state.withLock { state -> ChannelDocument? in
            guard let document = state.document, document.expired(), !state.warnedExpired else { return nil }
            state.warnedExpired = true
            return document
        }
        if let warn {
            logger.warning(
                "the channel's document expired and no newer one came: the channel may be frozen; its release is served on",
                metadata: ["url": "\(shownURL)", "expires": "\(warn.expires)", "version": "\(warn.version)"])
        }
    }

    /// Mounts the release the held document names, checking that it is that release (its digest and size): by the
    /// delta the document lists from the release mounted last, when there is one (its bytes alone are fetched), else by
    /// the release's URL (through the cache folder shared across releases).
    ///
    /// - Throws: ``BundleError``: `.wrongBase` naming both digests when the object is another bundle; what mounting
    ///   a remote bundle throws.
    package func mountRelease(options: MountedBundle.Options = MountedBundle.Options()) throws -> MountedBundle {
        guard let document, let url = releaseURL else { throw BundleError(.invalidArgument, "\(shownURL): no channel document is held") }
        let current = state.withLock { $0.mounted }
        // The release mounted last, named again (a new document for the same release): nothing to fetch.
        if let current, current.digest == document.release.digest { return current }
        // A delta from the release mounted last: its bytes alone are fetched (checked against the digest the document
        // names), and what it does not carry is read from the release held.
        if let current, current.deltaDepth + 1 <= BundleFormat.maxDeltaDepth, let delta = document.deltas.first(where: { $0.base == current.digest }) {
            do {
                let bundle = try MountedBundle(
                    deltaURL: resolve(delta.url), base: current, remote: remote, sha256: delta.digest, size: delta.size, options: options)
                if bundle.digest == document.release.digest {
                    state.withLock { $0.mounted = bundle }
                    return bundle
                }
                logger.warning(
                    "the channel's delta stands for another release; mounting the release",
                    metadata: ["url": "\(RemoteObject.shown(resolve(delta.url)))", "stands-for": "\(bundle.digest)"])
            } catch {
                logger.warning(
                    "the channel's delta could not be mounted; mounting the release",
                    metadata: ["url": "\(RemoteObject.shown(resolve(delta.url)))", "error": "\(error)"])
            }
        }
        let bundle = try MountedBundle(url: url, remote: remote, options: options)
        guard bundle.digest == document.release.digest, bundle.file.size == document.release.size else {
            throw BundleError(
                .wrongBase,
                "\(RemoteObject.shown(url)) is the bundle \(bundle.digest.prefix(12)) of \(bundle.file.size) bytes, not the release \(document.release.digest.prefix(12)) of \(document.release.size) bytes that version \(document.version) of \(shownURL) names"
            )
        }
        state.withLock { $0.mounted = bundle }
        return bundle
    }

    // MARK: - The document kept in the cache folder

    private var keptPath: String? {
        remote.cacheDirectory.map { "\($0)/\(hexString(Array(SHA256.hash(data: Array(shownURL.utf8)))).prefix(32)).channel" }
    }

    /// Keeps the envelope taken (written whole, then renamed into place; 0600, never through a link).
    private func keep(_ bytes: [UInt8]) {
        guard let folder = remote.cacheDirectory, let path = keptPath, (try? RangeStore.makeFolder(folder)) != nil else { return }
        RangeStore.replace(path, with: bytes)
    }

    /// The envelope last kept, checked again as if it had just come.
    private func keptDocument() -> ChannelDocument? {
        guard let path = keptPath else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid(), info.st_size <= ChannelEnvelope.maxBytes else {
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        guard case .done(let count) = bytes.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: 0) }), count == bytes.count else { return nil }
        return try? ChannelEnvelope.open(bytes, publicKey: publicKey, source: path)
    }
}
