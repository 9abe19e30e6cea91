import ArgumentParser
import Configuration
import Foundation
import Logging
import NIOCore
import NIOPosix
import OfflineBundle
import OfflineBundleConfiguration
import OfflineBundleServing
import PackagerKit
import ServiceLifecycle
import Yams

extension Packager {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Serve a bundle over HTTP, as the origin answered when it was built.",
            discussion: """
                Requests map to request keys by path: GET /guide/ answers the bundle's https://docs.example.com/guide/. \
                A bundle with several origins needs --origin, or --route HOST=ORIGIN to choose by Host. \
                What the bundle does not hold is a 404.

                Exits 2 when the bundles cannot be served as given (a file that does not exist, a delta without the \
                bundle it was made over or over another one, a --host that is not an address), 1 when one is damaged or \
                the port cannot be bound.

                Several bundles are layered: serve hotfix.zip release.zip answers from hotfix.zip first. A delta is \
                followed by the bundle it was made over: serve next.delta.zip release.zip answers as the next release. \
                On SIGHUP, and when a bundle file is replaced (checked every --reload-check seconds), the bundles are \
                mounted again and swapped in at once; requests already answering finish from the old ones. A \
                bundle that no longer mounts is reported, and the old ones keep answering.

                With --channel URL --public-key KEY it follows a release channel (packager channel write) instead of \
                bundle arguments: it serves the release the channel's signed document names, polls the channel every \
                --reload-check seconds, and swaps in each newer release, fetching only the bodies its cache folder \
                lacks. A document another key signed, or whose version is lower than the one held, is refused and the \
                release held answers on.

                On SIGTERM or SIGINT it stops accepting at once, lets the answers in flight finish (up to \
                --shutdown-grace seconds), closes idle connections, and exits 0; a second signal exits at once.

                With --tls-cert and --tls-key it serves HTTPS, and HTTP/2 to clients that offer it (ALPN).

                Example: packager serve docs.bundle.zip --port 8080
                """
        )

        @Argument(help: "The bundles to serve (files, or http(s) URLs read by range requests); for each request, the first that holds it answers.")
        var bundles: [String] = []

        @Option(
            name: .customLong("channel"),
            help: "Follow the release channel at this URL (a document packager channel write made), instead of bundle arguments; needs --public-key.")
        var channel: String?

        @OptionGroup(title: "Bundle URLs") var remote: RemoteFlags

        @Option(
            name: .customLong("config"),
            help: ArgumentHelp(
                """
                A JSON or YAML (.yml, .yaml) file of the settings a service's OfflineLoader(configuration:) reads (OFFLINE_BUNDLE_* variables \
                override it): offline-bundle.path, url or channel, public-key or public-key-file, reload-interval, \
                remote-cache-directory. Bundle arguments, --channel, --public-key and --reload-check come first.
                """, valueName: "file"))
        var configFile: String?

        @Option(help: "The address to listen on.")
        var host = "127.0.0.1"

        // Read unconditionally, so `--port -1` is a port the check below refuses, not a missing value.
        @Option(parsing: .unconditional, help: "The port to listen on (0 picks a free one).")
        var port = 8080

        @Option(help: "The origin whose keys are served at the root (default: the bundle's only origin).")
        var origin: String?

        @Option(name: .customLong("route"), help: "HOST=ORIGIN: requests with this Host answer from this origin (repeatable).")
        var routes: [String] = []

        @Option(name: .customLong("public-key"), help: "A file with the Ed25519 public key (32 raw bytes or base64) the bundle must be signed by.")
        var publicKey: String?

        @Option(
            name: .customLong("allow-host"),
            help: "A Host name requests may carry besides IP addresses, localhost and --route hosts (repeatable); others get 421, which stops DNS rebinding.")
        var allowedHosts: [String] = []

        @Option(
            name: .customLong("cache-size"),
            help: """
                Memory for answers kept ready to send: whole responses to plain GETs (7/8) and inflated bodies (1/8). \
                Default: 64M; 0 for none; sizes as in a declaration.
                """)
        var cacheSize = "64M"

        @Option(
            name: .customLong("reload-check"),
            help: "Seconds between checks whether a bundle file was replaced (0 reloads on SIGHUP only; default 2).")
        var reloadCheck: Double?

        @Option(
            name: .customLong("rules"),
            help: "A rules file (YAML: block, substitutions) checked before the bundles; read again on each reload.")
        var rulesFile: String?

        @Option(name: .customLong("access-log"), help: "Append a line per request to this file, in the common log format ('-' for standard output).")
        var accessLog: String?

        @Option(
            name: .customLong("log-format"),
            help: "text, or json: one JSON object a line for the access log and for serve's own lines (serving, reloaded, scrubbed, warnings).")
        var logFormat = "text"

        @Option(
            name: .customLong("admin-port"),
            help: "Serve /metrics (Prometheus text format), /healthz and /readyz on this port (0 picks one), apart from the bundles'. Off by default.")
        var adminPort: Int?

        @Option(name: .customLong("admin-host"), help: "The address the admin port listens on (default: --host).")
        var adminHost: String?

        @Option(name: .customLong("tls-cert"), help: "A PEM file with the server's certificate (and intermediates): serve HTTPS, HTTP/2 by ALPN.")
        var tlsCertificate: String?

        @Option(name: .customLong("tls-key"), help: "A PEM file with the private key of --tls-cert.")
        var tlsKey: String?

        @Option(help: "Threads answering requests over plain HTTP (default: one per core).")
        var threads: Int?

        @Option(
            name: .customLong("shutdown-grace"),
            help:
                "Seconds the answers in flight may take to finish after SIGTERM or SIGINT (it stops accepting at once; a second signal exits at once).")
        var shutdownGrace: Double = 25

        @Option(
            name: .customLong("check-before-send"),
            help: """
                Bodies up to this size not yet checked since the mount are checked before their first byte goes out (a damaged \
                one answers 500, never a 200 with wrong bytes); larger ones are checked as they stream, and cut. Default: 16M.
                """)
        var checkBeforeSend = "16M"

        @Flag(
            name: .customLong("explain-misses"),
            help: """
                Answer a miss's 404 with an X-Offline-Miss field: the nearest recorded request and what differed (a query \
                parameter, the method, a header, the body). It names recorded URLs: for development. The access log and \
                /metrics explain misses without it.
                """)
        var explainMisses = false

        @Flag(
            name: .customLong("scrub"),
            help: "After each mount, check every body on a low-priority thread, so a damaged body of any size answers 500 from the first request.")
        var scrub = false

        @Option(
            name: .customLong("prefetch"),
            help: "With a bundle URL: a file of request keys (one URL per line) whose bodies are fetched at start and after each reload.")
        var prefetchFile: String?

        func validate() throws {
            guard logFormat == "text" || logFormat == "json" else { throw ValidationError("--log-format takes text or json, not '\(logFormat)'") }
            if let adminPort, !(0...65535).contains(adminPort) || (adminPort != 0 && adminPort == port) {
                throw ValidationError("--admin-port takes a port from 0 to 65535 other than --port, not \(adminPort)")
            }
            guard DeclarationParser.byteSize(checkBeforeSend) != nil else {
                throw ValidationError("--check-before-send takes a size (16M, 512K, 0), not '\(checkBeforeSend)'")
            }
            if let channel {
                guard bundles.isEmpty else { throw ValidationError("--channel serves the release its document names: give no bundles beside it") }
                guard RemoteOptions.isRemote(channel) else { throw ValidationError("--channel takes the channel document's http(s) URL, not '\(channel)'") }
                guard publicKey != nil || configFile != nil else {
                    throw ValidationError("--channel needs --public-key: the key the channel's documents are signed with")
                }
            }
            guard !bundles.isEmpty || channel != nil || configFile != nil else {
                throw ValidationError("give at least one bundle to serve, or --channel URL, or --config FILE")
            }
            if let reloadCheck, !(reloadCheck.isFinite && reloadCheck >= 0 && reloadCheck <= 86_400) {
                throw ValidationError("--reload-check must be 0 (SIGHUP only) or a number of seconds up to 86400")
            }
            guard cacheSize == "0" || DeclarationParser.byteSize(cacheSize) != nil else {
                throw ValidationError("--cache-size: '\(cacheSize)' is not a size (say 0, 64M or 1G)")
            }
            if let threads, !(1...1024).contains(threads) { throw ValidationError("--threads must be 1 to 1024") }
            guard shutdownGrace.isFinite, shutdownGrace >= 0, shutdownGrace <= 3600 else {
                throw ValidationError("--shutdown-grace must be 0 to 3600 seconds")
            }
            guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535") }
            guard (tlsCertificate == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
            let origins = [origin].compactMap { $0 } + routes.map { String($0.split(separator: "=", maxSplits: 1).last ?? "") }
            for text in origins {
                guard HTTPRules.isFetchableURL(text) else {
                    throw ValidationError("'\(text)' is not an origin such as https://docs.example.com")
                }
            }
        }

        func run() async throws {
            try await reportingErrorsAsync {
                // Before anything makes a metric: swift-metrics binds each to the backend it finds when it is made.
                let admin = adminPort.map { _ in AdminEndpoints() }
                let events = EventLog(json: logFormat == "json")
                // The command line first; what it leaves out, from --config.
                var settings: OfflineBundleSettings?
                if let configFile { settings = try await Self.settings(from: configFile) }
                var givenPaths = bundles
                var channel = self.channel
                if givenPaths.isEmpty, channel == nil, let location = settings?.location {
                    switch location {
                    case .path(let path), .url(let path): givenPaths = [path]
                    case .channel(let url): channel = url
                    }
                }
                let paths = givenPaths
                let key = try publicKey.map(readPublicKey) ?? settings?.publicKey
                if channel != nil, key == nil {
                    throw PackagerError(.invalidInput, "--channel needs --public-key: the key the channel's documents are signed with")
                }
                let reloadCheck = Duration.seconds(self.reloadCheck ?? settings?.reloadInterval ?? 2)
                if let settings {
                    for name in settings.loaderOnlyKeys {
                        events.warning(
                            "config", "\(configFile ?? ""): \(name) is a loader's setting: serve answers from its bundles alone and does not read it")
                    }
                }
                var remoteFlags = self.remote
                if remoteFlags.cacheDirectory == nil { remoteFlags.cacheDirectory = settings?.remoteCacheDirectory }
                let followed = try channel.map { url -> ReleaseChannel in
                    do {
                        return try ReleaseChannel(url: url, publicKey: key ?? [], remote: try remoteFlags.options(for: [url])!)
                    } catch let error as BundleError {
                        throw PackagerError(error.code == .remote ? .io : .invalidInput, error.message)
                    }
                }
                // One budget: seven eighths keep whole responses ready to send (identity and gzip answers to plain
                // GETs) and an eighth keeps inflated bodies (ranges, bodies too large to keep whole). The bundles
                // served share theirs out evenly.
                let total = cacheSize == "0" ? 0 : Int(DeclarationParser.byteSize(cacheSize) ?? 0)
                let responses = total - total / 8
                let cache = (total - responses) / max(paths.count, 1)
                let rulesFile = self.rulesFile
                let remote = try remoteFlags.options(for: paths)
                let startupSet = try prefetchFile.map { path -> [String] in
                    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                        throw PackagerError(.invalidInput, "cannot read the prefetch list", subject: path)
                    }
                    return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
                }
                let checkFirst = UInt64(DeclarationParser.byteSize(checkBeforeSend) ?? 16 << 20)
                let scrubber = scrub ? Scrubber(events: events) : nil
                @Sendable func mount() throws -> OfflineLoader {
                    // A channel's release is checked by the digest its signed document names: it needs no signature of its own.
                    let bundles =
                        try followed.map { [try $0.mountRelease(options: .init(inflatedCacheBytes: cache, checkBeforeSend: checkFirst))] }
                        ?? MountedBundle.mount(
                            paths: paths, options: .init(requiredPublicKey: key, inflatedCacheBytes: cache, checkBeforeSend: checkFirst), remote: remote)
                    scrubber?.scrub(bundles)
                    // The startup set is fetched before the loader answers (a failure here fails the mount, as any read would).
                    if let startupSet { for bundle in bundles { try bundle.prefetch(keys: startupSet) } }
                    let loader = OfflineLoader(bundles: bundles)
                    guard let rulesFile else { return loader }
                    do {
                        return try loader.adding(OfflineRules(contentsOf: rulesFile))
                    } catch let error as BundleError {
                        throw PackagerError(.invalidInput, error.message)
                    }
                }
                let loader = try mount()
                admin?.mounted(loader)
                let handle = LoaderHandle(loader)
                let served: [BundleRoute]
                if !routes.isEmpty {
                    served = try routes.map { text in
                        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                        guard parts.count == 2 else { throw PackagerError(.invalidInput, "--route takes HOST=ORIGIN, not '\(text)'") }
                        return BundleRoute(host: parts[0], origin: parts[1])
                    }
                } else if let origin {
                    served = [BundleRoute(origin: origin)]
                } else {
                    do {
                        served = [try BundleServing.singleOriginRoute(of: loader)]
                    } catch let error as BundleError {
                        throw PackagerError(.invalidInput, error.message + "; use --origin ORIGIN or --route HOST=ORIGIN")
                    }
                }
                // A route to an origin no bundle holds answers nothing but 404s: said at start, with what they hold.
                let held = Set(loader.bundles.flatMap(\.origins))
                for route in served where !held.contains(route.origin) && !held.isEmpty {
                    events.warning(
                        "origin-not-held",
                        "no bundle holds \(route.origin): its requests will answer 404 (the bundles hold \(held.sorted().prefix(5).joined(separator: ", "))\(held.count > 5 ? ", …" : ""))"
                    )
                }
                let names = Set(allowedHosts.map { $0.lowercased() } + routes.compactMap { $0.split(separator: "=").first.map { $0.lowercased() } })
                let sink = try accessLog.map { try Self.accessLogSink($0, json: events.json) }
                // The metrics count from the record the access log writes, so the two agree.
                let record: (@Sendable (ServedRequest) -> Void)? =
                    if let admin {
                        { served in
                            admin.record(served)
                            sink?(served)
                        }
                    } else {
                        sink
                    }
                // Misses are explained where they are reported: in the access log, in /metrics, or in the 404 itself.
                let policy = ServerPolicy(
                    allowedHosts: names, accessLog: record, explainsMisses: record != nil, sendsMissHeader: explainMisses)
                let serving = BundleServing(handle: handle, routes: served, policy: policy)
                var logger = Logger(label: "packager-serve")
                logger.logLevel = .warning
                let running: Running
                do {
                    running = try await start(serving, responseCacheSize: responses, logger: logger, admin: admin, events: events)
                } catch let error as TLSFileError {
                    throw PackagerError(.invalidInput, "cannot serve HTTPS: \(error.message)")
                } catch let error where error is SocketAddressError || error is SocketAddressError.UnknownHost {
                    throw PackagerError(.invalidInput, "cannot serve on \(host): it is not an address, or a host name this machine resolves (--host)")
                } catch let error as IOError {
                    // Binding fails before anything is served: say where, and why, in words.
                    let reason = String(cString: strerror(error.errnoCode)).lowercased()
                    let hint = error.errnoCode == EADDRINUSE ? " (another server listens there; choose another --port)" : ""
                    throw PackagerError(.io, "cannot serve on \(host):\(port): \(reason)\(hint)")
                }
                // Written straight to the descriptor so a script reading the port sees it at once.
                let scheme = tlsCertificate == nil ? "http" : "https"
                let entries = loader.bundles.map(\.entryCount).reduce(0, +)
                // Each mounted bundle took its own path and, for a delta, its bases' after it: "next.zip over release.zip".
                var rest = paths[...]
                var shown = loader.bundles.map { bundle in
                    let group = rest.prefix(bundle.deltaDepth + 1)
                    rest = rest.dropFirst(group.count)
                    return group.map(RemoteObject.shown).joined(separator: " over ")
                }
                if let followed, let document = followed.document {
                    shown = ["\(RemoteObject.shown(followed.releaseURL ?? "")) (version \(document.version) of the channel \(followed.shownURL))"]
                }
                events.info(
                    "serving", "serving \(shown.joined(separator: ", ")) (\(entries) entries) on \(scheme)://\(host):\(running.port)/",
                    [("url", "\(scheme)://\(host):\(running.port)/")])
                scrubber?.start()
                let listed = followed?.shownURL ?? shown.joined(separator: ", ")
                // SIGHUP through the CLI's own handler (installed at launch, so none is lost while the server starts).
                let report: @Sendable (BundleReloader.Event) -> Void = { event in
                    switch event {
                    case .reloaded(let loader, let reason):
                        let entries = loader.bundles.map(\.entryCount).reduce(0, +)
                        admin?.mounted(loader)
                        events.info("reloaded", "reloaded \(listed) (\(reason)): \(entries) entries")
                    case .failed(let error, let reason) where followed != nil:
                        events.warning("not-reloaded", "not reloaded (\(reason)): \(error); the release held keeps answering")
                    case .failed(let error, let reason):
                        events.warning(
                            "not-reloaded",
                            "not reloaded (\(reason)): \(error); the bundles already mounted keep answering (a file written in place, not replaced, has each body checked again, and altered ones refused)"
                        )
                    }
                }
                let reloader =
                    if let followed {
                        BundleReloader(channel: followed, handle: handle, interval: reloadCheck, signals: [], logger: logger, mount: mount, report: report)
                    } else {
                        BundleReloader(paths: paths, handle: handle, interval: reloadCheck, signals: [], logger: logger, mount: mount, report: report)
                    }
                Interrupts.onHangup { DispatchQueue.global().async { reloader.reload(because: "SIGHUP") } }
                let watch = Task { try await reloader.run() }
                defer { watch.cancel() }
                try await running.wait()
            }
        }
    }
}

