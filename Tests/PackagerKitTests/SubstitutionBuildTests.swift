import Foundation
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("every declared substitution is packaged, met by the crawl or not")
struct SubstitutionBuildTests {
    @Test("an unlinked {url, file} and a whole {prefix, folder} are in the bundle; a missing file fails the build, named")
    func packagedWhole() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("<html><body>no links</body></html>", type: "text/html"))
            let folder = try TemporaryFolder()
            try folder.file("local/flags.json", "{\"on\": true}")
            try folder.file("fonts/a b.woff2", "font-a")
            try folder.file("fonts/sub/index.html", "<p>fonts</p>")
            try folder.file("fonts/.DS_Store", "junk")
            func declaration(_ file: String) -> String {
                """
                output: out.zip
                seeds: ["\(origin.base)/"]
                substitutions:
                  - url: \(origin.base)/api/flags.json
                    file: \(file)
                  - prefix: https://cdn.example.com/fonts/
                    folder: fonts
                """
            }
            try folder.file("packager.yml", declaration("local/flags.json"))
            let report = try await Builder(declaration: DeclarationParser().parse(contentsOf: folder.path + "/packager.yml")).run()
            #expect(report.succeeded, "\(report.failures.map { "\($0.url): \($0.reason)" })")
            let bundle = try MountedBundle(path: folder.path + "/out.zip")
            let keys = Set(bundle.entries.map(\.key))
            #expect(
                keys == [
                    origin.base + "/", origin.base + "/api/flags.json", "https://cdn.example.com/fonts/a%20b.woff2",
                    "https://cdn.example.com/fonts/sub/index.html", "https://cdn.example.com/fonts/sub/",
                ], "\(keys.sorted())")
            #expect(try bundle.body(of: #require(bundle.entry(for: origin.base + "/api/flags.json"))) == Data("{\"on\": true}".utf8))
            #expect(try bundle.body(of: #require(bundle.entry(for: "https://cdn.example.com/fonts/a%20b.woff2"))) == Data("font-a".utf8))
            #expect(origin.count("/api/flags.json") == 0)

            try folder.file("packager.yml", declaration("local/missing.json"))
            try? FileManager.default.removeItem(atPath: folder.path + "/out.zip")
            let failed = try await Builder(declaration: DeclarationParser().parse(contentsOf: folder.path + "/packager.yml")).run()
            #expect(!failed.succeeded)
            #expect(failed.failures.contains { $0.declared && $0.reason.contains("local/missing.json") }, "\(failed.failures.map(\.reason))")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"))
        }
    }
}
