import Foundation

/// A real API server from PyPI (Datasette, Kinto) on loopback, started by a test. `make deps` and CI install them into
/// `.venv-api/` (`PACKAGER_API_VENV` names another virtual environment); tests that need one are skipped, with the
/// reason, where it is missing.
public final class APIServer: Sendable {
    public let base: String
    let process: Process

    /// The repository's root.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// The executable `name` from the API servers' virtual environment, or from PATH; nil when it is not installed.
    public static func find(_ name: String) -> String? {
        let folders =
            [
                ProcessInfo.processInfo.environment["PACKAGER_API_VENV"].map { $0 + "/bin" }, root + "/.venv-api/bin", root + "/.venv-mitm/bin",
                root + "/.venv-s3/bin", root + "/.venv-pywb/bin",
            ].compactMap { $0 }
            + (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        return folders.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// How to install them, for a skipped test's reason.
    public static let installHint =
        "install Datasette and Kinto from PyPI into .venv-api (make deps does: python3 -m venv .venv-api && .venv-api/bin/pip install datasette kinto)"

    init(base: String, process: Process) {
        self.base = base
        self.process = process
    }

    /// Starts `executable` with `arguments` (in which `{port}` stands for a free port) and waits until `probe` (a path)
    /// answers over HTTP, at most 30 s.
    public static func start(_ executable: String, _ arguments: [String], probe: String, in folder: String? = nil) async throws -> APIServer {
        var lastError = ""
        for _ in 0..<3 {
            let port = try freePort()
            let process = try launch(executable, arguments.map { $0.replacingOccurrences(of: "{port}", with: String(port)) }, in: folder)
            let base = "http://127.0.0.1:\(port)"
            for _ in 0..<120 {
                let answered = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + probe])
                if answered.output != "000" { return APIServer(base: base, process: process) }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(250))
            }
            lastError = "\(executable) did not answer on port \(port)"
            process.terminate()
            process.waitUntilExit()
        }
        throw RealServerError(message: lastError)
    }

    public func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Kinto (`executable`) in memory with Basic auth (any user name and password is a principal), its files in
    /// `folder`.
    public static func startKinto(_ executable: String, in folder: TemporaryFolder) async throws -> APIServer {
        let initialized = try await run(executable, ["init", "--ini", folder.path + "/kinto.ini", "--backend", "memory", "--cache-backend", "memory"])
        guard initialized.status == 0 else { throw RealServerError(message: "kinto init failed: \(initialized.output)") }
        var config = try String(contentsOfFile: folder.path + "/kinto.ini", encoding: .utf8)
        config = config.replacingOccurrences(of: "multiauth.policies = account", with: "multiauth.policies = basicauth")
        try config.write(toFile: folder.path + "/kinto.ini", atomically: true, encoding: .utf8)
        return try await start(executable, ["start", "--ini", folder.path + "/kinto.ini", "--port", "{port}"], probe: "/v1/")
    }

    /// Stops it as Ctrl-C would (SIGINT: mitmproxy writes its HAR then), and waits for it.
    public func interrupt() {
        guard process.isRunning else { return }
        process.interrupt()
        process.waitUntilExit()
    }

    deinit { stop() }
}