extension Packager.Serve {
    /// A server that listens: its port, and how to wait for it to stop.
    struct Running {
        var port: Int
        var wait: @Sendable () async throws -> Void
    }

    /// Starts the server: HTTP/1.1 from a SwiftNIO handler (the same answer step as the middleware, without the
    /// framework's cost per request), or HTTPS with HTTP/2 by ALPN through the same handler behind TLS.
    func start(_ serving: BundleServing, responseCacheSize: Int, logger: Logger, admin: AdminEndpoints?, events: EventLog) async throws -> Running {
        let tls = tlsCertificate.map { OfflineBundleChannelServer.TLS(certificateChain: $0, privateKey: tlsKey ?? "") }
        let server = try await OfflineBundleChannelServer.start(
            serving: serving, host: host, port: port, serverName: "packager", responseCacheSize: responseCacheSize, tls: tls,
            group: threads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) } ?? MultiThreadedEventLoopGroup.singleton)
        server.shutdownGrace = .milliseconds(Int64(shutdownGrace * 1000))
        return Running(
            port: server.port,
            wait: {
                // SIGTERM and SIGINT come through the CLI's own handler (installed at launch), which asks the group for a
                // graceful shutdown; a second one exits at once.
                // The admin server is listed first: a graceful shutdown stops the services from the last, so /readyz says
                // 503 while the answers in flight finish, and /metrics counts them.
                var services: [any Service] = [server]
                if let admin, let adminPort {
                    let adminAt = adminHost ?? host
                    let app = admin.application(host: adminAt, port: adminPort, handle: serving.handle, logger: logger) { port in
                        events.info(
                            "admin", "admin endpoints on http://\(adminAt):\(port)/ (metrics, healthz, readyz)", [("url", "http://\(adminAt):\(port)/")])
                    }
                    services.insert(app, at: 0)
                }
                let group = ServiceGroup(configuration: .init(services: services, logger: logger))
                Interrupts.onStop {
                    admin?.stopping.store(true, ordering: .relaxed)
                    Task { await group.triggerGracefulShutdown() }
                }
                try await group.run()
            })
    }

    /// Appends each request's line, in the common log format, to the file at `path` ('-': standard output).
    static func accessLogSink(_ path: String, json: Bool) throws -> @Sendable (ServedRequest) -> Void {
        let output: FileHandle
        if path == "-" {
            output = FileHandle.standardOutput
        } else {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            guard let handle = FileHandle(forWritingAtPath: path) else { throw PackagerError(.io, "cannot open the access log", subject: path) }
            handle.seekToEndOfFile()
            output = handle
        }
        return { served in output.write(Data((json ? served.jsonLogLine() : served.commonLogLine()).utf8)) }
    }
}

