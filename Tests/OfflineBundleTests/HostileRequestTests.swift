import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import OfflineBundle

/// Numbers and lists from a request, as an attacker writes them.
@Suite("hostile request headers: overflowing ranges, quoted tag lists")
struct HostileRequestTests {
    let origin = "https://docs.example.com"

    func ask(_ loader: OfflineLoader, _ path: String, _ headers: [(String, String)]) -> BundleResponse? {
        loader.response(for: BundleRequest(url: origin + path, headers: fields(headers)))
    }

    @Test(
        "ranges at and past UInt64's limits answer 206, 416 or the whole body, never trap",
        arguments: [
            ("bytes=0-18446744073709551615", 206, 50_000),
            ("bytes=0-18446744073709551614", 206, 50_000),
            ("bytes=0-99999999999999999999999999", 206, 50_000),
            ("bytes=18446744073709551615-", 416, 0),
            ("bytes=99999999999999999999999-", 416, 0),
            ("bytes=-18446744073709551615", 206, 50_000),
            ("bytes=-99999999999999999999999", 206, 50_000),
            ("bytes=49999-18446744073709551615", 206, 1),
            ("bytes=18446744073709551615-18446744073709551615", 416, 0),
            ("bytes=5-4", 200, 50_000),
            ("bytes=٣-5", 200, 50_000),
            ("bytes=-0", 416, 0),
            ("bytes=--1", 200, 50_000),
            ("bytes=0--1", 200, 50_000),
        ])
    func overflowingRanges(header: String, status: Int, length: Int) throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: origin, to: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let answer = try #require(ask(loader, "/logo.png", [("Range", header)]))
        #expect(answer.status == status)
        #expect(try answer.bodyData().count == length)
        #expect(answer.header("content-length") == String(length))
    }

    @Test("If-None-Match is read as entity-tags: a comma inside quotes is part of a tag")
    func quotedCommas() {
        #expect(BundleResponder.weakMatch("\"a,b\"", "\"a,b\""))
        #expect(BundleResponder.weakMatch("\"x\", W/\"a,b\"", "\"a,b\""))
        #expect(!BundleResponder.weakMatch("\"a\", \"b\"", "\"a,b\""))
        #expect(BundleResponder.weakMatch("\"a\", \"b\"", "W/\"b\""))
        #expect(!BundleResponder.weakMatch("a, b", "\"a\""))
        #expect(!BundleResponder.weakMatch("\"unterminated", "\"unterminated\""))
        #expect(BundleResponder.weakMatch(" * ", "\"anything\""))
    }
}

@Suite("a served bundle survives a hostile client")
struct ServeSurvivesTests {
    @Test("packager serve answers an overflowing Range and keeps serving the next request")
    func serveSurvivesOverflow() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, process in
            for range in ["bytes=0-18446744073709551615", "bytes=18446744073709551615-", "bytes=-18446744073709551615"] {
                let code = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Range: \(range)", base + "/logo.png"]).output
                #expect(code == "206" || code == "416", "\(range): \(code)")
            }
            #expect(process.isRunning)
            let next = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", base + "/logo.png"]).output
            #expect(next == "200 50000")
            // A page that rebinds its own name to 127.0.0.1 sends that name as Host: refused.
            let rebound = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: attacker.example:8080", base + "/logo.png"]).output
            #expect(rebound == "421")
            let local = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: localhost", base + "/logo.png"]).output
            #expect(local == "200")
        }
    }
}
