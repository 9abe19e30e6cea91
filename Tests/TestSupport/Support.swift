import Foundation
import HTTPTypes
import OfflineBundle
import PackagerKit
import Synchronization

/// A fresh temporary folder, removed when the value is released.
public final class TemporaryFolder {
    public let path: String
    public init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("packager-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    public func file(_ relative: String, _ contents: String) throws { try file(relative, Data(contents.utf8)) }
    public func file(_ relative: String, _ data: Data) throws {
        let url = URL(fileURLWithPath: path + "/" + relative)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
    }
    public func contents() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: path).sorted() }
}

public struct ToolResult: Sendable {
    public var status: Int32
    public var output: String
}

/// Starts a program (its output to `output`, or nowhere), with no signals blocked, and returns it running.
///
/// Dispatch's worker threads block most signals, and a child inherits the mask of the thread that starts it:
/// started any other way, the signals a test (or a script's `kill`) sends it would never arrive.
public func launch(_ executable: String, _ arguments: [String], in folder: String? = nil, output: Pipe? = nil) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let folder { process.currentDirectoryURL = URL(fileURLWithPath: folder) }
    process.standardOutput = output ?? FileHandle.nullDevice
    process.standardError = output ?? FileHandle.nullDevice
    var none = sigset_t()
    var previous = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, &previous)
    defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
    try process.run()
    return process
}

/// Starts `packager serve BUNDLE --port 0` and returns it with the base URL it prints.
public func startServe(_ bundle: String, _ extra: [String] = []) async throws -> (Process, String) {
    try await startServe(arguments: [bundle] + extra)
}

/// Starts `packager serve ARGUMENTS --port 0` and returns it with the base URL it prints.
public func startServe(arguments: [String]) async throws -> (Process, String) {
    let pipe = Pipe()
    let process = try launch(packagerExecutable, ["serve"] + arguments + ["--port", "0"], output: pipe)
    // Its "serving" line: other lines (the admin endpoints' "… on URL") may come before it or with it.
    let line = try await firstLine(of: pipe) { $0.contains("serving ") && !$0.contains("admin endpoints") }
    // "serving BUNDLES (N entries) on URL/": the URL after " on " (a bundle may be a URL too).
    let after = line.range(of: " on ", options: .backwards).map { line[$0.upperBound...] } ?? line[...]
    guard let start = after.range(of: "https://") ?? after.range(of: "http://") else {
        process.terminate()
        throw CocoaError(.fileReadUnknown)
    }
    return (process, String(after[start.lowerBound...].prefix { !$0.isWhitespace }).trimmingCharacters(in: CharacterSet(charactersIn: "/")))
}

/// Runs a command-line tool and captures its output (stdout and stderr together).
@discardableResult
public func run(_ tool: String, _ arguments: [String], in folder: String? = nil) throws -> ToolResult {
    let pipe = Pipe()
    let process = try launch("/usr/bin/env", [tool] + arguments, in: folder, output: pipe)
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ToolResult(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
}

/// Runs a command-line tool off the concurrency pool and captures its output.
///
/// Async tests must use this form: the loopback servers they start run on the
/// same two-thread pool, and a thread blocked waiting for a child process that
/// talks to them would starve them.
@discardableResult
public func run(_ tool: String, _ arguments: [String], in folder: String? = nil) async throws -> ToolResult {
    try await offPool { try run(tool, arguments, in: folder) }
}

/// Runs blocking work on a Dispatch thread, outside Swift's cooperative pool.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            do { continuation.resume(returning: try work()) } catch { continuation.resume(throwing: error) }
        }
    }
}

/// Deterministic pseudo-random bytes (incompressible), for JPEG-like bodies.
public func noise(_ count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var data = Data(count: count)
    for i in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        data[i] = UInt8(truncatingIfNeeded: state)
    }
    return data
}

