// The peer in the serve benchmark: Hummingbird's own FileMiddleware serving a folder from disk.
//
// Usage: packager-bench-fileserver ROOT PORT
import Foundation
import Hummingbird
import Logging
import OfflineBundleHummingbird

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[2]) else {
    print("usage: packager-bench-fileserver ROOT PORT")
    exit(2)
}
var logger = Logger(label: "file-server")
logger.logLevel = .warning
let router = Router()
router.add(middleware: FileMiddleware(arguments[1], searchForIndexHtml: true, logger: logger))
let server = try await OfflineBundleServer.start(
    responder: router.buildResponder(), port: port, shutdownSignals: [.sigterm, .sigint], logger: logger)
try await server.wait()
