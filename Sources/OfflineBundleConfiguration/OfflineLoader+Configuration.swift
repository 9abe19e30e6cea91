import Configuration
import Foundation
import OfflineBundle

extension OfflineLoader {
    /// The keys a loader reads from swift-configuration, under `offline-bundle`, with their environment spellings
    /// (swift-configuration's `EnvironmentVariablesProvider` reads `offline-bundle.path` as `OFFLINE_BUNDLE_PATH`):
    ///
    /// | key | environment | value |
    /// |---|---|---|
    /// | `offline-bundle.path` | `OFFLINE_BUNDLE_PATH` | the bundle file to mount (one of `path`, `url`, `channel`) |
    /// | `offline-bundle.url` | `OFFLINE_BUNDLE_URL` | a bundle on a server, read by range requests (needs `RemoteOptions`) |
    /// | `offline-bundle.channel` | `OFFLINE_BUNDLE_CHANNEL` | a release channel's document (`packager channel write`; needs a public key) |
    /// | `offline-bundle.policy` | `OFFLINE_BUNDLE_POLICY` | `bundle-only` (default), `bundle-first` or `network-first` |
    /// | `offline-bundle.timeout` | `OFFLINE_BUNDLE_TIMEOUT` | seconds the network has under `network-first` (default 5) |
    /// | `offline-bundle.public-key` | `OFFLINE_BUNDLE_PUBLIC_KEY` | the Ed25519 key the bundle must be signed by, base64 |
    /// | `offline-bundle.public-key-file` | `OFFLINE_BUNDLE_PUBLIC_KEY_FILE` | the same, as `packager keygen`'s `.pub` file |
    /// | `offline-bundle.max-age` | `OFFLINE_BUNDLE_MAX_AGE` | seconds past which an entry counts as a miss while the network answers |
    /// | `offline-bundle.fallback-statuses` | `OFFLINE_BUNDLE_FALLBACK_STATUSES` | statuses besides 5xx the bundle answers instead of (`404,429`) |
    /// | `offline-bundle.cache-directory` | `OFFLINE_BUNDLE_CACHE_DIRECTORY` | where a last-seen cache keeps what the network answered |
    /// | `offline-bundle.cache-bytes` | `OFFLINE_BUNDLE_CACHE_BYTES` | the most that cache holds (default 64 MiB) |
    /// | `offline-bundle.reload-interval` | `OFFLINE_BUNDLE_RELOAD_INTERVAL` | seconds between a `BundleReloader`'s checks (default 2) |
    /// | `offline-bundle.remote-cache-directory` | `OFFLINE_BUNDLE_REMOTE_CACHE_DIRECTORY` | where a `url` or `channel` bundle's fetched bytes are kept |
    public static let configurationKeys = [
        "path", "url", "channel", "remote-cache-directory", "policy", "timeout", "public-key", "public-key-file", "max-age", "fallback-statuses",
        "cache-directory", "cache-bytes",
        "reload-interval",
    ].map { "offline-bundle." + $0 }

    /// Mounts the bundle the configuration names and creates a loader over it, with the policy, key and options it
    /// gives (``configurationKeys``), from any of swift-configuration's providers: the environment, a JSON or YAML
    /// file, in memory.
    ///
    /// ```swift
    /// let config = ConfigReader(providers: [EnvironmentVariablesProvider(), try await FileProvider<JSONSnapshot>(filePath: "config.json")])
    /// let loader = try OfflineLoader(configuration: config)
    /// ```
    ///
    /// - Parameter remote: how a bundle named by `offline-bundle.url` or `offline-bundle.channel` is fetched (a
    ///   transport such as OfflineBundleHTTPClient's); a channel's release is mounted as it stands now (follow the
    ///   channel with ``BundleReloader/init(configuration:remote:)``).
    /// - Throws: ``BundleError`` with code `.invalidArgument` naming the key when a value is missing or wrong (no
    ///   bundle named, two named, an unknown policy, a key that is not 32 bytes, a URL without `remote`), and as
    ///   mounting throws otherwise.
    public convenience init(configuration: ConfigReader, remote: RemoteOptions? = nil) throws {
        let settings = try OfflineBundleSettings(configuration)
        let bundle: MountedBundle
        switch settings.location {
        case .path(let path):
            bundle = try MountedBundle(path: path, options: .init(requiredPublicKey: settings.publicKey))
        case .url(let url):
            bundle = try MountedBundle(url: url, remote: try settings.remote(remote, for: "url"), options: .init(requiredPublicKey: settings.publicKey))
        case .channel(let url):
            let channel = try ReleaseChannel(url: url, publicKey: settings.publicKey ?? [], remote: try settings.remote(remote, for: "channel"))
            bundle = try channel.mountRelease(options: MountedBundle.Options())
        }
        self.init(bundles: [bundle], policy: settings.policy, options: settings.options)
    }

