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
        try await makeTestCertificates(in: folder)
        let steps: [[String]] = [
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.csr", "-subj", "/CN=other.example"],
            [
                "x509", "-req", "-in", "other.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "other.pem", "-days", "2",
                "-extfile", "other.cnf",
            ],
        ]
        try folder.file("other.cnf", "subjectAltName=DNS:other.example\n")
        for step in steps {
            let result = try await run("openssl", step, in: folder.path)
            #expect(result.status == 0, "openssl \(step.joined(separator: " ")): \(result.output)")
        }
    }

    /// `openssl s_server -WWW` serving `site/` with `certificate`; stopped when `body` returns.
    func withTLSServer<T>(_ folder: TemporaryFolder, certificate: String, _ body: (String) async throws -> T) async throws -> T {
        let port = try freePort()
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
            #expect(
                result.output.contains("signed by CN=Test CA, a CA this machine does not trust") && result.output.contains("tls.ca-file"), "\(result.output)")
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

    /// More certificates in `folder` (after ``makeCertificates(in:)``): an expired one and a self-signed one for
    /// 127.0.0.1, and a client certificate signed by the CA, its key readable by its owner only.
    func makeMoreCertificates(in folder: TemporaryFolder) async throws {
        let steps: [[String]] = [
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "expired.key", "-out", "expired.csr", "-subj", "/CN=127.0.0.1"],
            [
                "x509", "-req", "-in", "expired.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "expired.pem", "-days", "-1",
                "-extfile", "san.cnf",
            ],
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "self.key", "-out", "self.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1",
            ],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=packager-client"],
            ["x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "client.pem", "-days", "2"],
        ]
        for step in steps {
            let result = try await run("openssl", step, in: folder.path)
            #expect(result.status == 0, "openssl \(step.joined(separator: " ")): \(result.output)")
        }
        #expect(chmod(folder.path + "/client.key", 0o600) == 0)
    }

    /// `openssl s_server -WWW` that requires a client certificate signed by the test's CA (mutual TLS).
    func withMutualTLSServer<T>(_ folder: TemporaryFolder, _ body: (String) async throws -> T) async throws -> T {
        let port = try freePort()
        let process = try launch(
            "/usr/bin/openssl",
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-cert", "../server.pem", "-key", "../server.key", "-Verify", "1", "-CAfile", "../ca.pem",
                "-WWW", "-quiet",
            ],
            in: folder.path + "/site")
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        for _ in 0..<100 {
            let probe = try await run(
                "curl",
                [
                    "-s", "-k", "--cert", folder.path + "/client.pem", "--key", folder.path + "/client.key", "-o", "/dev/null",
                    "https://127.0.0.1:\(port)/index.html",
                ])
            if probe.status == 0 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return try await body("https://127.0.0.1:\(port)")
    }

    @Test(
        "SSL_CERT_FILE and SSL_CERT_DIR add their certificate files beside the system's roots, damaged ones left out; the system's own file and folder are not read again"
    )
    func environmentRoots() async throws {
        let folder = try TemporaryFolder()
        try await makeTestCertificates(in: folder)
        try FileManager.default.createDirectory(atPath: folder.path + "/dir", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: folder.path + "/ca.pem", toPath: folder.path + "/dir/a.pem")
        try folder.file("dir/b.crt", "not a certificate\n")
        try FileManager.default.copyItem(atPath: folder.path + "/ca.pem", toPath: folder.path + "/dir/c.txt")
        // A PEM whose body is damaged: left out, so it cannot fail every HTTPS fetch when NIOSSL parses its roots.
        try folder.file("dir/d.pem", "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
        func roots(_ environment: [String: String]) -> [String] {
            TLSSettings.system.configuration(environment: environment).additionalTrustRoots.compactMap {
                if case .file(let path) = $0 { return path } else { return nil }
            }
        }
        #expect(roots(["SSL_CERT_FILE": folder.path + "/ca.pem"]) == [folder.path + "/ca.pem"])
        #expect(roots(["SSL_CERT_FILE": folder.path + "/dir/b.crt"]).isEmpty)
        #expect(roots(["SSL_CERT_DIR": folder.path + "/dir"]) == [folder.path + "/dir/a.pem"])
        #expect(roots(["SSL_CERT_FILE": folder.path + "/dir/d.pem"]).isEmpty)
        // The system's bundle and folder (Debian's, which CI installs): NIOSSL loads them already, and its own default
        // trust roots stay.
        let system = try #require(
            ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"].first { FileManager.default.fileExists(atPath: $0) })
        #expect(roots(["SSL_CERT_FILE": system, "SSL_CERT_DIR": "/etc/ssl/certs"]).isEmpty)
        #expect(TLSSettings.system.configuration(environment: ["SSL_CERT_FILE": system]).trustRoots == .default)
    }

    @Test("an expired certificate and a self-signed one are each said in their own words")
    func expiredAndSelfSigned() async throws {
        let folder = try TemporaryFolder()
        try await makeCertificates(in: folder)
        try await makeMoreCertificates(in: folder)
        try folder.file("site/index.html", "<html>x</html>")
        try await withTLSServer(folder, certificate: "../expired") { base in
            // Expired, even with its CA trusted: the date it expired, and no "not trusted".
            let result = try await run(
                packagerExecutable, ["build", "--seed", base + "/index.html", "--ca-file", "ca.pem", "--no-robots", "-o", "x.zip"], in: folder.path)
            #expect(result.status == 1)
            #expect(result.output.contains("the certificate for 127.0.0.1 expired on "), "\(result.output)")
            #expect(!result.output.contains("BoringSSL") && !result.output.contains("not trust"), "\(result.output)")
            // A nightly verify of a bundle of that origin says the same.
            try folder.file("one.yml", "urls: [\(base)/index.html]\ntls: {ca-file: ca.pem}\n")
            var writer = BundleWriter()
            writer.add(.init(url: base + "/index.html", headers: [("content-type", "text/html"), ("etag", "\"x\"")], body: .data(Data("<html>x</html>".utf8))))
            try writer.write(to: folder.path + "/one.zip")
            let verify = try await run(packagerExecutable, ["verify", "one.zip", "--declaration", "one.yml"], in: folder.path)
            #expect(verify.status != 0 && verify.output.contains("expired on "), "\(verify.output)")
        }
        try await withTLSServer(folder, certificate: "../self") { base in
            var result = try await run(packagerExecutable, ["build", "--seed", base + "/index.html", "--no-robots", "-o", "x.zip"], in: folder.path)
            #expect(result.status == 1)
            #expect(result.output.contains("the certificate for 127.0.0.1 is self-signed (CN=127.0.0.1)"), "\(result.output)")
            // Trusting the certificate itself is enough.
            result = try await run(
                packagerExecutable, ["build", "--seed", base + "/index.html", "--ca-file", "self.pem", "--no-robots", "-o", "x.zip"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
        }
    }

    @Test("a client certificate goes to the origins it is declared for and to no other; its key must be private")
    func mutualTLS() async throws {
        let folder = try TemporaryFolder()
        try await makeCertificates(in: folder)
        try await makeMoreCertificates(in: folder)
        try folder.file("site/index.html", "<html></html>")
        try await withMutualTLSServer(folder) { first in
            try await withMutualTLSServer(folder) { second in
                try folder.file("site/index.html", "<html><a href=\"\(second)/page.html\">elsewhere</a></html>")
                try folder.file("site/page.html", "<html>page</html>")
                func declaration(_ extra: String) throws {
                    try folder.file(
                        "m.yml",
                        """
                        seeds: [\(first)/index.html]
                        robots: false
                        output: m.zip
                        scope: {hosts: [\(first), \(second)]}
                        tls: {ca-file: ca.pem, client-cert: client.pem, client-key: client.key\(extra)}

                        """)
                }
                // Declared for the seed's origin only (the default): the seed is fetched; the other origin, which also
                // requires one, is never offered it and says so.
                try declaration("")
                var result = try await run(packagerExecutable, ["build", "m.yml", "--json"], in: folder.path)
                #expect(result.status == 0, "\(result.output)")
                let report = try JSONDecoder().decode(
                    BuildReport.self, from: Data(try #require(result.output.firstIndex(of: "{").map { String(result.output[$0...]) }).utf8))
                #expect(report.failures.map(\.url) == [second + "/page.html"])
                #expect(report.failures.first?.reason.contains("client certificate") == true, "\(report.failures)")
                #expect(try MountedBundle(path: folder.path + "/m.zip").entry(for: first + "/index.html") != nil)
                // Declared for both: both are fetched.
                try declaration(", client-cert-origins: [\(first), \(second)]")
                result = try await run(packagerExecutable, ["build", "m.yml"], in: folder.path)
                #expect(result.status == 0, "\(result.output)")
                #expect(try MountedBundle(path: folder.path + "/m.zip").entry(for: second + "/page.html")?.status == 200)
                // A key others can read is refused, with the line and the fix.
                #expect(chmod(folder.path + "/client.key", 0o644) == 0)
                result = try await run(packagerExecutable, ["build", "m.yml"], in: folder.path)
                #expect(result.status == 2 && result.output.contains("readable by others") && result.output.contains("chmod 600"), "\(result.output)")
            }
        }
    }

    @Test("packager serve --tls-cert answers curl over HTTPS with HTTP/2 by ALPN, and a crawl of it runs over HTTP/2")
    func serveAndCrawlOverHTTP2() async throws {
        let folder = try TemporaryFolder()
        try await makeCertificates(in: folder)
        try folder.file("site/index.html", "<html><a href=\"page.html\">page</a><img src=\"dot.png\"></html>")
        try folder.file("site/page.html", "<html>page over h2</html>")
        try folder.file("site/dot.png", "not really a png")
        #expect(try await run(packagerExecutable, ["pack", "site", "--base-url", "https://docs.example/", "-o", "site.zip"], in: folder.path).status == 0)
        let tls = ["--tls-cert", folder.path + "/server.pem", "--tls-key", folder.path + "/server.key"]
        try await withServe(folder.path + "/site.zip", tls) { base, _ in
            #expect(base.hasPrefix("https://127.0.0.1:"))
            let ca = folder.path + "/ca.pem"
            var result = try await run("curl", ["-s", "--cacert", ca, "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", base + "/page.html"])
            #expect(result.output == "2 200", "\(result.output)")
            result = try await run("curl", ["-s", "--cacert", ca, "--http1.1", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", base + "/page.html"])
            #expect(result.output == "1.1 200", "\(result.output)")
            result = try await run("curl", ["-s", "-o", "/dev/null", base + "/page.html"])
            #expect(result.status == 60, "curl without the CA must refuse the certificate")
            // packager build over it: every response came over HTTP/2.
            result = try await run(
                packagerExecutable, ["build", "--seed", base + "/", "--ca-file", "ca.pem", "--no-robots", "-o", "h2.zip", "--json"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            let report = try JSONDecoder().decode(
                BuildReport.self, from: Data(try #require(result.output.firstIndex(of: "{").map { String(result.output[$0...]) }).utf8))
            #expect(report.entries == 3 && report.protocols == ["HTTP/2": 3], "\(report.protocols)")
            // verify over the same connection kind: every entry fresh.
            try folder.file("h2.yml", "seeds: [\(base)/]\ntls: {ca-file: ca.pem}\n")
            result = try await run(packagerExecutable, ["verify", "h2.zip", "--declaration", "h2.yml"], in: folder.path)
            #expect(result.status == 0 && result.output.contains("3 fresh"), "\(result.output)")
            #expect(
                try MountedBundle(path: folder.path + "/h2.zip").entry(for: base + "/page.html").map {
                    try String(decoding: MountedBundle(path: folder.path + "/h2.zip").body(of: $0), as: UTF8.self)
                } == "<html>page over h2</html>")
        }
        // A key file that is not a key: said before anything listens.
        try folder.file("bad.key", "not a key")
        let result = try await run(
            packagerExecutable, ["serve", "site.zip", "--port", "0", "--tls-cert", "server.pem", "--tls-key", "bad.key"], in: folder.path)
        #expect(result.status != 0 && result.output.contains("bad.key holds no PEM private key"), "\(result.output)")
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
