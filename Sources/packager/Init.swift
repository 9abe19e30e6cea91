import ArgumentParser
import Foundation
import PackagerKit

extension Packager {
    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Write a commented starter declaration (packager.yml) to edit.",
            discussion: "Every key is described in docs/DECLARATION.md. Then: packager build packager.yml\n\n" + exitStatusHelp
        )

        @Argument(help: "Where to write it.")
        var path: String = "packager.yml"

        @Flag(help: "Replace an existing file.")
        var force = false

        func run() throws {
            try reportingErrors {
                if FileManager.default.fileExists(atPath: path) && !force {
                    throw PackagerError(.invalidInput, "\(path) exists; use --force to replace it")
                }
                guard FileManager.default.createFile(atPath: path, contents: Data(StarterDeclaration.text.utf8)) else {
                    throw PackagerError(.io, "cannot write \(path)")
                }
                print("wrote \(path): edit the seeds, scope and output, then run: packager build \(path)")
            }
        }
    }
}
