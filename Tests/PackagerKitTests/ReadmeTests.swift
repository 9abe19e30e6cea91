import Foundation
import TestSupport
import Testing

@Suite("the README as a new user runs it")
struct ReadmeTests {
    @Test("every command in README.md's console blocks runs as written, with the exit status it shows (scripts/readme-check.sh)")
    func everyCommandRuns() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let result = try await run(root + "/scripts/readme-check.sh", [packagerExecutable, root + "/README.md"])
        #expect(result.status == 0, "\(result.output)")
        // The check really ran the walkthrough: the build, verify and serve lines are among those it reports.
        #expect(result.output.contains("$ packager build packager.yml"))
        #expect(result.output.contains("$ packager verify"))
        #expect(result.output.contains("$ packager serve"))
    }

    @Test("every swift block of README.md compiles as pasted, with its own imports (scripts/readme-swift-check.sh)")
    func everySwiftBlockCompiles() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        // The modules of the build the tests run in: the folder of the packager binary.
        let build = (packagerExecutable as NSString).deletingLastPathComponent
        let result = try await run(root + "/scripts/readme-swift-check.sh", [build, root + "/README.md"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("swift blocks of"), "\(result.output)")
    }

    /// argument-parser's manual generator, as `make test` and `make install` build it from the resolved checkout.
    static let generateManual: String? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let path = root + "/.build/generate-manual/debug/generate-manual"
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    @Test(
        "make install's files: the tool, a man page per command, bash, zsh and fish completions; make uninstall removes them all",
        .enabled(if: generateManual != nil, "generate-manual is not built (make test builds it into .build/generate-manual)"))
    func installs() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let prefix = try TemporaryFolder()
        let installed = try await run(root + "/scripts/install.sh", [packagerExecutable, try #require(Self.generateManual), prefix.path])
        #expect(installed.status == 0, "\(installed.output)")
        let pages = try FileManager.default.contentsOfDirectory(atPath: prefix.path + "/share/man/man1").sorted()
        // One page for the tool and one for each command the help lists.
        for command in ["build", "verify", "refresh", "serve", "check", "pack", "inspect", "extract", "keygen", "init", "delta", "apply", "diff"] {
            #expect(pages.contains("packager.\(command).1"), "\(pages)")
        }
        #expect(pages.contains("packager.1"))
        let build = try String(contentsOfFile: prefix.path + "/share/man/man1/packager.build.1", encoding: .utf8)
        #expect(build.contains(".Sh NAME") && build.contains("Fl -quiet") && build.contains("Exit status"), "\(build.prefix(400))")
        #expect(!build.contains("\n\n"), "an empty line is an mdoc warning")
        let bash = try await run("bash", ["-n", prefix.path + "/share/bash-completion/completions/packager"])
        #expect(bash.status == 0, "\(bash.output)")
        for file in ["share/zsh/site-functions/_packager", "share/fish/vendor_completions.d/packager.fish"] {
            let text = try String(contentsOfFile: prefix.path + "/" + file, encoding: .utf8)
            #expect(text.contains("verify") && text.contains("--sign-key"), "\(file)")
        }
        let version = try await run(prefix.path + "/bin/packager", ["--version"])
        #expect(version.status == 0 && version.output.contains("writes bundle format"), "\(version.output)")
        let removed = try await run(root + "/scripts/install.sh", ["--uninstall", prefix.path])
        #expect(removed.status == 0, "\(removed.output)")
        let left = FileManager.default.enumerator(atPath: prefix.path)?.compactMap { $0 as? String }.filter {
            var folder: ObjCBool = false
            return FileManager.default.fileExists(atPath: prefix.path + "/" + $0, isDirectory: &folder) && !folder.boolValue
        }
        #expect(left == [], "\(left ?? [])")
    }
}
