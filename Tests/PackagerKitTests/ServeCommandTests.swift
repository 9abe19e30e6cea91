import Foundation
import TestSupport
import Testing

@Suite("packager serve, checked with curl")
struct ServeCommandTests {
    func curl(_ arguments: [String]) async throws -> String { try await run("curl", ["-s"] + arguments).output }

    @Test("200 with the recorded headers, 304, 206, gzip when asked, identity when not, 404 on a miss, the blocked entry empty")
    func curlAgainstServe() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, _ in

            let headers = try await curl(["-D", "-", "-o", "/dev/null", base + "/"]).lowercased()
            #expect(headers.hasPrefix("http/1.1 200"))
            #expect(headers.contains("etag: \"page-v1\"") && headers.contains("cache-control: max-age=300"))
            #expect(headers.contains("last-modified: sat, 21 nov 2026 10:00:00 gmt") && !headers.contains("content-encoding"))
            #expect(try await curl([base + "/"]) == samplePage)
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \"page-v1\"", base + "/"]) == "304")
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-r", "100-199", base + "/logo.png"]) == "206 100")
            let gzipHeaders = try await curl(["-D", "-", "-o", "/dev/null", "-H", "Accept-Encoding: gzip", base + "/"]).lowercased()
            #expect(gzipHeaders.contains("content-encoding: gzip"))
            #expect(try await curl(["--compressed", base + "/"]) == samplePage)
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code}", base + "/not-there"]) == "404")
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}", base + "/ads.js"]) == "204 0")
            let head = try await curl(["-I", base + "/logo.png"]).lowercased()
            #expect(head.hasPrefix("http/1.1 200") && head.contains("content-length: 50000"))
        }
    }

    @Test("a bundle that is not one is refused with a clear error")
    func refusesCorrupt() async throws {
        let folder = try TemporaryFolder()
        try folder.file("junk.zip", "not a bundle at all")
        let result = try await run(packagerExecutable, ["serve", folder.path + "/junk.zip", "--port", "0"])
        #expect(result.status == 1 && result.output.contains("packager:"))
        let badOrigin = try await run(packagerExecutable, ["serve", folder.path + "/junk.zip", "--origin", "docs.example.com"])
        #expect(badOrigin.status == 2 && badOrigin.output.contains("'docs.example.com' is not an origin"))
    }
}
