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
}
