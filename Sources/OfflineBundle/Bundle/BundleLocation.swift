import Foundation

/// Where a bundle is: the one value ``MountedBundle/mount(_:options:)`` takes.
///
/// ```swift
/// let release = try await MountedBundle.mount(.file("release.bundle.zip"))
/// let patched = try await MountedBundle.mount(.delta(.file("r2.delta.zip"), over: .file("r1.bundle.zip")))
/// let remote = try await MountedBundle.mount(.remote("https://cdn.example.com/docs/release.bundle.zip", options))
/// ```
public indirect enum BundleLocation: Sendable {
    /// A bundle file at this path.
    case file(String)
    /// A bundle on an HTTP server (`https://…` or `http://…`), read by range requests through these options, without
    /// downloading it; see ``RemoteOptions``.
    case remote(String, RemoteOptions)
    /// A delta (``file(_:)`` or ``remote(_:_:)``) mounted over the bundle it was made over, itself any location:
    /// `.delta(.file("r3.delta"), over: .delta(.file("r2.delta"), over: .file("r1.bundle.zip")))`.
    case delta(BundleLocation, over: BundleLocation)
    /// The release a signed channel names now, by the delta from the release it mounted last where the channel lists
    /// one (``ReleaseChannel/poll()`` reads a newer document).
    case channel(ReleaseChannel)
    /// A bundle mounted already, as it is: a delta's base a service holds (`.delta(.file(next), over: .mounted(held))`
    /// reads nothing of it again).
    case mounted(MountedBundle)

    /// `location` as `packager`'s commands read one: an `http://` or `https://` URL is ``remote(_:_:)`` (through
    /// `remote`), anything else a ``file(_:)``.
    ///
    /// - Throws: ``BundleError`` with code `.invalidArgument` for a URL without `remote`.
    public init(_ location: String, remote: RemoteOptions? = nil) throws {
        guard RemoteOptions.isRemote(location) else {
            self = .file(location)
            return
        }
        guard let remote else {
            throw BundleError(.invalidArgument, "\(RemoteObject.shown(location)) is a URL: mounting it needs RemoteOptions")
        }
        self = .remote(location, remote)
    }

    /// The path or URL (its query left out) the bundle is read from; a delta's own; a channel's URL.
    public var shown: String {
        switch self {
        case .file(let path): path
        case .remote(let url, _): RemoteObject.shown(url)
        case .delta(let delta, _): delta.shown
        case .channel(let channel): channel.shownURL
        case .mounted(let bundle): bundle.remoteURL ?? bundle.path
        }
    }
}

extension MountedBundle {
    /// Mounts the bundle at `location`: the one way to mount a bundle.
    ///
    /// - A file is opened, its end records and index read and checked (with its signature when `options` requires
    ///   one); bodies are read when asked for.
    /// - A remote bundle is mounted by range reads: the object's end, then `index.bin` (two requests, whatever the entry
    ///   count). Each body is fetched when first read and kept in the remote options' cache. The object is pinned by
    ///   its ETag and size, so a replaced object is never mixed with the mounted index. With a cache folder that holds
    ///   the object from an earlier mount, mounting asks once whether it is still the same and reads the rest from
    ///   the cache, or from the cache alone when the server cannot be reached (``RemoteOptions/offlineFromCache``).
    /// - A delta's `index.bin` must hash to the digest its comment names, and every body of the target must be in the
    ///   delta or its base. The base is mounted without a signature of its own: what is read from it is checked against
    ///   the delta's (signed) index. A remote delta is fetched whole, into a file.
    /// - A channel mounts the release its held document names, checked against the document's digest and size.
    ///
    /// Mounting reads files and may fetch: it runs on a Dispatch thread, never on Swift's cooperative pool.
    ///
    /// - Throws: ``BundleError``: `.io` when a file cannot be read; `.notABundle` for a file that is not a bundle; `.truncated`, `.corruptIndex`
    ///   or `.hostile` for a damaged or hostile bundle; `.signature` when `options.requiredPublicKey` is set and the
    ///   bundle is not signed by it; `.unsupported` for a delta given as a bundle, or a newer format; `.wrongBase`
    ///   when a delta was made over another bundle; `.remote` (naming the URL) when a server cannot be reached or
    ///   answers an error; `.changed` when a remote object was replaced twice while mounting.
    public static func mount(_ location: BundleLocation, options: Options = Options()) async throws -> MountedBundle {
        try await withCheckedThrowingContinuation { done in
            DispatchQueue.global().async { done.resume(with: Result { try mountBlocking(location, options: options) }) }
        }
    }

    /// ``mount(_:options:)`` on the calling thread, which it blocks while it reads and fetches: for code that cannot
    /// await (a synchronous `main`, a fuzzing harness) or runs on a thread of its own.
    public static func mountBlocking(_ location: BundleLocation, options: Options = Options()) throws -> MountedBundle {
        switch location {
        case .file(let path):
            return try naming(location) { try MountedBundle(path: path, options: options) }
        case .remote(let url, let remote):
            return try naming(location) { try MountedBundle(url: url, remote: remote, options: options) }
        case .channel(let channel):
            return try naming(location) { try channel.mountRelease(options: options) }
        case .mounted(let bundle):
            return bundle
        case .delta(let delta, let over):
            // What stands as the delta is checked before its base is mounted (or fetched).
            if case .file(let path) = delta {
                let base = try mountBlocking(over, options: baseOptions(options))
                return try naming(delta) { try MountedBundle(deltaPath: path, base: base, options: options) }
            }
            guard case .remote(let url, let remote) = delta else {
                throw BundleError(.invalidArgument, "\(delta.shown) stands as a delta: give a delta's file or URL, mounted over another location")
            }
            let base = try mountBlocking(over, options: baseOptions(options))
            return try naming(delta) { try MountedBundle(deltaURL: url, base: base, remote: remote, options: options) }
        }
    }

    /// `step`'s bundle; an error it throws names `location` when it does not already (a damaged index says
    /// "index.bin: …", not which of a chain's files it is in).
    private static func naming(_ location: BundleLocation, _ step: () throws -> MountedBundle) throws -> MountedBundle {
        do {
            return try step()
        } catch var error as BundleError where !error.message.contains(location.shown) {
            error.message = "\(location.shown): " + error.message
            throw error
        }
    }
}
