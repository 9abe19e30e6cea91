import Foundation

/// A real web server from Debian (nginx, Apache httpd, lighttpd, Caddy) serving a folder on loopback, started by
/// `scripts/origin.sh`. Tests use the kinds installed here (`make deps` and CI install them all).
public final class RealServer: Sendable {
    public let kind: String
    public let base: String
    let state: String

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/origin.sh").path

    /// The kinds whose server is installed, in the script's order (empty when the script cannot run).
    public static let installed: [String] = {
        guard let result = try? run("/bin/bash", [script, "kinds"]), result.status == 0 else { return [] }
        return result.output.split(separator: "\n").map(String.init)
    }()

    init(kind: String, base: String, state: String) {
        self.kind = kind
        self.base = base
        self.state = state
    }

    /// Starts `kind` serving `root` (made readable to the server's user) on a free port; its config and logs go to
    /// `state`. The script waits for the server off Swift's cooperative pool.
    public static func start(_ kind: String, root: String, state: String) async throws -> RealServer {
        // Apache serves as www-data: the folder and the path to it must be readable.
        _ = try await run("/bin/chmod", ["-R", "a+rX", root])
        var lastError = ""
        for _ in 0..<3 {
            let port = try freePort()
            let result = try await run("/bin/bash", [script, "start", kind, root, String(port), state])
            if result.status == 0 { return RealServer(kind: kind, base: "http://127.0.0.1:\(port)", state: state) }
            lastError = result.output
        }
        throw RealServerError(message: "\(kind) did not start: \(lastError)")
    }

    public func stop() { _ = try? run("/bin/bash", [Self.script, "stop", state]) }

    deinit { stop() }
}

public struct RealServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
