import Foundation
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("every declared substitution is packaged, met by the crawl or not")
struct SubstitutionBuildTests {
    @Test(
        "an unlinked {url, file} and a whole {prefix, folder} are in the bundle; a missing file or folder is a bad declaration, named with its line before anything is fetched"
    )
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

            // A declared file or folder that is not there is a mistake in the declaration, said with its file, line and column before
            // anything is fetched; the command exits 2, as for any bad declaration.
            try folder.file("packager.yml", declaration("local/missing.json"))
            try? FileManager.default.removeItem(atPath: folder.path + "/out.zip")
            let asked = origin.count("/")
            let failed = await #expect(throws: PackagerError.self) {
                try await Builder(declaration: DeclarationParser().parse(contentsOf: folder.path + "/packager.yml")).run()
            }
            #expect(failed?.code == .invalidInput, "\(String(describing: failed))")
            #expect(failed?.message.contains("packager.yml:5:11: the substitution file local/missing.json") == true, "\(String(describing: failed))")
            #expect(origin.count("/") == asked)
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"))
            let cli = try await run(packagerExecutable, ["build", folder.path + "/packager.yml"])
            #expect(cli.status == 2 && cli.output.contains("local/missing.json"), "\(cli.status): \(cli.output)")
            try folder.file("packager.yml", declaration("local/flags.json").replacingOccurrences(of: "folder: fonts", with: "folder: nofonts"))
            let noFolder = try await run(packagerExecutable, ["build", folder.path + "/packager.yml"])
            #expect(noFolder.status == 2 && noFolder.output.contains("packager.yml:7:13: the substitution folder nofonts"), "\(noFolder.output)")
            #expect(origin.count("/") == asked)
        }
    }
}
