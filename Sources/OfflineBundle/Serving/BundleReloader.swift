import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Mounts a service's bundles again and swaps them into its ``LoaderHandle``: while it runs as a
/// swift-service-lifecycle `Service`, when a bundle file is replaced or changed and on SIGHUP, and whenever told to
/// (``reload(because:)``). Requests already answering finish on the loader they started with; new requests get the
/// new one. A set of bundles that does not mount is reported (why, in words) and the loader answering keeps
/// answering.
///
/// A remote bundle (a path that is an `http(s)` URL, mounted through ``RemoteOptions``) is taken as replaced when a
/// read sees another ETag or size, or a `412` (it is then mounted again at once), or when the check every ``interval``
/// (a `HEAD` conditional on the pinned ETag) says so.
///
/// A file is taken as changed when its device, inode, size, modification time or status-change time differ from when
/// it was last mounted: a release written beside the old one and renamed over it changes the inode, and a file
/// written in place with its modification time set back still shows in the status-change time. A set that failed to
/// mount is not tried again until a file changes again, or a signal or ``reload(because:)`` asks. Reloads run one at
/// a time, off the request path (mounting reads each bundle's index).
///
/// Every reload is logged (info; a failure at error level) and counted through swift-metrics:
/// `offline_bundle_reloads` with the dimension `result`, `reloaded` or `failed`.
///
/// Hummingbird, Vapor and any service with a `ServiceGroup` run it beside their server:
///
/// ```swift
/// let reloader = try BundleReloader(paths: ["/srv/release.bundle.zip"], mountOptions: .init(requiredPublicKey: key))
/// app.middleware.use(try OfflineBundleMiddleware(handle: reloader.handle))   // Vapor, or Hummingbird's router
/// let group = ServiceGroup(configuration: .init(services: [server, reloader], logger: logger))
/// try await group.run()
/// ```
public final class BundleReloader: Service, Sendable {
    /// What a reload did.
    public enum Event: Sendable, CustomStringConvertible {
        /// The new loader answers from now on.
        case reloaded(OfflineLoader, reason: String)
        /// The bundles did not mount; the loader answering keeps answering.
        case failed(any Error, reason: String)

        public var description: String {
            switch self {
            case .reloaded(let loader, let reason):
                "reloaded (\(reason)): \(loader.bundles.map(\.entryCount).reduce(0, +)) entries"
            case .failed(let error, let reason):
                "not reloaded (\(reason)): \(error)"
            }
        }
    }

    /// The bundle files (and remote bundles' URLs) watched.
    public let paths: [String]
    /// The handle whose loader a reload replaces: give it to the middleware, the client or the server.
    public let handle: LoaderHandle
    /// The time between checks of the files (and of remote bundles, by a conditional `HEAD`) while ``run()`` runs;
    /// `.zero` checks none.
    public let interval: Duration
    /// The signals that ask for a reload while ``run()`` runs (SIGHUP unless told otherwise).
    public let signals: [UnixSignal]
    /// The release channel followed, when the reloader was made with one: polled every ``interval`` instead of
    /// watching files and objects (a channel's release objects never change).
    public let channel: ReleaseChannel?
    private let mount: @Sendable () throws -> OfflineLoader
    private let report: @Sendable (Event) -> Void
    private let logger: Logger
    /// What each file was when last mounted.
    private let seen: Mutex<[String: BundleFile.Identity?]>
    /// Held while a reload runs, so that reloads (a signal and a changed file at once) happen one after the other.
    private let reloading = Mutex(())
    private let reloaded = Counter(label: "offline_bundle_reloads", dimensions: [("result", "reloaded")])
    private let failed = Counter(label: "offline_bundle_reloads", dimensions: [("result", "failed")])
    private let counted = Mutex(Counts(reloaded: 0, failed: 0))

    /// How many reloads swapped a new loader in, and how many failed, since this reloader was made.
    public struct Counts: Sendable, Equatable {
        public var reloaded: Int
        public var failed: Int

