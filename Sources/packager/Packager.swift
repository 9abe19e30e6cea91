import ArgumentParser
import Dispatch
import Foundation
import OfflineBundle
import PackagerKit
import Synchronization

@main
struct Packager: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "packager",
        abstract: "Crawl or pack web content into offline bundles, check them, and take them apart.",
        discussion: """
            A bundle is a ZIP file of responses keyed by URL, with a JSON manifest and a \
            compact index that services mount at launch (docs/FORMAT.md).
            """,
        version:
            "packager \(PackagerVersion.string): writes bundle format \(BundleFormat.version), reads formats "
            + "\(BundleFormat.readableVersions.lowerBound) to \(BundleFormat.readableVersions.upperBound) (docs/FORMAT.md)",
        subcommands: [
            Demo.self, Init.self, Build.self, Serve.self, Verify.self, Refresh.self, Diff.self, Delta.self, Apply.self, Channel.self, Keygen.self, Pack.self,
            Inspect.self,
            Check.self, Extract.self,
            Export.self,
        ]
    )

    /// Runs the command, with wrong arguments exiting 2 (as the commands document) instead of ArgumentParser's 64.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// Runs a command body, turning the project's errors into one clear line and an exit code.
func reportingErrors(status: Int32? = nil, _ body: () throws -> Void) throws {
    Interrupts.install()
    do {
        try body()
    } catch {
        throw reported(error, status: status)
    }
}

/// The async form of ``reportingErrors(status:_:)``, for commands that crawl or serve.
func reportingErrorsAsync(status: Int32? = nil, _ body: () async throws -> Void) async throws {
    Interrupts.install()
    do {
        try await body()
    } catch {
        throw reported(error, status: status)
    }
}

/// Prints the project's errors as one line and turns them into an exit code (2 for wrong input, 1 otherwise); other
/// errors pass through. With `status`, every error is printed and exits with it: verify, refresh and diff say 1 for
/// "stale" or "they differ", so a check that could not be made, for whatever reason, must not exit 1.
private func reported(_ error: any Error, status: Int32?) -> any Error {
    let usage: Bool
    switch error {
    case let error as PackagerError: usage = error.code == .invalidInput
    // A delta given over another bundle than its own is the wrong input, as a file that does not exist is.
    case let error as BundleError: usage = error.isWrongInput
    case let error as ExitCode: return status.map { error.rawValue == 0 ? error : ExitCode($0) } ?? error
    default:
        guard let status else { return error }
        FileHandle.standardError.write(Data("packager: \(error)\n".utf8))
        return ExitCode(status)
    }
    FileHandle.standardError.write(Data("packager: \(error)\n".utf8))
    return ExitCode(status ?? (usage ? 2 : 1))
}

/// Refuses an output that is one of the command's inputs (the same file: device and inode), which writing would
/// replace with what the command makes from it. An output that does not exist yet is no input.
func refuseOutput(_ output: String?, option: String = "-o", over inputs: [(path: String?, what: String)]) throws {
    if let conflict = outputConflict(output, option: option, over: inputs) { throw ValidationError(conflict) }
}

/// Why `output` cannot be written (it is one of `inputs`), or nil.
func outputConflict(_ output: String?, option: String = "-o", over inputs: [(path: String?, what: String)]) -> String? {
    guard let output, let written = BundleFile.identity(ofPath: output) else { return nil }
    for case (let path?, let what) in inputs where BundleFile.identity(ofPath: path) == written {
        return "\(option) \(output) is \(what), which this command reads: writing it would replace it; give another path"
    }
    return nil
}

/// Refuses, before a long run, an output path that cannot be written when the run ends (``OutputFile/problem(with:)``).
func refuseUnwritableOutput(_ output: String?, option: String = "-o") throws {
    guard let output, !output.isEmpty, let problem = OutputFile.problem(with: output) else { return }
    throw ValidationError("\(option) \(output): \(problem.message)")
}

/// Refuses a bundle URL where a command reads files only.
func refuseURLs(_ paths: [String], command: String) throws {
    for path in paths where RemoteOptions.isRemote(path) {
        throw ValidationError(
            "\(RemoteObject.shown(path)) is a URL: \(command) reads bundle files (download it first; serve, check, inspect and verify read URLs)")
    }
}

/// Prints a value as the JSON every `--json` flag gives: indented, keys sorted.
func printJSON<Value: Encodable>(_ value: Value) throws {
    print(String(decoding: try outputEncoder().encode(value), as: UTF8.self))
}

/// The encoder of every JSON the commands print: indented, keys sorted, slashes as they are.
func outputEncoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return encoder
}

/// Removes temporary files when the process is interrupted, so no partial bundle or spool file is left.
enum Interrupts {
    /// Made once, the first time ``install()`` is called; kept alive for the life of the process.
    // nonisolated(unsafe): a `let`, initialized once (Swift's lazy globals are thread-safe) and never mutated; only
    // Dispatch's signal sources are not marked Sendable on Linux.
    nonisolated(unsafe) private static let sources: [any DispatchSourceSignal] = [SIGINT, SIGTERM, SIGHUP].map { signalNumber in
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler {
            // A server reloads on SIGHUP instead of stopping.
            if signalNumber == SIGHUP, let reload = hangup.withLock({ $0 }) {
                reload()
                return
            }
            // A server stops gracefully on the first SIGTERM or SIGINT (its answers in flight finish); the second one
            // exits at once, and so do two that came before the first was handled (Dispatch merges them: `data`
            // counts them).
            if signalNumber != SIGHUP, source.data < 2,
                let stop = stopping.withLock({ state -> (@Sendable () -> Void)? in
                    defer { state = nil }
                    return state
                })
            {
                stop()
                return
            }
            if TemporaryFiles.shared.removeAll() {
                FileHandle.standardError.write(
                    Data("packager: interrupted; the partial output was removed and nothing was written to the output path\n".utf8))
            }
            exit(128 + signalNumber)
        }
        source.resume()
        return source
    }

    static func install() { _ = sources }

    /// What SIGHUP does instead of stopping the process (`packager serve` reloads its bundles), set once a server is up.
    private static let hangup = Mutex<(@Sendable () -> Void)?>(nil)

    static func onHangup(_ action: @escaping @Sendable () -> Void) { hangup.withLock { $0 = action } }

    /// What the first SIGTERM or SIGINT does instead of exiting (`packager serve` shuts down gracefully); a second
    /// exits at once, with 128 + the signal.
    private static let stopping = Mutex<(@Sendable () -> Void)?>(nil)

    static func onStop(_ action: @escaping @Sendable () -> Void) { stopping.withLock { $0 = action } }
}

/// What every command's help says of its exit status (verify, refresh, check and diff say their own).
let exitStatusHelp =
    "Exit status: 0 on success; 1 when the run fails (a file that cannot be written, a full disk); 2 when an argument or an input is wrong (a file that is not there, a folder, not a bundle or not an archive)."

func formatBytes(_ n: UInt64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    return unit == 0 ? "\(n) B" : String(format: "%.1f %@", value, units[unit])
}
