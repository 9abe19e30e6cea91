import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// The third security review's S3: what the crawl fetches with the declaration's credentials is keyed by them, so an
/// anonymous request never gets an answer recorded with one (H19 rule 4).
@Suite("credentials key what the crawl fetches with them")
struct CredentialKeyTests {
    @Test("pages crawled with a declared bearer and cookie are kept for requests with them, never for anonymous ones; a declared URL is not fetched again")
    func crawledCredentialedAnswersAreKeyed() async throws {
        try await withOrigin { origin in
            origin.set("/", .text(#"<html><body><a href="private">p</a><a href="me">m</a><a href="open.html">o</a></body></html>"#, type: "text/html"))
            origin.set("/private", .text(#"{"owner": "alice"}"#, type: "application/json"))
            origin.set("/me", .text(#"{"user": "alice"}"#, type: "application/json", headers: [("Vary", "Cookie")]))
            origin.set("/open.html", .text("<html><body>open</body></html>", type: "text/html"))
            let folder = try TemporaryFolder()
            try folder.file(
                "d.yml",
                """
                seeds: [\(origin.base)/]
                output: \(folder.path)/b.zip
                robots: false
                ignore-query: none
                headers:
                  Authorization: Bearer ${TOKEN}
                  Cookie: sid=${SID}
                requests:
                  - url: \(origin.base)/private
                """)
            let result = try await run(
                "/usr/bin/env", ["TOKEN=tok-SECRET-0123456789", "SID=cookie-SESSION-abcdef12", packagerExecutable, "build", folder.path + "/d.yml"])
            #expect(result.status == 0, "\(result.output)")
            let bundle = try MountedBundle(path: folder.path + "/b.zip")
            let credentialed = fields([("Authorization", "Bearer other"), ("Cookie", "sid=x")])
            for path in ["/", "/private", "/me", "/open.html"] {
                #expect(bundle.entry(for: BundleRequest(url: origin.base + path)) == nil, "\(path): an anonymous request gets nothing")
                #expect(bundle.entry(for: BundleRequest(url: origin.base + path, headers: credentialed))?.status == 200, "\(path)")
            }
            #expect(bundle.entry(for: BundleRequest(url: origin.base + "/me", headers: fields([("Authorization", "Bearer other")]))) == nil, "no cookie")
            // Declared, and linked from the page: fetched once.
            #expect(origin.count("/private") == 1, "\(origin.requests.map(\.path))")
            // Served: an anonymous client gets a 404, a bearer the answer.
            let (serve, base) = try await startServe(folder.path + "/b.zip")
            let anonymous = try await curlExchange(base + "/private", in: folder)
            let bearer = try await curlExchange(base + "/private", headers: [("Authorization", "Bearer guess"), ("Cookie", "sid=1")], in: folder)
            serve.terminate()
            try await offPool { serve.waitUntilExit() }
            #expect(anonymous.status == 404)
            #expect(bearer.status == 200 && String(decoding: bearer.body, as: UTF8.self).contains("alice"))
        }
    }

    @Test("a page whose body echoes a declared secret is not stored, and the report says why; a declared request's answer the same")
    func bodiesThatEchoSecretsAreNotStored() async throws {
        try await withOrigin { origin in
            let token = "tok-SECRET-0123456789"
            origin.set("/", .text(#"<html><body><a href="echo.html">e</a><a href="plain.html">p</a></body></html>"#, type: "text/html"))
            // Past the 1 MiB a spool piece holds, with the token across nothing in particular: found in a file as in memory.
            origin.set("/echo.html", .text("<html><body>" + String(repeating: "x", count: 3 << 20) + "you are " + token + "</body></html>", type: "text/html"))
            origin.set("/plain.html", .text("<html><body>plain</body></html>", type: "text/html"))
            origin.set("/api/me", .text(#"{"token": "\#(token.lowercased())"}"#, type: "application/json"))
            let folder = try TemporaryFolder()
            try folder.file(
                "d.yml",
                """
                seeds: [\(origin.base)/]
                output: \(folder.path)/b.zip
                robots: false
                ignore-query: none
                headers:
                  X-Api-Token: ${TOKEN}
                """)
            let result = try await run("/usr/bin/env", ["TOKEN=" + token, packagerExecutable, "build", folder.path + "/d.yml", "--json"])
            #expect(result.status == 0, "\(result.output)")
            let report = try JSONDecoder().decode(BuildReport.self, from: Data(result.output.utf8))
            #expect(report.failures.map(\.url) == [origin.base + "/echo.html"], "\(report.failures)")
            #expect(report.failures.first?.reason.contains("carries a secret") == true)
            let bundle = try MountedBundle(path: folder.path + "/b.zip")
            #expect(bundle.entry(for: origin.base + "/plain.html")?.status == 200)
            #expect(bundle.entry(for: origin.base + "/echo.html") == nil)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.zip"))
            #expect(bytes.range(of: Data(token.utf8)) == nil && bytes.range(of: Data(token.lowercased().utf8)) == nil)
            // A declared request whose answer echoes it (in another case): the build fails, naming it, and stores nothing of it.
            try folder.file(
                "r.yml",
                """
                output: \(folder.path)/r.zip
                robots: false
                headers:
                  X-Api-Token: ${TOKEN}
                requests:
                  - url: \(origin.base)/api/me
                """)
            let declared = try await run("/usr/bin/env", ["TOKEN=" + token, packagerExecutable, "build", folder.path + "/r.yml"])
            #expect(declared.status != 0 && declared.output.contains("carries a secret"), "\(declared.output)")
            #expect(!declared.output.contains(token) && !declared.output.contains(token.lowercased()))
        }
    }
}
