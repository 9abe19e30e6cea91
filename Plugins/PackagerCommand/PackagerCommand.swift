import Foundation
import PackagePlugin

/// `swift package packager …`: the packager CLI, built from this package, run in the package that asks.
///
/// - `swift package --allow-network-connections all --allow-writing-to-package-directory packager build
///   [DECLARATION] [--target NAME] [build options]` builds the package's declared bundle (`packager.yml` unless named
///   first).
///   With `--target NAME` it is written to `OfflineBundles/<declaration name>.zip` in that target's folder, which the
///   target ships with `resources: [.copy("OfflineBundles")]` and mounts from `Bundle.module`.
/// - `swift package --allow-network-connections all packager verify BUNDLE [verify options]` compares a bundle's
///   entries with the live servers.
/// - Any other subcommand (`inspect`, `check`, `diff`…) is passed to the CLI as it is.
///
/// Relative paths are the package folder's. The CLI's exit status is the command's.
@main
struct PackagerCommand: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        let package = context.package.directoryURL
        var arguments = arguments
        // `swift package packager -- build …` hands the separator over too.
        if arguments.first == "--" { arguments.removeFirst() }
        guard let command = arguments.first else {
            Diagnostics.error("say what to run: swift package packager build [DECLARATION] [--target NAME], or packager verify BUNDLE")
            throw PluginFailure(status: 2)
        }
        var rest = Array(arguments.dropFirst())
        if command == "build" {
            rest = try Self.buildArguments(rest, context: context)
        }
        let tool = try Self.buildCLI(packageManager: packageManager)
        let status = Self.run(tool, [command] + rest, in: package)
        if status != 0 { throw PluginFailure(status: status) }
    }

    /// `build`'s arguments with `--target NAME` turned into the output path in that target's `OfflineBundles` folder.
    static func buildArguments(_ given: [String], context: PluginContext) throws -> [String] {
        var extractor = ArgumentExtractor(given)
        let targets = extractor.extractOption(named: "target")
        var rest = extractor.remainingArguments
        guard let name = targets.last else { return rest }
        if targets.count > 1 {
            Diagnostics.error("--target is given \(targets.count) times; a bundle goes to one target")
            throw PluginFailure(status: 2)
        }
        guard let target = try context.package.targets(named: [name]).first as? SourceModuleTarget else {
            Diagnostics.error("\(name) is not a source target of \(context.package.displayName)")
            throw PluginFailure(status: 2)
        }
        if rest.contains(where: { $0 == "-o" || $0 == "--output" || $0.hasPrefix("--output=") }) {
            Diagnostics.error("--target and --output both say where the bundle goes; give one")
            throw PluginFailure(status: 2)
        }
        // The declaration comes first when named; packager.yml when not, unless the build crawls --seed or --url pages.
        let declaration = rest.first.flatMap { $0.hasPrefix("-") ? nil : $0 }
        let crawlsWithout = rest.contains { $0 == "--seed" || $0 == "--url" || $0.hasPrefix("--seed=") || $0.hasPrefix("--url=") }
        var stem = URL(fileURLWithPath: declaration ?? (crawlsWithout ? "bundle" : "packager.yml")).deletingPathExtension().lastPathComponent
        if stem.isEmpty { stem = "bundle" }
        let folder = target.directoryURL.appending(path: "OfflineBundles")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let output = folder.appending(path: stem + ".zip").path
        rest += ["--output", output]
        if !target.sourceFiles.contains(where: { $0.type == .resource && $0.url.path.hasPrefix(folder.path + "/") }) {
            print(
                "\(name) ships \(output) once it declares resources: [.copy(\"OfflineBundles\")]; mount it with"
                    + " OfflineLoader(path: Bundle.module.path(forResource: \"\(stem)\", ofType: \"zip\", inDirectory: \"OfflineBundles\")!)")
        }
        return rest
    }

    /// The CLI, built by SwiftPM as a product of the package graph, in debug (the first use compiles it: minutes; the
    /// package's own debug builds share the modules). For a large crawl, a release build of the CLI is faster. Built here,
    /// not declared as the plugin's tool: a tool dependency would compile the CLI's whole graph a second time, for the
    /// host, in every `swift build` of a package that lists this plugin.
    static func buildCLI(packageManager: PackageManager) throws -> URL {
        let result = try packageManager.build(.product("packager"), parameters: .init(configuration: .debug, logging: .concise))
        guard result.succeeded, let built = result.builtArtifacts.first(where: { $0.kind == .executable && $0.url.lastPathComponent == "packager" })
        else {
            print(result.logText)
            Diagnostics.error("could not build the packager CLI (swift build --product packager says why)")
            throw PluginFailure(status: 1)
        }
        return built.url
    }

    /// Runs the CLI in `folder`, its output going straight to the terminal; its exit status.
    static func run(_ tool: URL, _ arguments: [String], in folder: URL) -> Int32 {
        let process = Process()
        process.executableURL = tool
        process.arguments = arguments
        process.currentDirectoryURL = folder
        do {
            try process.run()
        } catch {
            Diagnostics.error("could not run \(tool.path): \(error)")
            return 1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// The CLI's exit status, for `swift package` to exit with (it says the plugin failed, and the CLI said why).
struct PluginFailure: Error, CustomStringConvertible {
    var status: Int32
    var description: String { "packager exited with status \(status)" }
}