/// A small site: HTML in folders, CSS, a JPEG-like file, a duplicate file, a name that needs escaping.
public func makeSite(in folder: TemporaryFolder) throws {
    try folder.file(
        "index.html", "<!doctype html><title>Home</title><link rel=stylesheet href=/css/site.css><p>" + String(repeating: "Welcome home. ", count: 50))
    try folder.file("docs/index.html", "<!doctype html><title>Docs</title>" + String(repeating: "<p>Read the docs.</p>", count: 40))
    try folder.file("docs/guide.html", "<!doctype html><title>Guide</title>" + String(repeating: "<p>Step by step.</p>", count: 40))
    try folder.file("css/site.css", String(repeating: "body { color: #333; margin: 0 auto; }\n", count: 30))
    try folder.file("img/photo.jpg", noise(20_000, seed: 1))
    try folder.file("img/copy-of-photo.jpg", noise(20_000, seed: 1))
    try folder.file("data/fixture.json", "{\"items\": [" + (0..<100).map { "{\"id\": \($0)}" }.joined(separator: ",") + "]}")
    try folder.file("files/report 2026 (final).txt", String(repeating: "quarterly numbers\n", count: 20))
    try folder.file(".git/config", "[core]\n")
}

/// The sample site (``makeSite(in:)``) packed by ``packSite(_:to:base:options:)`` into `site.zip` in a folder of its
/// own: both folders (each removed when let go), the bundle's path, and what pack said.
public func packedSampleSite() throws -> (site: TemporaryFolder, out: TemporaryFolder, bundle: String, summary: Packer.Summary) {
    let site = try TemporaryFolder()
    try makeSite(in: site)
    let out = try TemporaryFolder()
    let bundle = out.path + "/site.zip"
    return (site, out, bundle, try packSite(site, to: bundle))
}

public func packSite(_ site: TemporaryFolder, to output: String, base: String = "https://example.com/site/", options: BundleWriter.Options = .init()) throws
    -> Packer.Summary
{
    try Packer(options: .init(baseURL: base, writer: options)).pack(source: site.path, output: output)
}

/// Flips one bit of the byte at `offset`.
public func flipByte(at offset: Int, in path: String) throws {
    var data = try Data(contentsOf: URL(fileURLWithPath: path))
    data[offset] ^= 0x01
    try data.write(to: URL(fileURLWithPath: path))
}

/// The offset of the first occurrence of `needle` in the file.
public func offset(of needle: Data, in path: String) throws -> Int? {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return data.range(of: needle).map { $0.lowerBound }
}

/// The `packager` executable next to the test bundle (swift test builds it with the tests).
public var packagerExecutable: String {
    var folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    // On macOS the runner is inside an .xctest bundle.
    while !FileManager.default.fileExists(atPath: folder.appendingPathComponent("packager").path), folder.path != "/" {
        folder.deleteLastPathComponent()
    }
    return folder.appendingPathComponent("packager").path
}

/// Header fields from name-value pairs (names that are not valid field names are dropped).
public func fields(_ pairs: [(String, String)]) -> HTTPFields {
    var result = HTTPFields()
    for (name, value) in pairs {
        if let fieldName = HTTPField.Name(name) { result.append(HTTPField(name: fieldName, value: value)) }
    }
    return result
}

/// Writes `bytes` over the file at `offset`, in place (same inode, as `dd conv=notrunc` writes), then sets its access
/// and modification times back to what they were (as `touch -r` can): only the status-change time tells.
public func overwriteInPlace(_ path: String, at offset: Int, with bytes: [UInt8]) throws {
    var before = stat()
    guard stat(path, &before) == 0 else { throw POSIXError(.ENOENT) }
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: Data(bytes))
    try handle.close()
    #if canImport(Darwin)
        var times = [before.st_atimespec, before.st_mtimespec]
    #else
        var times = [before.st_atim, before.st_mtim]
    #endif
    guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(.EPERM) }
}