    /// `OFFLINE_BUNDLE_` and the key, uppercased, a `-` as `_`: how swift-configuration's environment provider spells it.
    package static func environmentName(of key: String) -> String {
        "OFFLINE_BUNDLE_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

/// The loader settings read from `offline-bundle.*` (``OfflineLoader/configurationKeys``), each checked: what `packager
/// serve --config` reads too.
package struct OfflineBundleSettings: Sendable {
    /// Where the bundle is: exactly one of `path`, `url` and `channel`.
    package enum Location: Sendable, Equatable {
        case path(String)
        case url(String)
        case channel(String)
    }

    package var location: Location
    package var policy: OfflinePolicy
    package var publicKey: [UInt8]?
    package var options: LoaderOptions
    /// `reload-interval`, when given (2 seconds otherwise).
    package var reloadInterval: Double?
    package var remoteCacheDirectory: String?
    /// The keys given that only a loader reads (a policy, the network's timeout, the last-seen cache): `packager serve`
    /// answers from its bundles alone, and says it does not read them.
    package var loaderOnlyKeys: [String]

    /// - Parameter source: the provider a key's value came from, for the refusals (a file's name, "the environment").
    package init(_ configuration: ConfigReader, source: (String) -> String? = { _ in nil }) throws {
        let config = configuration.scoped(to: "offline-bundle")
        func named(_ key: String) -> String {
            "offline-bundle.\(key) (\(OfflineLoader.environmentName(of: key))\(source(key).map { ", from \($0)" } ?? ""))"
        }
        func wrong(_ key: String, _ problem: String) -> BundleError { BundleError(.invalidArgument, "configuration: \(named(key)) \(problem)") }
        let places: [String] = ["path", "url", "channel"]
        let given = places.compactMap { key in config.string(forKey: ConfigKey(key)).flatMap { $0.isEmpty ? nil : (key, $0) } }
        guard let (key, value) = given.first else {
            throw BundleError(
                .invalidArgument,
                "configuration: offline-bundle.path (OFFLINE_BUNDLE_PATH) is not set: it names the bundle to mount (or offline-bundle.url, a bundle on a server, or offline-bundle.channel)"
            )
        }
        guard given.count == 1 else {
            throw BundleError(.invalidArgument, "configuration: \(named(given[0].0)) and \(named(given[1].0)) are both set: give one place for the bundle")
        }
        switch key {
        case "path": location = .path(value)
        case "url":
            guard RemoteOptions.isRemote(value) else { throw wrong("url", "is '\(value)': it takes an http(s) URL (a file is offline-bundle.path)") }
            location = .url(value)
        default:
            guard RemoteOptions.isRemote(value) else { throw wrong("channel", "is '\(value)': it takes the channel document's http(s) URL") }
            location = .channel(value)
        }
        let timeout = config.double(forKey: "timeout") ?? 5
        guard timeout > 0 else { throw wrong("timeout", "must be a number of seconds above 0, not \(timeout)") }
        switch config.string(forKey: "policy") ?? "bundle-only" {
        case "bundle-only": policy = .bundleOnly
        case "bundle-first": policy = .bundleFirst
        case "network-first": policy = .networkFirst(timeout: .milliseconds(Int64(timeout * 1000)))
        case let other: throw wrong("policy", "is '\(other)': it is bundle-only, bundle-first or network-first")
        }
        let base64 = config.string(forKey: "public-key", isSecret: false)
        let keyFile = config.string(forKey: "public-key-file")
        if base64 != nil && keyFile != nil {
            throw BundleError(.invalidArgument, "configuration: \(named("public-key")) and \(named("public-key-file")) are both set: give one")
        }
        if let base64 {
            guard let bytes = Data(base64Encoded: base64.trimmingCharacters(in: .whitespaces)), bytes.count == 32 else {
                throw wrong("public-key", "is not the base64 of a 32-byte Ed25519 public key")
            }
            publicKey = Array(bytes)
        } else if let keyFile {
            do {
                publicKey = try BundlePublicKey(contentsOf: keyFile).bytes
            } catch let error as BundleError {
                throw wrong("public-key-file", "cannot be read: \(error.message)")
            }
        }
        if case .channel = location, publicKey == nil {
            throw wrong("channel", "needs offline-bundle.public-key or offline-bundle.public-key-file: the key the channel's documents are signed with")
        }
        var options = LoaderOptions()
        if let seconds = config.double(forKey: "max-age") {
            guard seconds >= 0 else { throw wrong("max-age", "must be a number of seconds, not \(seconds)") }
            options.maxAge = .milliseconds(Int64(seconds * 1000))
        }
        if let statuses = config.intArray(forKey: "fallback-statuses") {
            guard statuses.allSatisfy({ (100...599).contains($0) }) else { throw wrong("fallback-statuses", "holds a status outside 100 to 599") }
            options.fallbackStatuses = Set(statuses)
        }
        if let directory = config.string(forKey: "cache-directory") {
            let bytes = config.int(forKey: "cache-bytes") ?? 64 << 20
            guard bytes > 0 else { throw wrong("cache-bytes", "must be above 0") }
            options.lastSeen = try LastSeenCache(directory: directory, maxBytes: UInt64(bytes))
        }
        self.options = options
        if let interval = config.double(forKey: "reload-interval") {
            guard interval > 0 else { throw wrong("reload-interval", "must be a number of seconds above 0, not \(interval)") }
            reloadInterval = interval
        }
        remoteCacheDirectory = config.string(forKey: "remote-cache-directory")
        let loaderOnly: [String] = ["policy", "timeout", "max-age", "fallback-statuses", "cache-directory", "cache-bytes"]
        loaderOnlyKeys = loaderOnly.filter { key in
            let name = ConfigKey(key)
            return config.string(forKey: name) != nil || config.double(forKey: name) != nil || config.intArray(forKey: name) != nil
        }.map { "offline-bundle." + $0 }
    }

    /// `remote` for the bundle named by `key` (`url` or `channel`), with `remote-cache-directory` when given; a
    /// refusal naming the key when there is none.
    package func remote(_ remote: RemoteOptions?, for key: String) throws -> RemoteOptions {
        guard var remote else {
            throw BundleError(
                .invalidArgument,
                "configuration: offline-bundle.\(key) (\(OfflineLoader.environmentName(of: key))) names a bundle on a server: mounting it needs RemoteOptions (a transport, such as OfflineBundleHTTPClient's HTTPClientRemoteTransport)"
            )
        }
        if let remoteCacheDirectory { remote.cacheDirectory = remoteCacheDirectory }
        return remote
    }
}

extension BundleReloader {
    /// A reloader of the bundle the configuration names (``OfflineLoader/init(configuration:remote:)``'s keys):
    /// a file checked every `offline-bundle.reload-interval` seconds (2 unless given) and on SIGHUP, a URL the same
    /// way, or a release channel polled at that interval; run it as a Service.
    ///
    /// - Throws: ``BundleError`` naming the key when a value is missing or wrong, and as mounting throws otherwise.
    public convenience init(configuration: ConfigReader, remote: RemoteOptions? = nil) throws {
        let settings = try OfflineBundleSettings(configuration)
        let interval = Duration.seconds(settings.reloadInterval ?? 2)
        switch settings.location {
        case .path(let path):
            try self.init(
                paths: [path], mountOptions: .init(requiredPublicKey: settings.publicKey), policy: settings.policy, options: settings.options,
                interval: interval)
        case .url(let url):
            try self.init(
                paths: [url], mountOptions: .init(requiredPublicKey: settings.publicKey), policy: settings.policy, options: settings.options,
                interval: interval, remote: try settings.remote(remote, for: "url"))
        case .channel(let url):
            let channel = try ReleaseChannel(url: url, publicKey: settings.publicKey ?? [], remote: try settings.remote(remote, for: "channel"))
            try self.init(channel: channel, policy: settings.policy, options: settings.options, interval: interval)
        }
    }
}
