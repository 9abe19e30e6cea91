import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@Suite("BundleServing: the answer step every transport runs")
struct ServingTests {
    func serving(_ folder: TemporaryFolder, prefix: String = "/", policy: ServerPolicy = .open) throws -> BundleServing {
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        return BundleServing(handle: LoaderHandle(loader), routes: [try BundleServing.singleOriginRoute(of: loader, pathPrefix: prefix)], policy: policy)
    }

    func answer(_ outcome: ServeOutcome) -> ServeAnswer? {
        if case .answer(let answer) = outcome { return answer }
        return nil
    }

    @Test("routes by prefix, rewrites a same-origin Location under it, and leaves 304 and HEAD without a body")
    func answers() throws {
        let folder = try TemporaryFolder()
        let serving = try serving(folder, prefix: "/docs")
        let page = try #require(answer(serving.answer(method: "GET", target: "/docs/", host: "localhost:8080", headers: [:])))
        #expect(page.status == 200 && page.url == "https://docs.example.com/" && page.sendsBody && page.bodyPlace == .small)
        let opened = try #require(try page.openBody())
        #expect(opened.second == nil && String(decoding: opened.first, as: UTF8.self) == samplePage)
        let moved = try #require(answer(serving.answer(method: "GET", target: "/docs/old", host: nil, headers: [:])))
        #expect(moved.status == 301 && moved.headers[.location] == "/docs/")
        let head = try #require(answer(serving.answer(method: "HEAD", target: "/docs/", host: nil, headers: [:])))
        #expect(!head.sendsBody && head.bodyPlace == .none)
        #expect(try head.openBody() == nil)
        #expect(head.headers[.contentLength] == String(samplePage.utf8.count))
        let unchanged = try #require(answer(serving.answer(method: "GET", target: "/docs/", host: nil, headers: [.ifNoneMatch: "\"page-v1\""])))
        #expect(unchanged.status == 304 && !unchanged.sendsBody)
        guard case .miss = serving.answer(method: "GET", target: "/logo.png", host: nil, headers: [:]) else {
            Issue.record("a target outside the prefix is a miss")
            return
        }
        guard case .miss = serving.answer(method: "GET", target: "/docs/not-here", host: nil, headers: [:]) else {
            Issue.record("a key the bundle lacks is a miss")
            return
        }
    }

    @Test("a Host the policy does not know is 421 (IP literals and localhost always answer); an absolute-form target's authority is the Host")
    func hostPolicy() throws {
        let folder = try TemporaryFolder()
        let serving = try serving(folder, policy: ServerPolicy(allowedHosts: ["Docs.Test"]))
        for host in ["docs.test:8080", "127.0.0.1:80", "[::1]:8080", "localhost", "a.localhost", nil] as [String?] {
            #expect(answer(serving.answer(method: "GET", target: "/", host: host, headers: [:]))?.status == 200, "\(host ?? "none")")
        }
        for host in ["rebound.example", "127.0.0.1.example", "1..2", "١٢٧.0.0.1"] {
            guard case .status(421) = serving.answer(method: "GET", target: "/", host: host, headers: [:]) else {
                Issue.record("\(host) is answered")
                continue
            }
        }
        guard case .status(421) = serving.answer(method: "GET", target: "http://rebound.example/", host: "localhost", headers: [:]) else {
            Issue.record("the absolute form's authority is not the Host")
            return
        }
        #expect(answer(serving.answer(method: "GET", target: "http://docs.test/logo.png", host: "rebound.example", headers: [:]))?.status == 200)
    }

    @Test("an access-log line escapes the client's request line and names what answered")
    func commonLogLine() {
        let served = ServedRequest(
            client: "127.0.0.1", method: "GET", target: "/a\"b\n", status: 200, contentLength: "12", source: .bundle("b.zip"))
        #expect(
            served.commonLogLine(at: Date(timeIntervalSince1970: 1_795_438_921))
                == "127.0.0.1 - - [23/Nov/2026:13:02:01 +0000] \"GET /a\\x22b\\x0a HTTP/1.1\" 200 12 \"b.zip\"\n")
    }
}
