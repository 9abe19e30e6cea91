// The peer in the serve benchmark: Hummingbird's own FileMiddleware serving a folder from disk.
//
// Usage: packager-bench-fileserver ROOT PORT
import Foundation
import Hummingbird
import Logging

let arguments = CommandLine.arguments
guard arguments.count == 3, let port = Int(arguments[2]) else {
    print("usage: packager-bench-fileserver ROOT PORT")
    exit(2)
}
var logger = Logger(label: "file-server")
logger.logLevel = .warning
let router = Router()
router.add(middleware: FileMiddleware(arguments[1], searchForIndexHtml: true, logger: logger))
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)), logger: logger)
try await app.runService()
