import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// HTTPS origins with a private CA: `openssl s_server -WWW` on loopback, serving files over TLS with a certificate
/// signed by a CA the test makes with `openssl`, as a company's internal server is.
@Suite("HTTPS origins with a private CA")
struct TLSTests {
    /// A CA, a certificate for 127.0.0.1 signed by it, and one for another name; returns the folder.
    func makeCertificates(in folder: TemporaryFolder) async throws {
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
            [
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2",
                "-extfile", "san.cnf",
            ],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.csr", "-subj", "/CN=other.example"],
            [
                "x509", "-req", "-in", "other.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "other.pem", "-days", "2",
                "-extfile", "other.cnf",
            ],
        ]
        try folder.file("san.cnf", "subjectAltName=IP:127.0.0.1\n")
        try folder.file("other.cnf", "subjectAltName=DNS:other.example\n")
        for step in steps {
            let result = try await run("openssl", step, in: folder.path)
            #expect(result.status == 0, "openssl \(step.joined(separator: " ")): \(result.output)")
        }
    }

    /// `openssl s_server -WWW` serving `site/` with `certificate`; stopped when `body` returns.
    func withTLSServer<T>(_ folder: TemporaryFolder, certificate: String, _ body: (String) async throws -> T) async throws -> T {
        let port = try closedPort()
        let process = try launch(
            "/usr/bin/openssl", ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate + ".pem", "-key", certificate + ".key", "-WWW", "-quiet"],
            in: folder.path + "/site")
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        // Ready when it accepts a TLS connection.
        for _ in 0..<100 {
            let probe = try await run("curl", ["-s", "-k", "-o", "/dev/null", "https://127.0.0.1:\(port)/index.html"])
            if probe.status == 0 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return try await body("https://127.0.0.1:\(port)")
    }

    @Test("a private CA given with tls.ca-file is trusted beside the system's; without it, the error says why in words")
    func privateCA() async throws {
        let folder = try TemporaryFolder()
        try await makeCertificates(in: folder)
        try folder.file("site/index.html", "<html><a href=\"page.html\">page</a></html>")
        try folder.file("site/page.html", "<html>over TLS</html>")
        try await withTLSServer(folder, certificate: "../server") { base in
            // Without the CA: not trusted, said in words, with no library type names and no "is it down?".
            var result = try await run(packagerExecutable, ["build", "--seed", base + "/index.html", "-o", "tls.zip"], in: folder.path)
            #expect(result.status == 1, "\(result.output)")
            #expect(result.output.contains("certificate is not trusted") && result.output.contains("tls.ca-file"), "\(result.output)")
            #expect(!result.output.contains("BoringSSL") && !result.output.contains("handshakeFailed") && !result.output.contains("is it down"))
            // With it: the site is crawled.
            result = try await run(
                packagerExecutable, ["build", "--seed", base + "/index.html", "--ca-file", "ca.pem", "--no-robots", "-o", "tls.zip"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            let bundle = try MountedBundle(path: folder.path + "/tls.zip")
            #expect(try bundle.entry(for: base + "/page.html").map { String(decoding: try bundle.body(of: $0), as: UTF8.self) } == "<html>over TLS</html>")
            // The declaration's form, relative to its folder.
            try folder.file("tls.yml", "seeds: [\(base)/index.html]\nrobots: false\noutput: tls2.zip\ntls: {ca-file: ca.pem}\n")
            result = try await run(packagerExecutable, ["build", "tls.yml"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            // tls.insecure: fetched with a warning on every run, and never with a signing key.
            result = try await run(packagerExecutable, ["build", "--seed", base + "/index.html", "--insecure", "--no-robots", "-o", "i.zip"], in: folder.path)
            #expect(result.status == 0 && result.output.contains("warning: HTTPS certificates are not checked"), "\(result.output)")
            _ = try await run(packagerExecutable, ["keygen", "-o", "k"], in: folder.path)
            result = try await run(
                packagerExecutable, ["build", "--seed", base + "/index.html", "--insecure", "--sign-key", "k.key", "-o", "s.zip"], in: folder.path)
            #expect(result.status != 0 && result.output.contains("cannot be used with a signing key"), "\(result.output)")
        }
    }

    @Test("a certificate for another name is a name mismatch, not 'not trusted'")
    func nameMismatch() async throws {
        let folder = try TemporaryFolder()
        try await makeCertificates(in: folder)
        try folder.file("site/index.html", "<html>x</html>")
        try await withTLSServer(folder, certificate: "../other") { base in
            let result = try await run(
                packagerExecutable, ["build", "--seed", base + "/index.html", "--ca-file", "ca.pem", "--no-robots", "-o", "x.zip"], in: folder.path)
            #expect(result.status == 1)
            #expect(result.output.contains("name mismatch"), "\(result.output)")
            #expect(!result.output.contains("BoringSSL"), "\(result.output)")
        }
    }

    @Test("a CA file that holds no certificate is refused with its line")
    func badCAFile() throws {
        let folder = try TemporaryFolder()
        try folder.file("not-a-ca.pem", "hello")
        let error = try #require(throws: PackagerError.self) {
            try DeclarationParser().parse("seeds: [https://a.example/]\ntls:\n  ca-file: not-a-ca.pem\n", baseDirectory: folder.path)
        }
        #expect(error.message.contains("3:12") && error.message.contains("no PEM certificate"), "\(error.message)")
    }
}