        public init(reloaded: Int, failed: Int) {
            self.reloaded = reloaded
            self.failed = failed
        }
    }

    /// The reloads so far (also counted through swift-metrics as `offline_bundle_reloads`).
    public var counts: Counts { counted.withLock { $0 } }

    /// A reloader for a loader mounted already.
    ///
    /// - Parameters:
    ///   - paths: the bundle files watched.
    ///   - handle: the handle whose loader a reload replaces.
    ///   - interval: the time between checks of the files; `.zero` checks none.
    ///   - signals: the signals that ask for a reload; none leaves signals alone.
    ///   - logger: where reloads and failures are logged.
    ///   - mount: mounts the bundles (and rules) again.
    ///   - report: told of every reload and every failed one.
    public convenience init(
        paths: [String], handle: LoaderHandle, interval: Duration = .seconds(2), signals: [UnixSignal] = [.sighup],
        logger: Logger = Logger(label: "offline-bundle.reloader"), mount: @escaping @Sendable () throws -> OfflineLoader,
        report: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.init(
            paths: paths, identities: Self.identities(of: paths), handle: handle, interval: interval, signals: signals, logger: logger, mount: mount,
            report: report)
    }

    /// Mounts the bundles at `paths` now, in order (the first with an entry answers), with `rulesFile`'s runtime rules
    /// checked first, and again on each reload.
    ///
    /// - Throws: ``BundleError`` when a bundle does not mount now (missing, corrupt, not signed by the required key) or
    ///   the rules file is not valid.
    public convenience init(
        paths: [String], mountOptions: MountedBundle.Options = MountedBundle.Options(), policy: OfflinePolicy = .bundleOnly,
        overrides: [PolicyOverride] = [], options: LoaderOptions = LoaderOptions(), rulesFile: String? = nil, interval: Duration = .seconds(2),
        signals: [UnixSignal] = [.sighup], logger: Logger = Logger(label: "offline-bundle.reloader"), remote: RemoteOptions? = nil,
        report: @escaping @Sendable (Event) -> Void = { _ in }
    ) throws {
        @Sendable func mount() throws -> OfflineLoader {
            // As `packager serve` takes paths: a delta mounts over the path after it; a URL is a remote bundle.
            let loader = OfflineLoader(
                bundles: try MountedBundle.mount(paths: paths, options: mountOptions, remote: remote), policy: policy, overrides: overrides,
                options: options)
            return try rulesFile.map { try loader.adding(OfflineRules(contentsOf: $0)) } ?? loader
        }
        // What the files are before the first mount: one replaced while it mounts is mounted again at the first check.
        let identities = Self.identities(of: paths)
        self.init(
            paths: paths, identities: identities, handle: LoaderHandle(try mount()), interval: interval, signals: signals, logger: logger,
            mount: mount, report: report)
    }

    /// Mounts `configuration` now, and again on each reload: when a file it reads changes (checked every `interval`), a
    /// remote bundle is replaced, or one of `signals` asks. Its rules file is read again with each reload.
    ///
    /// The files among the bundles are watched (a delta's and its base's alike); a remote bundle among them is mounted
    /// again when its object is replaced.
    ///
    /// - Throws: ``BundleError`` when a bundle does not mount now or the rules file is not valid; `.invalidArgument` for
    ///   a channel among the bundles (a reloader follows a channel by
    ///   ``init(channel:mountOptions:policy:overrides:options:interval:signals:logger:report:)``), or a bundle mounted
    ///   already (`.mounted`: a reload would only take it again as it is).
    public convenience init(
        _ configuration: OfflineLoader.Configuration, interval: Duration = .seconds(2), signals: [UnixSignal] = [.sighup],
        logger: Logger = Logger(label: "offline-bundle.reloader"), report: @escaping @Sendable (Event) -> Void = { _ in }
    ) throws {
        func refused(_ location: BundleLocation) -> String? {
            switch location {
            case .file, .remote: nil
            case .delta(let delta, let base): refused(delta) ?? refused(base)
            case .channel(let channel): "\(channel.shownURL) is a channel: follow it with BundleReloader(channel:)"
            case .mounted(let bundle): "\(bundle.remoteURL ?? bundle.path) is mounted already: a reload would take it again as it is"
            }
        }
        if let reason = configuration.bundles.lazy.compactMap(refused).first { throw BundleError(.invalidArgument, reason) }
        let paths = configuration.sources
        let identities = Self.identities(of: paths)
        self.init(
            paths: paths, identities: identities, handle: LoaderHandle(try configuration.mountBlocking()), interval: interval, signals: signals,
            logger: logger, mount: configuration.mountBlocking, report: report)
    }

