import ArgumentParser
import Foundation
import HTTPTypes
import OfflineBundle
import OfflineBundleHTTPClient
import PackagerKit

/// The options of commands that take a bundle by URL (`serve`, `inspect`, `check`, `verify`): how a remote bundle is
/// read and where its ranges are kept.
struct RemoteFlags: ParsableArguments {
    @Option(
        name: .customLong("header"),
        help: "With a bundle URL: a header sent with every request for it, 'Name: value' (repeatable), e.g. a bucket's Authorization.")
    var headers: [String] = []

    @Option(name: .customLong("ca-file"), help: "With a bundle URL: trust the certificate authorities in this PEM file beside the system's, for HTTPS.")
    var caFile: String?

    @Option(
        name: .customLong("cache-dir"),
        help:
            "With a bundle URL: the folder that keeps fetched ranges across runs, made 0700; one that others may write to is refused (default: $XDG_CACHE_HOME/packager/remote, or ~/.cache/…)."
    )
    var cacheDirectory: String?

    @Option(name: .customLong("cache-bytes"), help: "With a bundle URL: the most the cache folder holds (sizes as in a declaration: 512M, 2G).")
    var cacheBytes = "1G"

    @Option(name: .customLong("remote-timeout"), help: "With a bundle URL: seconds one request may take.")
    var remoteTimeout: Double = 30

    @Option(name: .customLong("remote-retries"), help: "With a bundle URL: attempts after the first on a connection error or a 5xx.")
    var retries = 3

    @Option(
        name: .customLong("read-deadline"),
        help:
            "With a bundle URL: seconds a read of a body may wait for the server in all, retries included; past it serve answers 503 with Retry-After and the fetch goes on for the cache."
    )
    var readDeadline: Double = 10

    @Flag(
        name: .customLong("require-ranges"),
        help: "With a bundle URL: refuse a server that answers range requests with the whole object (default: download it once, with a warning).")
    var requireRanges = false

    func validate() throws {
        for header in headers {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex,
                header[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }),
                !header.contains("\r"), !header.contains("\n")
            else { throw ValidationError("--header takes 'Name: value', not '\(header)'") }
        }
        guard remoteTimeout.isFinite, remoteTimeout > 0, remoteTimeout <= 3600 else {
            throw ValidationError("--remote-timeout must be more than 0 and at most 3600 seconds")
        }
        guard readDeadline.isFinite, readDeadline > 0, readDeadline <= 3600 else {
            throw ValidationError("--read-deadline must be more than 0 and at most 3600 seconds")
        }
        guard (0...10).contains(retries) else { throw ValidationError("--remote-retries must be 0 to 10") }
        guard DeclarationParser.byteSize(cacheBytes) != nil else { throw ValidationError("--cache-bytes: '\(cacheBytes)' is not a size (say 512M or 4G)") }
    }

    /// The remote options for `locations`, when one of them is a URL; nil when all are files.
    func options(for locations: [String]) throws -> RemoteOptions? {
        guard locations.contains(where: RemoteOptions.isRemote) else { return nil }
        let transport: HTTPClientRemoteTransport
        do {
            transport = try HTTPClientRemoteTransport(caFile: caFile, connectTimeout: .seconds(min(remoteTimeout, 10)))
        } catch let error as BundleError {
            throw PackagerError(.invalidInput, error.message)
        }
        var parsed = HTTPFields()
        for header in headers {
            let colon = header.firstIndex(of: ":")!
            parsed = parsed.adding(String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let budget = UInt64(DeclarationParser.byteSize(cacheBytes) ?? 1 << 30)
        let whole: RemoteOptions.WholeObjectAnswer = requireRanges ? .refuse : .download
        return RemoteOptions(
            transport: transport, headers: parsed, cacheDirectory: cacheDirectory ?? Self.defaultCacheDirectory, cacheBytes: budget,
            timeout: .seconds(remoteTimeout), retries: retries, wholeObject: whole, readDeadline: .seconds(readDeadline))
    }

    /// `$XDG_CACHE_HOME/packager/remote`, or `~/.cache/packager/remote`.
    static var defaultCacheDirectory: String {
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/packager/remote" }
        return (environment["HOME"] ?? NSTemporaryDirectory()) + "/.cache/packager/remote"
    }
}
