import Configuration
import Crypto
import Foundation
import OfflineBundle
import OfflineBundleConfiguration
import TestSupport
import Testing

/// A loader configured through swift-configuration: the environment's spellings, a JSON file, and wrong values said
/// with their key.
@Suite("swift-configuration: a loader from the environment or a file")
struct ConfigurationTests {
    static let origin = "https://docs.example.com"

    func environment(_ values: [String: String]) -> ConfigReader {
        ConfigReader(provider: EnvironmentVariablesProvider(environmentVariables: values))
    }

    @Test("the environment's OFFLINE_BUNDLE_* variables: path, policy and timeout, max age, fallback statuses")
    func fromEnvironment() throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: Self.origin, to: folder.path + "/docs.zip")
        let loader = try OfflineLoader(
            configuration: environment([
                "OFFLINE_BUNDLE_PATH": folder.path + "/docs.zip", "OFFLINE_BUNDLE_POLICY": "network-first", "OFFLINE_BUNDLE_TIMEOUT": "2.5",
                "OFFLINE_BUNDLE_FALLBACK_STATUSES": "404,429", "OFFLINE_BUNDLE_MAX_AGE": "60",
            ]))
        #expect(loader.policy == .networkFirst(timeout: .milliseconds(2500)))
        #expect(loader.options.fallbackStatuses == [404, 429] && loader.options.maxAge == .seconds(60))
        #expect(try loader.response(for: BundleRequest(url: Self.origin + "/"))?.bodyData() == Data(samplePage.utf8))
        // Only the path: bundle-only, as OfflineLoader(path:) is.
        #expect(try OfflineLoader(configuration: environment(["OFFLINE_BUNDLE_PATH": folder.path + "/docs.zip"])).policy == .bundleOnly)
    }

    @Test("a JSON file: a signed bundle mounts with its key; another key refuses it; a last-seen cache where the file says")
    func fromJSONFile() async throws {
        let folder = try TemporaryFolder()
        let key = Curve25519.Signing.PrivateKey()
        try writeSampleBundle(origin: Self.origin, to: folder.path + "/docs.zip", signingKey: key)
        func config(publicKey: Data) async throws -> ConfigReader {
            let settings: [String: Any] = [
                "offline-bundle": [
                    "path": folder.path + "/docs.zip", "public-key": publicKey.base64EncodedString(), "policy": "bundle-first",
                    "cache-directory": folder.path + "/last-seen", "cache-bytes": 1 << 20,
                ]
            ]
            try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: folder.path + "/config.json"))
            return ConfigReader(provider: try await FileProvider<JSONSnapshot>(filePath: .init(folder.path + "/config.json")))
        }
        let loader = try OfflineLoader(configuration: try await config(publicKey: key.publicKey.rawRepresentation))
        #expect(loader.policy == .bundleFirst && loader.options.lastSeen?.maxBytes == 1 << 20)
        #expect(loader.response(for: BundleRequest(url: Self.origin + "/logo.png")) != nil)
        let other = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
        let otherConfig = try await config(publicKey: other)
        let refused = #expect(throws: BundleError.self) { try OfflineLoader(configuration: otherConfig) }
        #expect(refused?.code == .signature, "\(String(describing: refused))")
    }

    @Test("one place for the bundle: path, url or channel; a URL needs RemoteOptions, a channel a key; one key, not two")
    func placesAndKeys() throws {
        let cases: [([String: String], String)] = [
            (
                ["OFFLINE_BUNDLE_PATH": "/b.zip", "OFFLINE_BUNDLE_URL": "https://cdn.example/b.zip"],
                "offline-bundle.path (OFFLINE_BUNDLE_PATH) and offline-bundle.url (OFFLINE_BUNDLE_URL) are both set"
            ),
            (["OFFLINE_BUNDLE_URL": "/b.zip"], "offline-bundle.url (OFFLINE_BUNDLE_URL) is '/b.zip': it takes an http(s) URL"),
            (["OFFLINE_BUNDLE_URL": "https://cdn.example/b.zip"], "names a bundle on a server: mounting it needs RemoteOptions"),
            (["OFFLINE_BUNDLE_CHANNEL": "https://cdn.example/channel.json"], "offline-bundle.channel (OFFLINE_BUNDLE_CHANNEL) needs offline-bundle.public-key"),
            (
                [
                    "OFFLINE_BUNDLE_PATH": "/b.zip", "OFFLINE_BUNDLE_PUBLIC_KEY": Data(count: 32).base64EncodedString(),
                    "OFFLINE_BUNDLE_PUBLIC_KEY_FILE": "/k.pub",
                ],
                "offline-bundle.public-key (OFFLINE_BUNDLE_PUBLIC_KEY) and offline-bundle.public-key-file (OFFLINE_BUNDLE_PUBLIC_KEY_FILE) are both set"
            ),
        ]
        for (values, says) in cases {
            let refused = #expect(throws: BundleError.self) { try OfflineLoader(configuration: environment(values)) }
            #expect(refused?.code == .invalidArgument && refused?.message.contains(says) == true, "\(values): \(String(describing: refused))")
        }
    }

    @Test("BundleReloader(configuration:): the same keys, and the next release taken when the file is replaced")
    func reloaderFromConfiguration() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/docs.zip"
        try writeBundle([Self.origin + "/release.txt": Data("one".utf8)], to: path)
        let reloader = try BundleReloader(
            configuration: environment(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_POLICY": "bundle-first", "OFFLINE_BUNDLE_RELOAD_INTERVAL": "0.5"]))
        #expect(reloader.handle.loader.policy == .bundleFirst)
        #expect(try reloader.handle.loader.response(for: BundleRequest(url: Self.origin + "/release.txt"))?.bodyData() == Data("one".utf8))
        // The next release, written beside and renamed over it, as a release job does.
        try writeBundle([Self.origin + "/release.txt": Data("two".utf8)], to: path + ".next")
        #expect(rename(path + ".next", path) == 0)
        reloader.reload(because: "test")
        #expect(try reloader.handle.loader.response(for: BundleRequest(url: Self.origin + "/release.txt"))?.bodyData() == Data("two".utf8))
        #expect(throws: BundleError.self) {
            try BundleReloader(configuration: environment(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_RELOAD_INTERVAL": "0"]))
        }
    }

    @Test("a missing path, an unknown policy, a key that is not one, a bad status: refused, naming the key and its environment spelling")
    func wrongValues() throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: Self.origin, to: folder.path + "/docs.zip")
        let path = folder.path + "/docs.zip"
        func refusal(_ values: [String: String]) -> String {
            do {
                _ = try OfflineLoader(configuration: environment(values))
                return "accepted"
            } catch { return "\(error)" }
        }
        #expect(refusal([:]).contains("offline-bundle.path (OFFLINE_BUNDLE_PATH) is not set"))
        #expect(
            refusal(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_POLICY": "offline"]).contains("offline-bundle.policy (OFFLINE_BUNDLE_POLICY) is 'offline'"))
        #expect(refusal(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_PUBLIC_KEY": "c2hvcnQ="]).contains("OFFLINE_BUNDLE_PUBLIC_KEY"))
        #expect(refusal(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_FALLBACK_STATUSES": "404,1000"]).contains("fallback-statuses"))
        #expect(refusal(["OFFLINE_BUNDLE_PATH": path, "OFFLINE_BUNDLE_POLICY": "network-first", "OFFLINE_BUNDLE_TIMEOUT": "0"]).contains("timeout"))
        #expect(refusal(["OFFLINE_BUNDLE_PATH": folder.path + "/none.zip"]).contains("none.zip"))
        #expect(OfflineLoader.configurationKeys.contains("offline-bundle.cache-directory"))
    }
}
