import Configuration
import Foundation
import OfflineBundle

extension OfflineLoader {
    /// The keys a loader reads from swift-configuration, under `offline-bundle`, with their environment spellings
    /// (swift-configuration's `EnvironmentVariablesProvider` reads `offline-bundle.path` as `OFFLINE_BUNDLE_PATH`):
    ///
    /// | key | environment | value |
    /// |---|---|---|
    /// | `offline-bundle.path` | `OFFLINE_BUNDLE_PATH` | the bundle to mount (required) |
    /// | `offline-bundle.policy` | `OFFLINE_BUNDLE_POLICY` | `bundle-only` (default), `bundle-first` or `network-first` |
    /// | `offline-bundle.timeout` | `OFFLINE_BUNDLE_TIMEOUT` | seconds the network has under `network-first` (default 5) |
    /// | `offline-bundle.public-key` | `OFFLINE_BUNDLE_PUBLIC_KEY` | the Ed25519 key the bundle must be signed by, base64 |
    /// | `offline-bundle.public-key-file` | `OFFLINE_BUNDLE_PUBLIC_KEY_FILE` | the same, as `packager keygen`'s `.pub` file |
    /// | `offline-bundle.max-age` | `OFFLINE_BUNDLE_MAX_AGE` | seconds past which an entry counts as a miss while the network answers |
    /// | `offline-bundle.fallback-statuses` | `OFFLINE_BUNDLE_FALLBACK_STATUSES` | statuses besides 5xx the bundle answers instead of (`404,429`) |
    /// | `offline-bundle.cache-directory` | `OFFLINE_BUNDLE_CACHE_DIRECTORY` | where a last-seen cache keeps what the network answered |
    /// | `offline-bundle.cache-bytes` | `OFFLINE_BUNDLE_CACHE_BYTES` | the most that cache holds (default 64 MiB) |
    /// | `offline-bundle.reload-interval` | `OFFLINE_BUNDLE_RELOAD_INTERVAL` | seconds between a `BundleReloader`'s checks (default 2) |
    public static let configurationKeys = [
        "path", "policy", "timeout", "public-key", "public-key-file", "max-age", "fallback-statuses", "cache-directory", "cache-bytes",
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
    /// - Throws: ``BundleError`` with code `.invalidArgument` naming the key when a value is missing or wrong (no
    ///   path, an unknown policy, a key that is not 32 bytes), and as mounting throws otherwise.
    public convenience init(configuration: ConfigReader) throws {
        let settings = try OfflineBundleSettings(configuration)
        try self.init(path: settings.path, publicKey: settings.publicKey, policy: settings.policy, options: settings.options)
    }

    /// `OFFLINE_BUNDLE_` and the key, uppercased, a `-` as `_`: how swift-configuration's environment provider spells it.
    static func environmentName(of key: String) -> String {
        "OFFLINE_BUNDLE_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

/// The loader settings read from `offline-bundle.*` (``OfflineLoader/configurationKeys``).
struct OfflineBundleSettings {
    var path: String
    var policy: OfflinePolicy
    var publicKey: [UInt8]?
    var options: LoaderOptions
    var reloadInterval: Double

    init(_ configuration: ConfigReader) throws {
        let config = configuration.scoped(to: "offline-bundle")
        func wrong(_ key: String, _ problem: String) -> BundleError {
            BundleError(.invalidArgument, "configuration: offline-bundle.\(key) (\(OfflineLoader.environmentName(of: key))) \(problem)")
        }
        guard let path = config.string(forKey: "path"), !path.isEmpty else { throw wrong("path", "is not set: it names the bundle to mount") }
        let timeout = config.double(forKey: "timeout") ?? 5
        guard timeout > 0 else { throw wrong("timeout", "must be a number of seconds above 0, not \(timeout)") }
        let policy: OfflinePolicy
        switch config.string(forKey: "policy") ?? "bundle-only" {
        case "bundle-only": policy = .bundleOnly
        case "bundle-first": policy = .bundleFirst
        case "network-first": policy = .networkFirst(timeout: .milliseconds(Int64(timeout * 1000)))
        case let other: throw wrong("policy", "is '\(other)': it is bundle-only, bundle-first or network-first")
        }
        var publicKey: [UInt8]?
        if let base64 = config.string(forKey: "public-key", isSecret: false) {
            guard let bytes = Data(base64Encoded: base64.trimmingCharacters(in: .whitespaces)), bytes.count == 32 else {
                throw wrong("public-key", "is not the base64 of a 32-byte Ed25519 public key")
            }
            publicKey = Array(bytes)
        } else if let file = config.string(forKey: "public-key-file") {
            publicKey = try BundlePublicKey(contentsOf: file).bytes
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
        let interval = config.double(forKey: "reload-interval") ?? 2
        guard interval > 0 else { throw wrong("reload-interval", "must be a number of seconds above 0, not \(interval)") }
        (self.path, self.policy, self.publicKey, self.options, self.reloadInterval) = (path, policy, publicKey, options, interval)
    }

}

extension BundleReloader {
    /// A reloader of the bundle the configuration names (``OfflineLoader/init(configuration:)``'s keys), checking the
    /// file every `offline-bundle.reload-interval` seconds (2 unless given) and on SIGHUP; run it as a Service.
    ///
    /// - Throws: ``BundleError`` naming the key when a value is missing or wrong, and as mounting throws otherwise.
    public convenience init(configuration: ConfigReader) throws {
        let settings = try OfflineBundleSettings(configuration)
        try self.init(
            paths: [settings.path], mountOptions: .init(requiredPublicKey: settings.publicKey), policy: settings.policy, options: settings.options,
            interval: settings.reloadInterval)
    }
}
