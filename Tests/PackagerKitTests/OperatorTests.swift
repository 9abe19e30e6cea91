import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// A Python with Prometheus' own text-format parser (`make deps` installs prometheus_client into .venv-api); nil when none.
private let prometheusPython: String? = {
    for folder in [APIServer.find("python3").map { ($0 as NSString).deletingLastPathComponent }].compactMap({ $0 }) + ["/usr/bin"] {
        let python = folder + "/python3"
        if let result = try? run(python, ["-c", "import prometheus_client"]), result.status == 0 { return python }
    }
    return nil
}()

/// Lines a process writes to `pipe`, until `count` have come (or the pipe ends).
private func lines(of pipe: Pipe, count: Int) async throws -> [String] {
    let reader = pipe.fileHandleForReading
    return try await offPool { () -> [String] in
        var data = Data()
        while data.split(separator: UInt8(ascii: "\n")).count < count || data.last != UInt8(ascii: "\n") {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

@Suite("packager serve for an operator: metrics, health, JSON logs")
struct OperatorTests {
    @Test(
        "--admin-port: /metrics parses with Prometheus' parser and its request counts agree with the JSON access log; /healthz; /readyz names the release, and says 503 once SIGTERM came while answers finish",
        .enabled(if: prometheusPython != nil, "prometheus_client is not installed: make deps installs it into .venv-api (pip install prometheus_client)"))
    func adminEndpoints() async throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/b.zip"
        let big = noise(24 << 20, seed: 3)
        var writer = BundleWriter()
        writer.add(.init(url: "https://docs.example.com/", headers: [("content-type", "text/html")], body: .data(Data("<p>home</p>".utf8))))
        writer.add(.init(url: "https://docs.example.com/big.bin", headers: [("content-type", "application/octet-stream")], body: .data(big)))
        try writer.write(to: path)
        let pipe = Pipe()
        let serve = try launch(
            packagerExecutable,
            ["serve", path, "--port", "0", "--admin-port", "0", "--log-format", "json", "--access-log", folder.path + "/access.log"], output: pipe)
        let started = try await lines(of: pipe, count: 2)
        // Both lines are JSON objects, each with the URL it names.
        let objects = try started.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
        let base = try #require(objects.first { $0["event"] as? String == "serving" }?["url"] as? String, "\(started)")
        let admin = try #require(objects.first { $0["event"] as? String == "admin" }?["url"] as? String, "\(started)")
        var stopped = false
        defer { if !stopped { serve.terminate() } }

        for target in ["", "", "", "missing", "big.bin"] { _ = try await run("curl", ["-s", "-o", "/dev/null", base + target]) }
        #expect(try await run("curl", ["-s", admin + "healthz"]).output == "ok\n")
        let ready = try await run("curl", ["-s", "-w", " %{http_code}", admin + "readyz"])
        let digest = try MountedBundle(path: path).digest
        #expect(ready.output == "b.zip sha256:\(digest)\n 200")

        try folder.file(
            "parse.py",
            """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            found = {}
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                for s in family.samples:
                    key = s.name + "".join("|%s=%s" % kv for kv in sorted(s.labels.items()))
                    found[key] = s.value
            print(json.dumps(found, sort_keys=True))
            """)
        _ = try await run("curl", ["-s", "-o", folder.path + "/metrics.txt", admin + "metrics"])
        let parsed = try await run(try #require(prometheusPython), [folder.path + "/parse.py", folder.path + "/metrics.txt"])
        #expect(parsed.status == 0, "\(parsed.output)")
        let samples = try JSONSerialization.jsonObject(with: Data(parsed.output.utf8)) as? [String: Double] ?? [:]
        // What the access log says, counted the same way.
        let logged = try String(contentsOfFile: folder.path + "/access.log", encoding: .utf8).split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
        #expect(logged.count == 5)
        var fromLog: [String: Double] = [:]
        var bytes = 0.0
        for line in logged {
            let source = line["source"] as? String ?? "none"
            let cached = (line["cached"] as? Bool ?? false) ? "true" : "false"
            fromLog["packager_http_requests_total|cached=\(cached)|source=\(source)|status=\(line["status"] as? Int ?? 0)", default: 0] += 1
            bytes += Double(line["bytes"] as? Int ?? 0)
        }
        let counted = samples.filter { $0.key.hasPrefix("packager_http_requests_total|") }
        #expect(counted == fromLog, "\(samples)")
        #expect(fromLog["packager_http_requests_total|cached=true|source=b.zip|status=200"] == 2)
        #expect(samples["packager_http_response_bytes_total"] == bytes && bytes > Double(big.count))
        #expect(samples["packager_release_info|bundle=b.zip|digest=\(digest)"] == 1)
        // The runtime's own counters, through swift-metrics (a counter's samples end in _total).
        #expect(samples["offline_bundle_lookups_total|result=miss|source=none"] == 1)

        // SIGTERM during a slow download (12 s, longer than the socket buffers take, and than a sleep runs long under load):
        // the admin server stops last, and says the server is no longer ready meanwhile.
        // A reader with a small receive buffer (loopback's grow to 32 MiB here, which would take the whole body at once).
        try folder.file(
            "slow.py",
            """
            import socket, sys, time, urllib.parse
            url = urllib.parse.urlsplit(sys.argv[1])
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.connect((url.hostname, url.port))
            s.sendall(b"GET " + url.path.encode() + b" HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n")
            chunks = []
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                time.sleep(len(chunk) / 2e6)
            head, _, body = b"".join(chunks).partition(b"\\r\\n\\r\\n")
            open(sys.argv[2], "wb").write(body)
            """)
        let slow = try launch("/usr/bin/python3", [folder.path + "/slow.py", base + "big.bin", folder.path + "/big.out"], output: Pipe())
        try await Task.sleep(for: .seconds(1))
        kill(serve.processIdentifier, SIGTERM)
        try await Task.sleep(for: .milliseconds(500))
        let draining = try await run("curl", ["-s", "-w", " %{http_code}", admin + "readyz"])
        #expect(draining.output == "shutting down\n 503", "\(draining.output)")
        try await offPool { slow.waitUntilExit() }
        let received = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/big.out"))
        #expect(slow.terminationStatus == 0 && received == big)
        try await offPool { serve.waitUntilExit() }
        stopped = true
        #expect(serve.terminationReason == .exit && serve.terminationStatus == 0)
    }

    @Test("--log-format and --admin-port take only what they can use: exit 2 with the reason")
    func wrongOptions() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let format = try await run(packagerExecutable, ["serve", folder.path + "/b.zip", "--log-format", "xml"])
        #expect(format.status == 2 && format.output.contains("--log-format takes text or json"), "\(format.output)")
        let port = try await run(packagerExecutable, ["serve", folder.path + "/b.zip", "--port", "8080", "--admin-port", "8080"])
        #expect(port.status == 2 && port.output.contains("--admin-port"), "\(port.output)")
        let size = try await run(packagerExecutable, ["serve", folder.path + "/b.zip", "--check-before-send", "lots"])
        #expect(size.status == 2 && size.output.contains("--check-before-send takes a size"), "\(size.output)")
    }
}