/// An Ed25519 public key from a file holding 32 raw bytes or their base64, with the error in the CLI's words.
extension Packager.Serve {
    /// The `offline-bundle.*` settings of the JSON or YAML (by its extension) file at `path`, the environment's
    /// `OFFLINE_BUNDLE_*` over them, each checked as a service's loader checks them; a refusal naming the key (exit 2).
    static func settings(from path: String) async throws -> OfflineBundleSettings {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PackagerError(.invalidInput, "cannot open \(path): no such file or directory")
        }
        let yaml = [".yml", ".yaml"].contains { path.lowercased().hasSuffix($0) }
        let kind = yaml ? "YAML" : "JSON"
        let example = yaml ? "offline-bundle:\\n  path: …" : "{\"offline-bundle\": {\"path\": …}}"
        let mapping =
            yaml
            ? (try? Yams.load(yaml: String(decoding: data, as: UTF8.self))) is [String: Any] : (try? JSONSerialization.jsonObject(with: data)) is [String: Any]
        guard mapping else {
            throw PackagerError(.invalidInput, "\(path) is not a \(kind) settings file: it holds no \(yaml ? "mapping" : "JSON object") (\(example))")
        }
        let file: any ConfigProvider
        do {
            file = yaml ? try await FileProvider<YAMLSnapshot>(filePath: .init(path)) : try await FileProvider<JSONSnapshot>(filePath: .init(path))
        } catch {
            throw PackagerError(.invalidInput, "\(path) is not a \(kind) settings file: \(error)")
        }
        // Which provider gave a key: the environment's variable overrides the file.
        let environment = ProcessInfo.processInfo.environment
        let source = { (key: String) -> String? in environment[OfflineLoader.environmentName(of: key)] != nil ? "the environment" : path }
        do {
            return try OfflineBundleSettings(ConfigReader(providers: [EnvironmentVariablesProvider(), file]), source: source)
        } catch let error as BundleError {
            throw PackagerError(.invalidInput, error.message)
        }
    }
}

func readPublicKey(_ path: String) throws -> [UInt8] {
    do {
        return try BundlePublicKey(contentsOf: path).bytes
    } catch let error as BundleError {
        throw PackagerError(.invalidInput, error.message)
    }
}