    /// Follows `channel`: mounts the release its document names now, and each release a newer document names, polling
    /// the channel every `interval` (a conditional `GET`). A document the channel refuses (another key, a lower
    /// version, an expired one) is reported as a failed reload; the release held keeps answering.
    ///
    /// ```swift
    /// let channel = try ReleaseChannel(url: "https://cdn.example/docs/channel.json", publicKey: releaseKey.bytes,
    ///                                  remote: RemoteOptions(transport: try HTTPClientRemoteTransport(), cacheDirectory: "/var/cache/docs"))
    /// let reloader = try BundleReloader(channel: channel)
    /// ```
    ///
    /// - Throws: ``BundleError`` when the release named now does not mount (or is not the one named).
    public convenience init(
        channel: ReleaseChannel, mountOptions: MountedBundle.Options = MountedBundle.Options(), policy: OfflinePolicy = .bundleOnly,
        overrides: [PolicyOverride] = [], options: LoaderOptions = LoaderOptions(), interval: Duration = .seconds(2), signals: [UnixSignal] = [.sighup],
        logger: Logger = Logger(label: "offline-bundle.reloader"), report: @escaping @Sendable (Event) -> Void = { _ in }
    ) throws {
        @Sendable func mount() throws -> OfflineLoader {
            OfflineLoader(bundles: [try channel.mountRelease(options: mountOptions)], policy: policy, overrides: overrides, options: options)
        }
        self.init(
            channel: channel, handle: LoaderHandle(try mount()), interval: interval, signals: signals, logger: logger, mount: mount, report: report)
    }

    /// Follows `channel` for a loader mounted already from its release, mounting with `mount` (which reads
    /// ``ReleaseChannel/document``, through `MountedBundle.mount(.channel(channel))`): for a service that builds its
    /// loader itself (rules, a startup set fetched before it answers).
    public convenience init(
        channel: ReleaseChannel, handle: LoaderHandle, interval: Duration = .seconds(2), signals: [UnixSignal] = [.sighup],
        logger: Logger = Logger(label: "offline-bundle.reloader"), mount: @escaping @Sendable () throws -> OfflineLoader,
        report: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.init(
            paths: [], identities: [:], handle: handle, interval: interval, signals: signals, logger: logger, mount: mount, report: report,
            channel: channel)
        channelMounted.withLock { $0.version = channel.document?.version }
    }

    private init(
        paths: [String], identities: [String: BundleFile.Identity?], handle: LoaderHandle, interval: Duration, signals: [UnixSignal], logger: Logger,
        mount: @escaping @Sendable () throws -> OfflineLoader, report: @escaping @Sendable (Event) -> Void, channel: ReleaseChannel? = nil
    ) {
        self.channel = channel
        self.paths = paths
        self.handle = handle
        self.interval = interval
        self.signals = signals
        self.logger = logger
        self.mount = mount
        self.report = report
        seen = Mutex(identities)
        watchRemote(handle.loader)
    }