/// A Python client for raw HTTP/1.1 exchanges: `exchange(data, later)` sends `data` (and `later` 0.3 s after), then
/// reads until the server closes the connection. The port is the script's first argument.
public let rawExchange = #"""
    import re, socket, sys, time
    def exchange(data, later=b""):
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
        s.sendall(data)
        if later:
            time.sleep(0.3)
            s.sendall(later)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk: break
            got += chunk
        return got

    """#

/// One exchange as curl saw it: the status, the header fields in order (names lowercased) and the body's bytes.
public struct CurlExchange: Sendable, Equatable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: Data

    public func header(_ name: String) -> String? { headers.first { $0.name == name.lowercased() }?.value }

    public static func == (a: CurlExchange, b: CurlExchange) -> Bool {
        a.status == b.status && a.body == b.body && a.headers.map { "\($0.name): \($0.value)" } == b.headers.map { "\($0.name): \($0.value)" }
    }
}

/// Asks `url` with curl (`-s`, no decoding, no redirects followed), sending `headers`, `method` and `body`.
public func curlExchange(
    _ url: String, headers: [(String, String)] = [], method: String = "GET", body: Data? = nil, in folder: TemporaryFolder,
    curlOptions: [String] = []
) async throws -> CurlExchange {
    let head = folder.path + "/curl-head-\(UUID().uuidString)"
    let out = folder.path + "/curl-body-\(UUID().uuidString)"
    defer { for path in [head, out] { try? FileManager.default.removeItem(atPath: path) } }
    var arguments = ["-s", "-D", head, "-o", out] + curlOptions
    for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
    if method == "HEAD" { arguments.append("-I") } else if method != "GET" { arguments += ["-X", method] }
    if let body {
        let file = folder.path + "/curl-request-\(UUID().uuidString)"
        try body.write(to: URL(fileURLWithPath: file))
        arguments += ["--data-binary", "@" + file]
    }
    _ = try await run("curl", arguments + [url])
    let lines = try String(contentsOfFile: head, encoding: .utf8).components(separatedBy: "\r\n").filter { !$0.isEmpty }
    let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
    let fields = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    // With -I, curl writes the head to the output file too: a HEAD has no body.
    let body = method == "HEAD" ? Data() : (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
    return CurlExchange(status: status, headers: fields, body: body)
}

/// What a server's access log reported, from its event loop threads.
public final class ServedLog: Sendable {
    private let records = Mutex<[ServedRequest]>([])
    public init() {}
    public func add(_ record: ServedRequest) { records.withLock { $0.append(record) } }
    public var all: [ServedRequest] { records.withLock { $0 } }
}

/// A private CA (`ca.pem`, `ca.key`) and a server certificate it signed for 127.0.0.1 (`server.pem`, `server.key`),
/// written by openssl into `folder`.
public func makeTestCertificates(in folder: TemporaryFolder) async throws {
    try folder.file("san.cnf", "subjectAltName=IP:127.0.0.1\n")
    let steps: [[String]] = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
        [
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
            "-extfile", "san.cnf",
        ],
    ]
    for step in steps {
        let result = try await run("openssl", step, in: folder.path)
        guard result.status == 0 else { throw TestSetupError("openssl \(step.joined(separator: " ")): \(result.output)") }
    }
}

/// A test's set-up that failed (a tool it needs), in words.
public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs `body`, then `cleanup` whether it returned or threw: a server a test started is stopped inside the test, not by
/// an unstructured task that outlives it.
public func afterwards<T>(_ cleanup: () async -> Void, _ body: () async throws -> T) async throws -> T {
    do {
        let result = try await body()
        await cleanup()
        return result
    } catch {
        await cleanup()
        throw error
    }
}

/// The first whole line of `pipe` that `matches`, the lines before it skipped; what was read, when the pipe ends
/// without one.
public func firstLine(of pipe: Pipe, where matches: @escaping @Sendable (Substring) -> Bool) async throws -> String {
    let reader = pipe.fileHandleForReading
    return try await offPool { () -> String in
        var read = Data()
        while true {
            let text = String(decoding: read, as: UTF8.self)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            // The last piece is a line not yet ended.
            if let line = lines.dropLast().first(where: matches) { return String(line) }
            let chunk = reader.availableData
            if chunk.isEmpty { return text }
            read += chunk
        }
    }
}

/// What a started program printed up to its first line end (all of it, when it ended first), read off the pool.
public func firstLine(of pipe: Pipe) async throws -> String {
    let reader = pipe.fileHandleForReading
    return try await offPool { () -> String in
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        return String(decoding: line, as: UTF8.self)
    }
}
