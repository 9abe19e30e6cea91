import ArgumentParser
import Foundation
import OfflineBundle
import PackagerKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Options verify and refresh share: how to ask the live servers.
struct ProbeOptions: ParsableArguments {
    @Option(name: .customLong("declaration"), help: "Take request headers (with ${ENV} values), retries, timeouts and concurrency from this declaration.")
    var declaration: String?

    @Flag(help: "Compare every body by SHA-256, whatever the validators say (header differences become notes).")
    var deep = false

    @Flag(help: "Read no body: validators and lengths only; entries without the origin's validators are unverifiable.")
    var shallow = false

    @Option(name: .customLong("max-body"), help: "Read no body past this many bytes (default: 256M; sizes as in a declaration: 64M, 500MB, 2GiB).")
    var maxBody: String?

    @Option(help: "Requests in flight at once (default: 16).")
    var concurrency: Int?

    @Option(name: .customLong("per-host"), help: "Requests in flight at once per host (default: 8).")
    var perHost: Int?

    @Option(help: "At most this many requests per second, in all.")
    var rate: Double?

    @Option(help: "Retries after the first attempt on connection errors, timeouts, 429 and 5xx (default: 3).")
    var retries: Int?

    @Option(help: "Seconds a request may take (default: 60).")
    var timeout: Double?

    @Option(name: .customLong("connect-timeout"), help: "Seconds to keep trying to connect to a server (default: 10).")
    var connectTimeout: Double?

    @Flag(
        name: .customLong("allow-private-addresses"),
        help: "Ask keys on loopback and private addresses too (by default only on origins --declaration names; link-local never).")
    var allowPrivateAddresses = false

    @Flag(
        name: .customLong("resend-unsafe"),
        help: "Send declared POST, PUT, PATCH and DELETE requests again to compare their answers (by default they are not: they may change the server).")
    var resendUnsafe = false

    func validate() throws {
        if let concurrency, concurrency < 1 { throw ValidationError("--concurrency must be at least 1") }
        if let perHost, perHost < 1 { throw ValidationError("--per-host must be at least 1") }
        if let retries, retries < 0 { throw ValidationError("--retries cannot be negative") }
        if let rate, !rate.isFinite || rate < 0.001 || rate > 1_000_000 {
            throw ValidationError("--rate must be a number of requests per second from 0.001 to 1000000")
        }
        if let timeout, !timeout.isFinite || timeout <= 0 || timeout > 86_400 {
            throw ValidationError("--timeout must be more than zero seconds, at most 86400")
        }
        if let connectTimeout, !connectTimeout.isFinite || connectTimeout <= 0 || connectTimeout > 86_400 {
            throw ValidationError("--connect-timeout must be more than zero seconds, at most 86400")
        }
        if deep && shallow { throw ValidationError("--deep and --shallow cannot both be given: --deep reads every body, --shallow none") }
        if let maxBody, DeclarationParser.byteSize(maxBody) == nil {
            throw ValidationError("--max-body: '\(maxBody)' is not a size of one byte or more (say 512K, 64M or 1G)")
        }
    }

    /// The options a `packager refresh` advised by a report needs to ask the same servers the same way, each with a
    /// leading space: what reaches the server (the declaration, private addresses, unsafe methods) and the body bound.
    var carriedArguments: String {
        var arguments: [String] = []
        if let declaration { arguments += ["--declaration", shellQuoted(declaration)] }
        if allowPrivateAddresses { arguments.append("--allow-private-addresses") }
        if resendUnsafe { arguments.append("--resend-unsafe") }
        if let maxBody { arguments += ["--max-body", shellQuoted(maxBody)] }
        return arguments.map { " " + $0 }.joined()
    }

