import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// `packager verify` against the web servers people run, each as Debian ships it, plain and compressing: a bundle
/// crawled from the server and one packed from the same folder are all fresh while nothing changed, and exactly the
/// two edited pages and the deleted one are flagged after.
@Suite("verify against nginx, Apache httpd, lighttpd and Caddy", .serialized)
struct RealServerVerifyTests {
    /// A small documentation-like site: pages large enough to be compressed, a style sheet, a script, an image.
    static func makeSite(at root: String) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/guide", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root + "/_static", withIntermediateDirectories: true)
        func page(_ title: String, links: [String], paragraphs: Int) -> String {
            var html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>\(title)</title>"
            html += "<link rel=\"stylesheet\" href=\"/_static/style.css\"><script src=\"/_static/app.js\"></script></head><body>\n"
            html += "<h1>\(title)</h1><img src=\"/_static/logo.png\" alt=\"\">\n<ul>"
            for link in links { html += "<li><a href=\"\(link)\">\(link)</a></li>" }
            html += "</ul>\n"
            for n in 0..<paragraphs {
                html += "<p>\(title), paragraph \(n): the quick brown fox jumps over the lazy dog while the docs explain it twice.</p>\n"
            }
            return html + "</body></html>\n"
        }
        let pages = (1...10).map { "guide/page\($0).html" }
        try page("Home", links: pages.map { "/" + $0 }, paragraphs: 40).write(toFile: root + "/index.html", atomically: true, encoding: .utf8)
        for (i, path) in pages.enumerated() {
            let next = "/" + pages[(i + 1) % pages.count]
            try page("Page \(i + 1)", links: ["/", next, "/guide/"], paragraphs: 20 + 10 * i).write(
                toFile: root + "/" + path, atomically: true, encoding: .utf8)
        }
        try page("Guide", links: pages.map { "/" + $0 }, paragraphs: 10).write(toFile: root + "/guide/index.html", atomically: true, encoding: .utf8)
        try String(repeating: "body { font-family: serif; margin: 0 auto; max-width: 60em; }\n", count: 40).write(
            toFile: root + "/_static/style.css", atomically: true, encoding: .utf8)
        try String(repeating: "document.addEventListener('DOMContentLoaded', () => console.log('ready'));\n", count: 30).write(
            toFile: root + "/_static/app.js", atomically: true, encoding: .utf8)
        try noise(3000, seed: 7).write(to: URL(fileURLWithPath: root + "/_static/logo.png"))
        // Deployed an hour ago, as a site is: no validator is taken within the second its file changed.
        try setModified(Date().addingTimeInterval(-3600), under: root)
    }

    static func setModified(_ date: Date, under root: String) throws {
        let fm = FileManager.default
        for path in try fm.subpathsOfDirectory(atPath: root) {
            try fm.setAttributes([.modificationDate: date], ofItemAtPath: root + "/" + path)
        }
    }

    /// Two pages edited (one longer, one the same size) a minute after the build, one deleted.
    static func change(site root: String) throws {
        let longer = root + "/guide/page3.html"
        try (try String(contentsOfFile: longer, encoding: .utf8) + "<p>A new paragraph.</p>\n").write(toFile: longer, atomically: true, encoding: .utf8)
        let same = root + "/guide/page5.html"
        try (try String(contentsOfFile: same, encoding: .utf8).replacingOccurrences(of: "quick brown", with: "QUICK BROWN")).write(
            toFile: same, atomically: true, encoding: .utf8)
        let later = Date().addingTimeInterval(60)
        for path in [longer, same] { try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: path) }
        try FileManager.default.removeItem(atPath: root + "/guide/page7.html")
    }

    /// The verdicts of `packager verify --format json`, by path, and its exit status.
    static func verify(_ bundle: String, base: String, _ extra: [String] = []) async throws -> (status: Int32, verdicts: [String: String], report: String) {
        let result = try await run(
            packagerExecutable, ["verify", bundle, "--allow-private-addresses", "--format", "json", "--retries", "1", "--timeout", "30"] + extra)
        let json = String(result.output[result.output.firstIndex(of: "{")!...])
        let report = try JSONDecoder().decode(VerifyReport.self, from: Data(json.utf8))
        var verdicts: [String: String] = [:]
        for entry in report.entries { verdicts[entry.url.replacingOccurrences(of: base, with: "")] = entry.verdict.rawValue }
        return (result.status, verdicts, json)
    }

    @Test("a crawled and a packed bundle: all fresh while nothing changed, then exactly 2 stale and 1 gone", arguments: RealServer.installed)
    func unchangedThenEdited(kind: String) async throws {
        let folder = try TemporaryFolder()
        let root = folder.path + "/site"
        try Self.makeSite(at: root)
        let server = try await RealServer.start(kind, root: root, state: folder.path + "/server")
        defer { server.stop() }

        let crawl = try await run(packagerExecutable, ["build", "--seed", server.base + "/", "-o", folder.path + "/crawl.zip"])
        #expect(crawl.status == 0, "\(crawl.output)")
        let pack = try await run(packagerExecutable, ["pack", root, "--base-url", server.base + "/", "-o", folder.path + "/pack.zip"])
        #expect(pack.status == 0, "\(pack.output)")
        // Every page, the style sheet, the script and the image.
        #expect(try MountedBundle(path: folder.path + "/crawl.zip").entryCount >= 15)

        for bundle in ["crawl.zip", "pack.zip"] {
            let before = try await Self.verify(folder.path + "/" + bundle, base: server.base)
            #expect(before.status == 0, "\(kind) \(bundle): \(before.report)")
            #expect(before.verdicts.values.allSatisfy { $0 == "fresh" }, "\(kind) \(bundle): \(before.verdicts.filter { $0.value != "fresh" })")
        }

        try Self.change(site: root)
        for bundle in ["crawl.zip", "pack.zip"] {
            let after = try await Self.verify(folder.path + "/" + bundle, base: server.base)
            #expect(after.status == 1, "\(kind) \(bundle): \(after.report)")
            let flagged = after.verdicts.filter { $0.value != "fresh" }
            #expect(
                flagged == ["/guide/page3.html": "stale", "/guide/page5.html": "stale", "/guide/page7.html": "gone"],
                "\(kind) \(bundle): \(after.report)")
        }
    }

    @Test(
        "a packed python3.11-doc against nginx serving the same files: nothing flagged, then exactly the 3 changes",
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/share/doc/python3.11/html/index.html") && RealServer.installed.contains("nginx")))
    func packedPythonDocs() async throws {
        let folder = try TemporaryFolder()
        let root = folder.path + "/html"
        // A copy: the test edits it. Debian's links into /usr/share/javascript are followed as files.
        #expect(try await run("cp", ["-rL", "/usr/share/doc/python3.11/html", root]).status == 0)
        try Self.setModified(Date().addingTimeInterval(-3600), under: root)
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/server")
        defer { server.stop() }
        let pack = try await run(packagerExecutable, ["pack", root, "--base-url", server.base + "/pyv/", "-o", folder.path + "/py.zip"])
        #expect(pack.status == 0, "\(pack.output)")
        // nginx serves the folder at /, the bundle names it under /pyv/: serve it there instead, by a link.
        try FileManager.default.createSymbolicLink(atPath: root + "/pyv", withDestinationPath: ".")
        let before = try await Self.verify(folder.path + "/py.zip", base: server.base)
        #expect(before.status == 0 && before.verdicts.count > 1000, "\(before.verdicts.filter { $0.value != "fresh" })")
        #expect(before.verdicts.values.allSatisfy { $0 == "fresh" }, "\(before.verdicts.filter { $0.value != "fresh" })")

        let edited = ["library/functions.html", "tutorial/classes.html"]
        for path in edited {
            let file = root + "/" + path
            try (try String(contentsOfFile: file, encoding: .utf8) + "<!-- edited -->\n").write(toFile: file, atomically: true, encoding: .utf8)
        }
        try FileManager.default.removeItem(atPath: root + "/library/os.html")
        let after = try await Self.verify(folder.path + "/py.zip", base: server.base)
        #expect(after.status == 1)
        #expect(
            after.verdicts.filter { $0.value != "fresh" } == [
                "/pyv/library/functions.html": "stale", "/pyv/tutorial/classes.html": "stale", "/pyv/library/os.html": "gone",
            ])
    }
}
