import Foundation

extension OfflineLoader {
    /// What a loader is made of, in one value: where its bundles are, how they mount, the policy and its overrides,
    /// the loader's options and a runtime rules file. ``OfflineLoader/mount(_:)`` makes a loader of it once;
    /// ``BundleReloader/init(_:interval:signals:logger:report:)`` again on each reload.
    ///
    /// ```swift
    /// let configuration = OfflineLoader.Configuration(
    ///     [.file("hotfix.bundle.zip"), .delta(.file("r2.delta.zip"), over: .file("r1.bundle.zip"))], policy: .bundleFirst)
    /// let loader = try await OfflineLoader.mount(configuration)
    /// ```
    public struct Configuration: Sendable {
        /// Where the bundles are, in order: the first with an entry for a request answers it.
        public var bundles: [BundleLocation]
        /// What mounting insists on (a signature by the release key) and how reads are checked.
        public var mountOptions: MountedBundle.Options
        /// Which answers come from the bundles and which from the network.
        public var policy: OfflinePolicy
        /// Another policy for some hosts or URL prefixes.
        public var overrides: [PolicyOverride]
        /// Maximum age, fallback statuses, the last-seen cache.
        public var options: LoaderOptions
        /// A runtime rules file (``OfflineRules``), checked before the bundles; read again on each reload.
        public var rulesFile: String?

        /// A configuration of `bundles`, answering by `policy`.
        public init(
            _ bundles: [BundleLocation], mountOptions: MountedBundle.Options = MountedBundle.Options(), policy: OfflinePolicy = .bundleOnly,
            overrides: [PolicyOverride] = [], options: LoaderOptions = LoaderOptions(), rulesFile: String? = nil
        ) {
            self.bundles = bundles
            self.mountOptions = mountOptions
            self.policy = policy
            self.overrides = overrides
            self.options = options
            self.rulesFile = rulesFile
        }

        /// The files and URLs the bundles are read from, a delta's and its base's alike: the files are what a reloader
        /// watches.
        public var sources: [String] {
            func sources(of location: BundleLocation) -> [String] {
                switch location {
                case .file(let path): [path]
                case .remote(let url, _): [url]
                case .delta(let delta, let base): sources(of: delta) + sources(of: base)
                case .channel(let channel): [channel.url]
                case .mounted(let bundle): [bundle.remoteURL ?? bundle.path]
                }
            }
            return bundles.flatMap(sources)
        }

        /// A loader over the bundles mounted now, and the rules read now; blocks while they mount.
        package func mountBlocking() throws -> OfflineLoader {
            let loader = OfflineLoader(
                bundles: try bundles.map { try MountedBundle.mountBlocking($0, options: mountOptions) }, policy: policy, overrides: overrides,
                options: options)
            return try rulesFile.map { try loader.adding(OfflineRules(contentsOf: $0)) } ?? loader
        }
    }

    /// A loader over `configuration`'s bundles, mounted (``MountedBundle/mount(_:options:)``) off Swift's cooperative
    /// pool, with its rules file read.
    ///
    /// - Throws: ``BundleError`` when a bundle does not mount (missing, damaged, not signed by the required key) or the
    ///   rules file is not valid.
    public static func mount(_ configuration: Configuration) async throws -> OfflineLoader {
        try await withCheckedThrowingContinuation { done in
            DispatchQueue.global().async { done.resume(with: Result { try configuration.mountBlocking() }) }
        }
    }
}
