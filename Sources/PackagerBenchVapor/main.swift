// The Vapor rows of the serve benchmark: a Vapor 4 application answering from a bundle through OfflineBundleVapor's
// middleware, or Vapor's own FileMiddleware serving the same files from disk (its peer).
//
// Usage: packager-bench-vapor --bundle BUNDLE PORT | --files ROOT PORT
import Foundation
import OfflineBundle
import OfflineBundleVapor
import Vapor

let arguments = CommandLine.arguments
guard arguments.count == 4, ["--bundle", "--files"].contains(arguments[1]), let port = Int(arguments[3]) else {
    print("usage: packager-bench-vapor --bundle BUNDLE PORT | --files ROOT PORT")
    exit(2)
}
/// Starts the application and answers until the benchmark stops it with a signal.
func serve() async throws {
    // Vapor's environment reads the command line: give it none of ours.
    let app = try await Application.make(Environment(name: "production", arguments: ["packager-bench-vapor"]))
    app.logger.logLevel = .warning
    app.http.server.configuration.hostname = "127.0.0.1"
    app.http.server.configuration.port = port
    if arguments[1] == "--bundle" {
        // The memory `packager serve` gives its caches by default (64 MiB), here all for inflated bodies: identity
        // answers to pages read again are not inflated again (FileMiddleware's files sit in the page cache).
        let bundle = try MountedBundle(path: arguments[2], options: .init(inflatedCacheBytes: 64 << 20))
        app.middleware.use(try OfflineBundleMiddleware(loader: OfflineLoader(bundles: [bundle])))
    } else {
        app.middleware.use(FileMiddleware(publicDirectory: arguments[2], defaultFile: "index.html"))
    }
    try await app.server.start(address: nil)
    while true { try await Task.sleep(for: .seconds(3600)) }
}
try await serve()
