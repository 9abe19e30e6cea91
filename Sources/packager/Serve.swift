import ArgumentParser
import Foundation
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import OfflineBundle
import OfflineBundleHummingbird
import PackagerKit

extension Packager {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve a bundle over HTTP, as the origin answered when it was built.",
            discussion: """
                Requests map to request keys by path: GET /guide/ answers the bundle's https://docs.example.com/guide/. \
                A bundle with several origins needs --origin, or --route HOST=ORIGIN to choose by Host. \
                What the bundle does not hold is a 404.

                Several bundles are layered: serve hotfix.zip release.zip answers from hotfix.zip first. \
                On SIGHUP, and when a bundle file is replaced (checked every --reload-check seconds), the bundles are \
                mounted again and swapped in at once; requests already answering finish from the old ones. A \
                bundle that no longer mounts is reported, and the old ones keep answering.

                With --tls-cert and --tls-key it serves HTTPS, and HTTP/2 to clients that offer it (ALPN).

                Example: packager serve docs.bundle.zip --port 8080
                """
        )

        @Argument(help: "The bundles to serve; for each request, the first that holds it answers.")
        var bundles: [String]

        @Option(help: "The address to listen on.")
        var host = "127.0.0.1"

        @Option(help: "The port to listen on (0 picks a free one).")
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
                Memory for answers kept ready to send: whole responses to plain GETs over HTTP (7/8) and inflated bodies (1/8; all of it \
                over HTTPS). Default: 64M; 0 for none; sizes as in a declaration.
                """)
        var cacheSize = "64M"

        @Option(
            name: .customLong("reload-check"),
            help: "Seconds between checks whether a bundle file was replaced (default: 2; 0 reloads on SIGHUP only).")
        var reloadCheck: Double = 2

        @Option(
            name: .customLong("rules"),
            help: "A rules file (YAML: block, substitutions) checked before the bundles; read again on each reload.")
        var rulesFile: String?

        @Option(name: .customLong("access-log"), help: "Append a line per request to this file, in the common log format ('-' for standard output).")
        var accessLog: String?

        @Option(name: .customLong("tls-cert"), help: "A PEM file with the server's certificate (and intermediates): serve HTTPS, HTTP/2 by ALPN.")
        var tlsCertificate: String?

        @Option(help: "Threads answering requests over plain HTTP (default: one per core).")
        var threads: Int?

        @Option(name: .customLong("tls-key"), help: "A PEM file with the private key of --tls-cert.")
        var tlsKey: String?

        func validate() throws {
            guard !bundles.isEmpty else { throw ValidationError("give at least one bundle to serve") }
            guard reloadCheck.isFinite, reloadCheck >= 0, reloadCheck <= 86_400 else {
                throw ValidationError("--reload-check must be 0 (SIGHUP only) or a number of seconds up to 86400")
            }
            guard cacheSize == "0" || DeclarationParser.byteSize(cacheSize) != nil else {
                throw ValidationError("--cache-size: '\(cacheSize)' is not a size (say 0, 64M or 1G)")
            }
            if let threads, !(1...1024).contains(threads) { throw ValidationError("--threads must be 1 to 1024") }
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
                let key = try publicKey.map(readPublicKey)
                let paths = bundles
                // One budget. Over plain HTTP, seven eighths keep whole responses ready to send (identity and gzip
                // answers to plain GETs) and an eighth keeps inflated bodies (ranges, bodies too large to keep whole);
                // over HTTPS all of it keeps inflated bodies. The bundles served share theirs out evenly.
                let total = cacheSize == "0" ? 0 : Int(DeclarationParser.byteSize(cacheSize) ?? 0)
                let responses = tlsCertificate == nil ? total - total / 8 : 0
                let cache = (total - responses) / paths.count
                let rulesFile = self.rulesFile
                @Sendable func mount() throws -> OfflineLoader {
                    let loader = OfflineLoader(
                        bundles: try paths.map { try MountedBundle(path: $0, options: .init(requiredPublicKey: key, inflatedCacheBytes: cache)) })
                    guard let rulesFile else { return loader }
                    do {
                        return try loader.adding(OfflineRules(contentsOf: rulesFile))
                    } catch let error as BundleError {
                        throw PackagerError(.invalidInput, error.message)
                    }
                }
                let loader = try mount()
                let handle = LoaderHandle(loader)
                let middleware: OfflineBundleMiddleware<ServeContext>
                if !routes.isEmpty {
                    middleware = OfflineBundleMiddleware(
                        handle: handle,
                        routes: try routes.map { text in
                            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                            guard parts.count == 2 else { throw PackagerError(.invalidInput, "--route takes HOST=ORIGIN, not '\(text)'") }
                            return .init(host: parts[0], origin: parts[1])
                        })
                } else if let origin {
                    middleware = OfflineBundleMiddleware(handle: handle, routes: [.init(origin: origin)])
                } else {
                    do {
                        middleware = OfflineBundleMiddleware(handle: handle, routes: try OfflineBundleMiddleware<ServeContext>(loader: loader).routes)
                    } catch let error as BundleError {
                        throw PackagerError(.invalidInput, error.message + "; use --origin ORIGIN or --route HOST=ORIGIN")
                    }
                }
                let log = try accessLog.map(AccessLog<ServeContext>.open)
                let names = Set(allowedHosts.map { $0.lowercased() } + routes.compactMap { $0.split(separator: "=").first.map { $0.lowercased() } })
                var logger = Logger(label: "packager-serve")
                logger.logLevel = .warning
                let running: Running
                do {
                    running = try await start(
                        handle: handle, middleware: middleware, allowed: names, responseCacheSize: responses, log: log, logger: logger)
                } catch let error as OfflineBundleServer.TLSFileError {
                    throw PackagerError(.invalidInput, "cannot serve HTTPS: \(error.message)")
                } catch let error as IOError {
                    // Binding fails before anything is served: say where, and why, in words.
                    let reason = String(cString: strerror(error.errnoCode)).lowercased()
                    let hint = error.errnoCode == EADDRINUSE ? " (another server listens there; choose another --port)" : ""
                    throw PackagerError(.io, "cannot serve on \(host):\(port): \(reason)\(hint)")
                }
                // Written straight to the descriptor so a script reading the port sees it at once.
                let scheme = tlsCertificate == nil ? "http" : "https"
                let entries = loader.bundles.map(\.entryCount).reduce(0, +)
                FileHandle.standardOutput.write(
                    Data("serving \(paths.joined(separator: ", ")) (\(entries) entries) on \(scheme)://\(host):\(running.port)/\n".utf8))
                let reloader = Reloader(paths: paths, handle: handle, mount: mount)
                Interrupts.onHangup { reloader.reload(because: "SIGHUP") }
                let interval = reloadCheck
                let watch = Task { if interval > 0 { await reloader.watch(every: interval) } }
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

    /// Starts the server: plain HTTP/1.1 from a SwiftNIO handler (the same answers as the middleware, without the
    /// framework's cost per request), or HTTPS with HTTP/2 by ALPN through Hummingbird.
    func start(
        handle: LoaderHandle, middleware: OfflineBundleMiddleware<ServeContext>, allowed names: Set<String>, responseCacheSize: Int, log: FileHandle?,
        logger: Logger
    ) async throws -> Running {
        guard let tlsCertificate else {
            var served: (@Sendable (ServedRequest) -> Void)?
            if let log { served = { (request: ServedRequest) in log.write(Data(AccessLog<ServeContext>.line(for: request).utf8)) } }
            let server = try await OfflineBundleChannelServer.start(
                handle: handle, routes: middleware.routes, host: host, port: port, serverName: "packager", responseCacheSize: responseCacheSize,
                accepts: { HostGuard<ServeContext>.accepts($0, allowed: names) },
                served: served, group: threads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) } ?? MultiThreadedEventLoopGroup.singleton)
            return Running(port: server.port, wait: { try await server.wait(shutdownSignals: [.sigterm, .sigint]) })
        }
        let router = Router(context: ServeContext.self)
        if let log { router.add(middleware: AccessLog<ServeContext>(output: log)) }
        router.add(middleware: HostGuard(allowed: names))
        router.add(middleware: middleware)
        let tls = OfflineBundleServer.TLS(certificateChain: tlsCertificate, privateKey: tlsKey ?? "")
        let server = try await OfflineBundleServer.start(
            responder: router.buildResponder(), host: host, port: port, serverName: "packager", shutdownSignals: [.sigterm, .sigint], tls: tls,
            logger: logger)
        return Running(port: server.port, wait: { try await server.wait() })
    }
}

/// Mounts the served bundles again and swaps them in: on SIGHUP, and when a bundle file is replaced.
final class Reloader: Sendable {
    let paths: [String]
    let handle: LoaderHandle
    let mount: @Sendable () throws -> OfflineLoader
    /// What each file was when last mounted (device, inode, size, modification time).
    private let seen: NIOLockedValueBox<[String: [Int]]>

    init(paths: [String], handle: LoaderHandle, mount: @escaping @Sendable () throws -> OfflineLoader) {
        self.paths = paths
        self.handle = handle
        self.mount = mount
        seen = NIOLockedValueBox(Dictionary(uniqueKeysWithValues: paths.map { ($0, Self.identity($0)) }))
    }

    static func identity(_ path: String) -> [Int] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        // The status-change time too: a write in place with its modification time set back still shows.
        return [
            Int(info.st_dev), Int(info.st_ino), Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ctim.tv_sec),
            Int(info.st_ctim.tv_nsec),
        ]
    }

    /// Mounts every bundle again; on success the new loader answers new requests, on failure the old one stays.
    func reload(because reason: String) {
        let identities = Dictionary(uniqueKeysWithValues: paths.map { ($0, Self.identity($0)) })
        do {
            let loader = try mount()
            handle.replace(with: loader)
            seen.withLockedValue { $0 = identities }
            let entries = loader.bundles.map(\.entryCount).reduce(0, +)
            FileHandle.standardOutput.write(Data("reloaded \(paths.joined(separator: ", ")) (\(reason)): \(entries) entries\n".utf8))
        } catch {
            // Not again for the same files: a half-copied bundle is retried when it changes again, or on SIGHUP.
            seen.withLockedValue { $0 = identities }
            FileHandle.standardError.write(
                Data(
                    "packager: not reloaded (\(reason)): \(error); the bundles already mounted keep answering (a file written in place, not replaced, has each body checked again, and altered ones refused)\n"
                        .utf8))
        }
    }

    /// Checks every `interval` seconds whether a bundle file was replaced or changed, and reloads when one was.
    func watch(every interval: Double) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(interval))
            let changed = seen.withLockedValue { seen in paths.contains { Self.identity($0) != seen[$0] } }
            if changed && !Task.isCancelled { reload(because: "a bundle file changed") }
        }
    }
}

/// The request context of `packager serve`: the basic one, with the client's address and what answered, for the
/// access log.
struct ServeContext: RequestContext, RemoteAddressRequestContext, AnswerRecordingRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    let answeredBy = AnswerRecord()

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// A line per request in the common log format (`host - - [time] "METHOD target HTTP/1.1" status bytes`), appended
/// to a file once the response head is known; bytes are the response's Content-Length (`-` when it has none). A last
/// quoted field says what answered: the bundle's file name, `rules`, `last-seen`, or `-`.
struct AccessLog<Context: RemoteAddressRequestContext & AnswerRecordingRequestContext>: RouterMiddleware {
    let output: FileHandle

    static func open(_ path: String) throws -> FileHandle {
        if path == "-" { return FileHandle.standardOutput }
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw PackagerError(.io, "cannot open the access log", subject: path) }
        handle.seekToEndOfFile()
        return handle
    }

    /// One request's line, ending with a newline.
    static func line(for served: ServedRequest) -> String {
        let source = served.source.map { "\"\($0.description.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" })\"" } ?? "\"-\""
        let time = commonLogTime(Date())
        // A request line is the client's: quotes and control bytes in it are escaped, so one line stays one line.
        let target = "\(served.method) \(served.target) HTTP/1.1".unicodeScalars.map { c -> String in
            c == "\"" || c == "\\" || c.value < 0x20 || c.value == 0x7F ? String(format: "\\x%02x", c.value) : String(c)
        }.joined()
        return "\(served.client ?? "-") - - [\(time)] \"\(target)\" \(served.status) \(served.contentLength ?? "-") \(source)\n"
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let line = { (status: Int, bytes: String) in
            let served = ServedRequest(
                client: context.remoteAddress?.ipAddress, method: request.method.rawValue, target: request.uri.string, status: status,
                contentLength: bytes, source: context.answeredBy.source)
            output.write(Data(Self.line(for: served).utf8))
        }
        do {
            let response = try await next(request, context)
            line(response.status.code, response.headers[.contentLength] ?? "-")
            return response
        } catch let error as HTTPError {
            line(error.status.code, "-")
            throw error
        } catch {
            line(500, "-")
            throw error
        }
    }

}

/// `23/Nov/2026:13:02:01 +0000`, the common log format's time, in UTC.
func commonLogTime(_ date: Date) -> String {
    var seconds = time_t(date.timeIntervalSince1970)
    var parts = tm()
    gmtime_r(&seconds, &parts)
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(two(parts.tm_mday))/\(months[Int(parts.tm_mon)])/\(parts.tm_year + 1900):\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) +0000"
}

/// Refuses requests whose Host names a host the server was not told about: a web page that rebinds its own name to
/// 127.0.0.1 then cannot read what the bundle serves. IP literals and localhost are always accepted.
struct HostGuard<Context: RequestContext>: RouterMiddleware {
    let allowed: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let host = request.head.authority.flatMap { HTTPRules.host(ofAuthority: $0) }
        return Self.accepts(host, allowed: allowed) ? try await next(request, context) : Response(status: .misdirectedRequest)
    }

    /// Whether a request with this Host (without port; nil when it has none) is answered.
    static func accepts(_ host: String?, allowed: Set<String>) -> Bool {
        guard let host else { return true }
        let isLiteral = host.hasPrefix("[") || host.split(separator: ".").allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
        return isLiteral || host == "localhost" || host.hasSuffix(".localhost") || allowed.contains(host)
    }
}

/// An Ed25519 public key from a file holding 32 raw bytes or their base64, with the error in the CLI's words.
func readPublicKey(_ path: String) throws -> [UInt8] {
    do {
        return try BundlePublicKey(contentsOf: path).bytes
    } catch let error as BundleError {
        throw PackagerError(.invalidInput, error.message)
    }
}