    /// Reloads as soon as a read or a check sees one of `loader`'s remote bundles replaced (while it still answers).
    private func watchRemote(_ loader: OfflineLoader) {
        for bundle in loader.bundles where bundle.remoteURL != nil {
            let url = bundle.remoteURL ?? ""
            bundle.onRemoteReplaced { [weak self, weak bundle] in
                guard let reloader = self, let replaced = bundle else { return }
                DispatchQueue.global().async {
                    guard reloader.handle.loader.bundles.contains(where: { $0 === replaced }) else { return }
                    reloader.reload(because: "\(url) was replaced")
                }
            }
        }
    }

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    /// Mounts every bundle again; on success the new loader answers new requests, on failure the old one stays.
    /// Blocks while the bundles mount; reloads asked for at once run one after the other.
    public func reload(because reason: String) { _ = reloaded(because: reason) }

    /// ``reload(because:)``, saying what came of it.
    private func reloaded(because reason: String) -> Event {
        // Told after the lock is let go: a report that asks for another reload does not wait on this one.
        let event = reloading.withLock { _ -> Event in
            let identities = Self.identities(of: paths)
            // Not again for the same files after a failure: a half-copied bundle is retried when it changes again.
            defer { seen.withLock { $0 = identities } }
            let event: Event
            handle.reloadStarted()
            do {
                let loader = try mount()
                handle.replace(with: loader)
                watchRemote(loader)
                event = .reloaded(loader, reason: reason)
                reloaded.increment()
                counted.withLock { $0.reloaded += 1 }
                logger.info(
                    "bundles reloaded",
                    metadata: ["reason": "\(reason)", "entries": "\(loader.bundles.map(\.entryCount).reduce(0, +))", "paths": "\(paths)"])
            } catch {
                handle.reloadFailed()
                event = .failed(error, reason: reason)
                failed.increment()
                counted.withLock { $0.failed += 1 }
                logger.error(
                    "bundles not reloaded; the loader answering keeps answering",
                    metadata: ["reason": "\(reason)", "error": "\(error)", "paths": "\(paths)"])
            }
            return event
        }
        report(event)
        return event
    }