    func verifierOptions() throws -> Verifier.Options {
        var options = try declaration.map { Verifier.Options(declaration: try DeclarationParser().parse(contentsOf: $0)) } ?? Verifier.Options()
        options.deep = deep
        options.shallow = shallow
        if let maxBody, let bytes = DeclarationParser.byteSize(maxBody) { options.maxBodyBytes = UInt64(bytes) }
        if let concurrency { options.concurrency = concurrency }
        if let perHost { options.perHost = perHost }
        options.rate = rate
        if let retries { options.retries.attempts = retries }
        if let timeout { options.timeouts.request = timeout }
        if let connectTimeout { options.timeouts.connect = connectTimeout }
        options.allowPrivateAddresses = allowPrivateAddresses
        options.resendUnsafe = resendUnsafe
        return options
    }
}

extension Packager {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Ask the live servers whether each entry of a bundle is still fresh.",
            discussion: """
                Entries with the origin's ETag or Last-Modified get a conditional GET; when the validators \
                differ, the body is hashed and the content decides (servers change validators when they \
                compress). Entries without them get a GET whose body is hashed. --shallow reads no body; --deep \
                compares every body. Verdicts: fresh, stale, gone, moved, unreachable, unverifiable; substituted \
                and blocked entries are reported, not probed (--check-substituted asks the remotes of substituted \
                entries whether they changed since the build: a note, failing only with --fail-on substituted).

                Exit status: 0 when no entry has a failing verdict; 1 when one is stale, gone or moved; \
                2 when one is unreachable and unreachable is among the failing verdicts (the check is \
                incomplete), or on a usage error. --fail-on chooses the failing verdicts \
                (default: stale,gone,moved,unreachable).

                Example: packager verify docs.bundle.zip --format junit --output verify.xml
                """
        )

        @Argument(help: "The bundle to verify: a file, or an http(s) URL read by range requests.")
        var bundle: String

        @OptionGroup var probe: ProbeOptions

        @OptionGroup(title: "Bundle URLs") var remote: RemoteFlags

        @Option(help: "Report format: text, json, junit, markdown or html.")
        var format: String = "text"

        @Flag(help: "The report as JSON (the same as --format json), as build, inspect, check and diff take it.")
        var json = false

        @Option(name: [.short, .customLong("output")], help: "Write the report to this file (the summary still goes to the terminal).")
        var output: String?

        @Option(name: .customLong("fail-on"), help: "Comma-separated verdicts that fail the job.")
        var failOn: String = "stale,gone,moved,unreachable"

        @Flag(name: .customLong("check-substituted"), help: "Ask the remote URLs substituted entries stand in for whether they changed since the build.")
        var checkSubstituted = false

        @OptionGroup var level: OutputLevel

        func validate() throws {
            if json && format != "text" && format != "json" { throw ValidationError("give --json or --format \(format), not both") }
            guard ReportFormatter.Format(rawValue: format) != nil else {
                throw ValidationError("--format must be one of \(ReportFormatter.Format.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            _ = try failingVerdicts()
            try refuseOutput(output, over: [(bundle, "the bundle to verify"), (probe.declaration, "the declaration")])
            try refuseUnwritableOutput(output)
        }

        func failingVerdicts() throws -> Set<Verdict> {
            var set = Set<Verdict>()
            for name in failOn.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
                guard let verdict = Verdict(rawValue: name) else {
                    throw ValidationError("--fail-on: '\(name)' is not a verdict (\(Verdict.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                set.insert(verdict)
            }
            guard !set.isEmpty else {
                throw ValidationError("--fail-on names no verdict: give at least one of \(Verdict.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return set
        }

        func run() async throws {
            var code: Int32 = 0
            // An error (a bundle that cannot be read, a report that cannot be written) means the check was not made: 2.
            try await reportingErrorsAsync(status: 2) {
                guard RemoteOptions.isRemote(bundle) || FileManager.default.fileExists(atPath: bundle) else {
                    throw PackagerError(.invalidInput, "cannot open \(bundle): no such file or directory")
                }
                var options = try probe.verifierOptions()
                options.failOn = try failingVerdicts()
                options.checkSubstituted = checkSubstituted
                // The command a report advises runs as printed: the bundle, and the options this check needed.
                options.bundleArgument = shellQuoted(RemoteObject.shown(bundle)) + probe.carriedArguments
                let live = isatty(STDERR_FILENO) == 1
                let report = try await Verifier(options: options).verify(bundleAt: bundle, remote: try remote.options(for: [bundle])) { done, total in
                    if live && (done % 25 == 0 || done == total) { FileHandle.standardError.write(Data("\r\u{1B}[Kverified \(done)/\(total)".utf8)) }
                }
                if live { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                let kind: ReportFormatter.Format = json ? .json : ReportFormatter.Format(rawValue: format) ?? .text
                let color = output == nil && kind == .text && TerminalStyle(fd: STDOUT_FILENO).enabled
                if let output {
                    // Written as it is made (JSON, JUnit), not held whole: a report of a million entries.
                    try ReportFormatter.write(report, as: kind, color: color, all: level.verbose, to: output)
                    print(ReportFormatter.summaryLine(report))
                    if !level.quiet { print("report (\(kind.rawValue)) written to \(output)") }
                } else if level.quiet && kind == .text {
                    print(ReportFormatter.summaryLine(report))
                } else {
                    // A piece at a time, ended with a newline as print ends it.
                    let printed = PrintedPieces()
                    try ReportFormatter.write(report, as: kind, color: color, all: level.verbose) { printed.output.append($0) }
                    printed.output.append("\n".utf8)
                    printed.output.flush()
                }
                code = report.exitCode
            }
            if code != 0 { throw ExitCode(code) }
        }
    }

    struct Refresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "refresh",
            abstract: "Re-fetch what verify finds stale, gone or moved, and write a new bundle.",
            discussion: """
                Every unchanged entry is carried over byte for byte. A signed bundle is signed again with --sign-key \
                (or PACKAGER_SIGN_KEY), which must be the key that signed it, or refused: refresh never writes an \
                unsigned bundle in place of a signed one (an unsigned one given a key comes out signed). Re-fetched \
                bodies stop at --max-body. When nothing changed, nothing is written.

                Exit status: 0 when everything found changed was refreshed; 1 when something could not be \
                re-fetched or checked (it keeps its old response), or the run failed (a full disk); 2 when the \
                arguments are wrong.

                Example: packager refresh docs.bundle.zip -o docs.new.zip
                """
        )

        @Argument(help: "The bundle to refresh.")
        var bundle: String

        @Option(name: [.short, .customLong("output")], help: "Where to write the new bundle (default: replace BUNDLE, atomically).")
        var output: String?

        @OptionGroup var probe: ProbeOptions

        @Option(
            name: .customLong("sign-key"),
            help: "Sign the new bundle with this Ed25519 private key file (default: $PACKAGER_SIGN_KEY, base64); required for a signed bundle.")
        var signKey: String?

        @Option(
            name: .customLong("delta-out"),
            help: "Also write the delta from BUNDLE as it was to the refreshed bundle here (packager delta), for fleets that hold BUNDLE.")
        var deltaOut: String?

        @OptionGroup var level: OutputLevel

        func validate() throws {
            try refuseURLs([bundle], command: "refresh")
            // Writing the refreshed bundle over BUNDLE is what refresh does by default; the delta is another file.
            try refuseOutput(
                deltaOut, option: "--delta-out",
                over: [
                    (bundle, "the bundle to refresh"), (output, "the refreshed bundle's path"), (probe.declaration, "the declaration"),
                    (signKey, "the signing key"),
                ])
            try refuseOutput(output, over: [(probe.declaration, "the declaration"), (signKey, "the signing key")])
            try refuseUnwritableOutput(output)
            try refuseUnwritableOutput(deltaOut, option: "--delta-out")
        }

        func run() async throws {
            var incomplete = false
            try await reportingErrorsAsync {
                guard FileManager.default.fileExists(atPath: bundle) else {
                    throw PackagerError(.invalidInput, "cannot open \(bundle): no such file or directory")
                }
                // Mounted before the refresh: the bundle as it was stays readable after the new one replaces it.
                let before = try deltaOut.map { _ in try DeltaBundles.mount(bundle) }
                var options = try probe.verifierOptions()
                options.bundleArgument = shellQuoted(bundle) + probe.carriedArguments
                var refresher = Refresher(options: options)
                refresher.signingKey = try SigningKeys.privateKey(file: signKey, environment: "PACKAGER_SIGN_KEY")
                let summary = try await refresher.refresh(bundleAt: bundle, output: output ?? bundle)
                print(ReportFormatter.summaryLine(summary.verify))
                if !level.quiet {
                    let (refreshed, more) = GroupedListing.shown(summary.refreshed, all: level.verbose)
                    for (url, status) in refreshed { print("  refreshed \(terminalSafe(url)) (now \(status))") }
                    if more > 0 { print(GroupedListing.moreLine(more, indent: "  ")) }
                    for (url, resources) in summary.linksNew {
                        print("  warning: \(terminalSafe(url)) now links \(resources) the bundle lacks: rebuild to record them")
                    }
                }
                // What was left as it was is printed even with --quiet: it is why the run exits 1.
                let kept = groupedLines(summary.failed, saying: "kept the old response for", all: level.verbose)
                let unchecked = groupedLines(summary.unchecked, saying: "could not check", all: level.verbose)
                if !(kept + unchecked).isEmpty { print((kept + unchecked).joined(separator: "\n")) }
                if let write = summary.write {
                    print("wrote \(output ?? bundle): \(write.entries) entries, \(formatBytes(write.fileSize)), digest sha256:\(write.digest)")
                    if let deltaOut, let before {
                        let delta = try DeltaBundles.make(old: before, new: output ?? bundle, to: deltaOut)
                        print("wrote \(deltaOut): the delta from the bundle as it was, \(formatBytes(delta.size))")
                    }
                } else {
                    print("nothing to refresh: \(output ?? bundle) \(output == nil || output == bundle ? "left as it was" : "is a copy of \(bundle)")")
                }
                // Something is left as it was that may be stale: the refresh is incomplete.
                incomplete = !summary.failed.isEmpty || !summary.unchecked.isEmpty
            }
            // Not all it found changed was refreshed: a failure of the run (1), as in every command; 2 is wrong input.
            if incomplete { throw ExitCode(1) }
        }
    }

    struct Diff: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "diff",
            abstract: "Show what changed between two bundles: keys added, removed and changed, with sizes.",
            discussion: """
                Exit status: 0 when they answer alike, 1 when they differ, 2 when they cannot be compared (a bundle missing, or damaged \
                where diff reads it: its index, or a changed text or JSON body it shows the lines of; packager check reads every body).
                """
        )

        @Argument(help: "The older bundle.")
        var old: String

        @Argument(help: "The newer bundle, or a delta made over the older one (packager delta).")
        var new: String

        @Flag(help: "Print the difference as JSON.")
        var json = false

        func validate() throws { try refuseURLs([old, new], command: "diff") }

        func run() throws {
            var differs = false
            // 1 says "they differ": a comparison that could not be made is 2, as for cmp and diff.
            try reportingErrors(status: 2) {
                let diff = try BundleDiff.compare(old: old, new: new)
                differs = !diff.isEmpty
                if json {
                    try printJSON(diff)
                    return
                }
                func size(_ n: UInt64?) -> String { n.map { formatBytes($0) } ?? "-" }
                for item in diff.added { print("+ \(item.url)  \(size(item.newSize))") }
                for item in diff.removed { print("- \(item.url)  \(size(item.oldSize))") }
                for item in diff.changed {
                    print(terminalSafe("~ \(item.url)  \(size(item.oldSize)) -> \(size(item.newSize))  (\(item.changes.joined(separator: ", ")))"))
                    for line in item.details ?? [] { print(terminalSafe("    " + line)) }
                }
                print("\(diff.added.count) added, \(diff.removed.count) removed, \(diff.changed.count) changed, \(diff.unchanged) unchanged")
            }
            if differs { throw ExitCode(1) }
        }
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell reads specially, else in single quotes.
func shellQuoted(_ text: String) -> String {
    let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "-_./:=@%+,".unicodeScalars.contains($0) }
    return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