    /// Until cancelled or a graceful shutdown: checks the files every ``interval``, reloading when one changed,
    /// and reloads on each of ``signals``. Mounting happens on a thread of its own, never on the cooperative pool.
    public func run() async throws {
        // A file replaced between the first mount and now (while the server started) is not missed.
        if interval > .zero && changed { await reloadOffPool(because: "a bundle file changed") }
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                if !self.signals.isEmpty {
                    group.addTask {
                        for await signal in await UnixSignalsSequence(trapping: self.signals) {
                            await self.reloadOffPool(because: "\(signal)")
                        }
                    }
                }
                if self.interval > .zero {
                    group.addTask {
                        while !Task.isCancelled {
                            try? await Task.sleep(for: self.interval)
                            if let channel = self.channel {
                                if !Task.isCancelled { await self.pollOffPool(channel) }
                                continue
                            }
                            if !Task.isCancelled && self.changed { await self.reloadOffPool(because: "a bundle file changed") }
                            // A replaced remote bundle is reloaded by its watcher (watchRemote), which the check tells;
                            // one whose reload failed (an upload caught half done) is mounted again once it changes.
                            if !Task.isCancelled { await self.checkRemote() }
                        }
                    }
                }
            }
        }
    }

    /// Polls `channel` off the pool: a newer document's release is mounted and swapped in; a refused document is
    /// reported as a failed reload (the release held answers on). One whose release failed to mount is mounted again
    /// at the next poll (a release uploaded after its channel, say).
    private func pollOffPool(_ channel: ReleaseChannel) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .utility).async {
                let reason: String?
                switch channel.poll() {
                case .updated(let document):
                    reason = "channel version \(document.version) names \(RemoteObject.shown(channel.resolve(document.release.url)))"
                case .unchanged:
                    // Held, not yet answering (its release failed to mount: uploaded after its channel, say): tried
                    // again after 1, 2, 4 … 64 polls.
                    let pending = channel.document.flatMap { document in
                        self.channelMounted.withLock { mounted -> ChannelDocument? in
                            guard mounted.version != document.version else { return nil }
                            if mounted.retryVersion != document.version { (mounted.retryVersion, mounted.failures, mounted.wait) = (document.version, 0, 0) }
                            guard mounted.wait == 0 else {
                                mounted.wait -= 1
                                return nil
                            }
                            return document
                        }
                    }
                    reason = pending.map { "channel version \($0.version) names \(RemoteObject.shown(channel.resolve($0.release.url)))" }
                case .refused(let why):
                    self.report(.failed(BundleError(.signature, why), reason: "the channel's document was refused"))
                    reason = nil
                case .unreachable:
                    reason = nil
                }
                if let reason, let version = channel.document?.version {
                    let reloaded: Bool
                    if case .reloaded = self.reloaded(because: reason) { reloaded = true } else { reloaded = false }
                    self.channelMounted.withLock { mounted in
                        if reloaded {
                            mounted.version = version
                        } else {
                            if mounted.retryVersion != version { (mounted.retryVersion, mounted.failures) = (version, 0) }
                            mounted.failures += 1
                            mounted.wait = (1 << min(mounted.failures, 6)) - 1
                        }
                    }
                }
                done.resume()
            }
        }
    }

    /// The version of the channel document whose release answers now, and the retries of a newer one whose release
    /// failed to mount.
    private let channelMounted = Mutex(ChannelMount())

    private struct ChannelMount {
        var version: UInt64?
        var retryVersion: UInt64?
        var failures = 0
        /// Polls to let pass before the next retry.
        var wait = 0
    }

    /// ``reload(because:)`` on a dispatch thread, awaited.
    private func reloadOffPool(because reason: String) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .utility).async {
                self.reload(because: reason)
                done.resume()
            }
        }
    }

    /// Checks the remote bundles of the loader answering, off the pool: for each, a conditional `HEAD`, whose finding
    /// of a replacement its watcher reloads; for one seen replaced already (its reload failed, so it still answers), a
    /// `HEAD` for what the server holds now, mounted again when that differs from what last failed to mount.
    private func checkRemote() async {
        let remote = handle.loader.bundles.filter { $0.remoteURL != nil }
        guard !remote.isEmpty else { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global(qos: .utility).async {
                for bundle in remote {
                    guard let version = bundle.remoteVersionSinceReplaced() else {
                        _ = bundle.remoteReplaced()
                        continue
                    }
                    let url = bundle.remoteURL ?? ""
                    // Swapped meanwhile (its watcher's reload came through), or that version failed already.
                    guard self.handle.loader.bundles.contains(where: { $0 === bundle }), self.failedRemote.withLock({ $0[url] }) != version else {
                        continue
                    }
                    switch self.reloaded(because: "\(url) was replaced") {
                    case .reloaded:
                        self.failedRemote.withLock { $0[url] = nil }
                    case .failed(let error, _):
                        // Not again until the server holds yet another version, when the object itself failed (cut short,
                        // damaged, not a bundle); a server that could not be reached or answered an error is asked again.
                        if let error = error as? BundleError, [.remote, .changed].contains(error.code) { break }
                        self.failedRemote.withLock { $0[url] = version }
                    }
                    break
                }
                done.resume()
            }
        }
    }

    /// For each remote bundle's URL whose replacement failed to mount: what the server held then.
    private let failedRemote = Mutex<[String: String]>([:])

    /// Whether a file differs from what was last mounted.
    public var changed: Bool {
        let now = Self.identities(of: paths)
        return seen.withLock { $0 != now }
    }

    private static func identities(of paths: [String]) -> [String: BundleFile.Identity?] {
        Dictionary(paths.map { ($0, BundleFile.identity(ofPath: $0)) }, uniquingKeysWith: { first, _ in first })
    }
}
