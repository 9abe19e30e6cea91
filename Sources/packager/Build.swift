import ArgumentParser
import CMalloc
import Foundation
import NIOConcurrencyHelpers
import OfflineBundle
import PackagerKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension Packager {
    struct Build: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "build",
            abstract: "Crawl the URLs a declaration names (or --seed URLs) into a bundle.",
            discussion: """
                With a declaration: packager build packager.yml
                Without one, like wget -r -p: packager build --seed https://docs.example.com/ -o docs.bundle.zip

                Exit status: 0 when every declared URL was fetched and failures stayed within \
                --max-errors; 1 when not (no bundle is written, a previous one is kept); 2 when the \
                declaration or the arguments are wrong.

                A build that is interrupted (killed, a power cut, a full disk, Ctrl-C) or fails keeps what it \
                fetched in .OUTPUT.packager-journal beside the output; the next build of the same declaration \
                resumes from it, fetching only the rest, and a build that writes its bundle removes it. \
                --fresh starts over.
                """
        )

        @Argument(help: "The declaration file (default: packager.yml, unless --seed or --url is given).")
        var declaration: String?

        @Option(name: .customLong("seed"), help: "A page to crawl from (repeatable); crawls without a declaration.")
        var seeds: [String] = []

        @Option(name: .customLong("url"), help: "A URL to fetch as it is, without following links (repeatable).")
        var urls: [String] = []

        @Option(name: [.short, .customLong("output")], help: "Where to write the bundle (overrides the declaration's output).")
        var output: String?

        @Option(help: "Requests in flight at once (overrides the declaration).")
        var concurrency: Int?

        @Option(name: .customLong("per-host"), help: "Requests in flight at once per host (overrides the declaration).")
        var perHost: Int?

        @Option(name: .customLong("max-depth"), help: "Links followed from a seed (page requisites do not count).")
        var maxDepth: Int?

        @Option(name: .customLong("max-errors"), help: "Failures of discovered URLs allowed before the build fails.")
        var maxErrors: Int?

        @Option(
            name: .customLong("include"),
            help: "Follow only links whose URL matches this pattern ('*' matches any run of characters; repeatable; as scope.include).")
        var include: [String] = []

        @Option(name: .customLong("exclude"), help: "Do not fetch URLs matching this pattern (repeatable; as scope.exclude).")
        var exclude: [String] = []

        @Flag(name: .customLong("no-parent"), help: "Follow only links below the folder of a seed, like wget -np (as scope.no-parent).")
        var noParent = false

        @Option(
            name: .customLong("ca-file"),
            help: "A PEM file of certificate authorities to trust beside the system's, for HTTPS servers with a private CA (repeatable; as tls.ca-file).")
        var caFiles: [String] = []

        @Flag(name: .customLong("insecure"), help: "Do not check HTTPS certificates at all (a throwaway staging server; never with --sign-key).")
        var insecure = false

        @Flag(name: .customLong("no-robots"), help: "Do not obey robots.txt.")
        var noRobots = false

        @Flag(
            name: .customLong("browser"),
            help:
                "Also load each page in headless Chromium and crawl what its scripts load (as the declaration's browser: section; needs chromium-headless-shell)."
        )
        var browser = false

        @Flag(help: "Print the report as JSON on standard output instead of text.")
        var json = false

        @Option(name: .customLong("sign-key"), help: "Sign the bundle with this Ed25519 private key file (default: $PACKAGER_SIGN_KEY, base64).")
        var signKey: String?

        @Option(name: .customLong("compression-level"), help: "Deflate level for text bodies, 1 (fast) to 12 (small); 6 writes zip's size in half its time.")
        var compressionLevel: Int = Builder.defaultCompressionLevel

        @Flag(
            name: .customLong("fresh"),
            help: "Start over: discard what an interrupted build of this output kept (a build otherwise resumes from it).")
        var fresh = false

        @Flag(
            name: .customLong("stored-index"),
            help: "Store index.bin as it is rather than deflated: a larger bundle that mounts faster (100,000 files: 9 MB more, 20 ms less).")
        var storedIndex = false

        @OptionGroup var level: OutputLevel

        func validate() throws {
            guard (1...12).contains(compressionLevel) else { throw ValidationError("--compression-level must be 1 to 12") }
            if let concurrency, !(1...Declaration.maxConcurrency).contains(concurrency) {
                throw ValidationError("--concurrency must be 1 to \(Declaration.maxConcurrency)")
            }
            if let perHost, !(1...Declaration.maxConcurrency).contains(perHost) {
                throw ValidationError("--per-host must be 1 to \(Declaration.maxConcurrency)")
            }
            if let maxDepth, maxDepth < 0 { throw ValidationError("--max-depth cannot be negative") }
            if let maxErrors, maxErrors < 0 { throw ValidationError("--max-errors cannot be negative") }
            if declaration != nil && !(seeds.isEmpty && urls.isEmpty) {
                throw ValidationError("give a declaration file or --seed/--url, not both")
            }
            if declaration == nil && !(seeds.isEmpty && urls.isEmpty) && output == nil {
                throw ValidationError("--seed and --url need -o PATH for the bundle")
            }
        }

        func run() async throws {
            // A crawl allocates and frees a body per response on several threads (CMalloc/shim.h; docs/BENCHMARKS.md).
            packager_tune_allocator_for_bodies()
            try await reportingErrorsAsync {
                var declared = try loadDeclaration()
                for warning in declared.warnings { FileHandle.standardError.write(Data(("packager: warning: " + terminalSafe(warning) + "\n").utf8)) }
                if let concurrency {
                    declared.concurrency.total = concurrency
                    if perHost == nil { declared.concurrency.perHost = min(declared.concurrency.perHost, concurrency) }
                }
                if let perHost { declared.concurrency.perHost = perHost }
                if let maxDepth { declared.scope.maxDepth = maxDepth }
                if noRobots { declared.respectRobots = false }
                if browser { declared.browser.enabled = true }
                declared.scope.include += include
                declared.scope.exclude += exclude
                if noParent { declared.scope.noParent = true }
                for path in caFiles {
                    if let problem = TLSSettings.problem(withCAFile: path) { throw PackagerError(.invalidInput, "--ca-file: \(problem)") }
                    declared.tls.caFiles.append(URL(fileURLWithPath: path).standardizedFileURL.path)
                }
                if insecure { declared.tls.insecure = true }
                if declared.tls.insecure {
                    FileHandle.standardError.write(
                        Data("packager: warning: HTTPS certificates are not checked (tls.insecure): anyone on the path can change what is fetched\n".utf8))
                }

                let key = try SigningKeys.privateKey(file: signKey, environment: "PACKAGER_SIGN_KEY")
                var options = Builder.Options(output: output, maxErrors: maxErrors, signingKey: key, compressionLevel: compressionLevel)
                options.storesIndex = storedIndex
                options.resume = fresh ? .fresh : .resume
                let builder = Builder(declaration: declared, options: options)
                // The path the build writes (-o is resolved as the declaration's own paths are), not -o as typed.
                let inputs: [(path: String?, what: String)] = [
                    (seeds.isEmpty && urls.isEmpty ? declaration ?? "packager.yml" : nil, "the declaration"), (signKey, "the signing key"),
                ]
                if let conflict = outputConflict(builder.outputPath, over: inputs) { throw PackagerError(.invalidInput, conflict) }
                let display = ProgressDisplay(enabled: !json && !level.quiet)
                let report = try await builder.run(
                    progress: { display.update($0) },
                    notice: { notice in
                        display.finish()
                        FileHandle.standardError.write(Data(("packager: " + terminalSafe(Self.describe(notice)) + "\n").utf8))
                    })
                display.finish()
                if json {
                    try printJSON(report)
                } else {
                    printSummary(report, output: builder.outputPath ?? "")
                }
                if !report.succeeded { throw ExitCode(1) }
            }
        }

        func loadDeclaration() throws -> Declaration {
            if declaration == nil && !(seeds.isEmpty && urls.isEmpty) {
                var quick = Declaration()
                for url in seeds + urls {
                    guard HTTPRules.isFetchableURL(url) else {
                        throw PackagerError(.invalidInput, "'\(url)' is not an absolute http or https URL")
                    }
                }
                quick.seeds = seeds
                quick.urls = urls
                return quick
            }
            let path = declaration ?? "packager.yml"
            guard FileManager.default.fileExists(atPath: path) else {
                throw PackagerError(
                    .invalidInput,
                    declaration == nil
                        ? "no packager.yml in this folder: give a declaration file, or --seed URL -o PATH (packager init writes a starter)"
                        : "cannot open \(path): no such file or directory")
            }
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
                throw PackagerError(.invalidInput, "\(path) is a folder, not a declaration file (packager build FOLDER/packager.yml)")
            }
            return try DeclarationParser().parse(contentsOf: path)
        }

        /// The skipped links, grouped for a person: links to other origins as one count of links and origins, redirects
        /// out of scope as one, then the other reasons (at most ten lines unless `all`; `--json` lists every reason and
        /// origin).
        static func skippedLines(_ skipped: [String: Int], all: Bool = false) -> [String] {
            var origins = 0
            var offsite = 0
            var redirects = 0
            var rest: [(String, Int)] = []
            for (reason, count) in skipped {
                if reason.hasPrefix("origin ") && reason.hasSuffix(" is not in scope") {
                    origins += 1
                    offsite += count
                } else if reason.hasPrefix("redirect target ") {
                    redirects += count
                } else {
                    rest.append((reason, count))
                }
            }
            var lines: [String] = []
            if offsite > 0 {
                lines.append("  skipped \(offsite): links to \(origins) other origin\(origins == 1 ? "" : "s"), not in scope (--json lists them)")
            }
            if redirects > 0 { lines.append("  skipped \(redirects): redirects to URLs out of scope (--json lists them)") }
            rest.sort { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
            let listed = all ? rest.count : 10
            for (reason, count) in rest.prefix(listed) { lines.append("  skipped \(count): \(terminalSafe(reason))") }
            if rest.count > listed {
                lines.append("  skipped \(rest.dropFirst(10).map(\.1).reduce(0, +)) more, for \(rest.count - 10) other reasons (--json lists them)")
            }
            return lines
        }

        /// A journal notice in words.
        static func describe(_ notice: Builder.Notice) -> String {
            func name(_ path: String) -> String { (path as NSString).lastPathComponent }
            switch notice {
            case .resuming(let responses, let bytes, let dropped):
                return "resuming: \(responses) responses the interrupted build fetched are kept (\(formatBytes(UInt64(bytes)))), not fetched again"
                    + (dropped ? "; the record it was writing when it stopped was dropped" : "")
            case .ignored(let journal, let reason):
                return "starting over: the journal \(name(journal)) was not resumed from: \(reason)"
            case .freshStart(let journal):
                return "starting over (--fresh): discarded what \(name(journal)) kept"
            case .inUse(let journal):
                return "another build of this output holds \(name(journal)): this build keeps no journal, and cannot be resumed"
            case .stopped(let reason):
                return "the journal stopped: \(reason)"
            case .kept(let journal, let responses, let bytes):
                return
                    "\(name(journal)) keeps the \(responses) responses fetched (\(formatBytes(UInt64(bytes)))): the next build resumes from them (--fresh starts over)"
            }
        }

        func printSummary(_ report: BuildReport, output: String) {
            let style = TerminalStyle(fd: STDOUT_FILENO)
            var lines: [String] = []
            if report.succeeded, let written = report.output {
                lines.append(style.green("built") + " \(written): \(report.entries) entries, \(report.bodies) bodies, \(formatBytes(report.fileSize))")
            } else {
                lines.append(
                    style.red("build failed") + ": no bundle written"
                        + (FileManager.default.fileExists(atPath: output) ? "; the previous \(output) is unchanged" : ""))
            }
            if !level.quiet { lines += details(report, style: style) }
            if !report.failures.isEmpty {
                lines.append("failures:")
                // Failures with the same reason (a closed port, a host that does not resolve) are one group.
                let groups = GroupedListing.groups(report.failures) { "\($0.declared) \(GroupedListing.groupKey($0.reason))" }
                for group in groups {
                    let first = group.items[0]
                    let label = style.red(first.declared ? "declared" : "failed")
                    func linked(_ failure: BuildReport.Failure) -> String { failure.referrer.map { ", linked from \(terminalSafe($0))" } ?? "" }
                    if group.items.count == 1 {
                        let attempts = first.attempts > 1 ? " (after \(first.attempts) attempts)" : ""
                        lines.append("  \(label) \(terminalSafe(first.url)): \(terminalSafe(first.reason))\(attempts)\(linked(first))")
                        continue
                    }
                    let reason = GroupedListing.groupReason(group.items.lazy.map(\.reason))
                    lines.append("  \(label) these \(group.items.count): \(terminalSafe(reason))")
                    let (shown, more) = GroupedListing.shown(group.items, all: level.verbose)
                    for failure in shown { lines.append("    \(terminalSafe(failure.url))\(linked(failure))") }
                    if more > 0 { lines.append(GroupedListing.moreLine(more, indent: "    ")) }
                }
            }
            print(lines.joined(separator: "\n"))
        }

        /// What the summary says below its first line, unless --quiet: counts, the digest and key, what was skipped,
        /// the limits reached, the browser's problems.
        func details(_ report: BuildReport, style: TerminalStyle) -> [String] {
            var lines: [String] = []
            lines.append(
                "  fetched \(report.fetched) (\(formatBytes(UInt64(report.bytesFetched)))\(overProtocols(report.protocols))), blocked \(report.blocked), substituted \(report.substituted), "
                    + "failed \(report.failures.count), in \(String(format: "%.1f", report.seconds)) s")
            if report.resumed > 0 {
                lines.append("  resumed \(report.resumed) from the interrupted build (\(formatBytes(UInt64(report.bytesResumed))) not fetched again)")
            }
            if let digest = report.digest { lines.append("  digest sha256:\(digest)") }
            if let key = report.signedBy { lines.append("  signed by \(key) (the key of the .pub that checks it)") }
            lines += Self.skippedLines(report.skipped, all: level.verbose)
            for limit in report.limitsReached { lines.append("  " + style.yellow("limit") + ": \(limit)") }
            for sweep in report.searchSweeps {
                let outcome =
                    switch sweep.stoppedAt {
                    case "a"?: "typing a loaded nothing: not a search in pieces"
                    case "z"?: "typing z loaded nothing new: not a search in pieces"
                    case let other?: "stopped at \(other)"
                    case nil: "\(sweep.loaded) of \(sweep.typed) leading characters loaded something"
                    }
                lines.append(terminalSafe("  search box swept on \(sweep.page): \(outcome)"))
            }
            if !report.browserProblems.isEmpty {
                lines.append("pages the browser could not render in full (crawled all the same):")
                for problem in report.browserProblems { lines.append(terminalSafe("  " + style.yellow("browser") + " \(problem.page): \(problem.reason)")) }
            }
            return lines
        }
    }
}

/// Colours for a terminal, off when the stream is not one or NO_COLOR is set.
struct TerminalStyle {
    let enabled: Bool

    init(fd: Int32) {
        let environment = ProcessInfo.processInfo.environment
        enabled = isatty(fd) == 1 && environment["NO_COLOR"].map(\.isEmpty) ?? true && environment["TERM"] != "dumb"
    }

    func red(_ s: String) -> String { paint(s, "31") }
    func green(_ s: String) -> String { paint(s, "32") }
    func yellow(_ s: String) -> String { paint(s, "33") }
    private func paint(_ s: String, _ code: String) -> String { enabled ? "\u{1B}[\(code)m\(s)\u{1B}[0m" : s }
}

/// The live progress line on a terminal; in CI, a plain line every ten seconds.
final class ProgressDisplay: Sendable {
    private struct State {
        var last = Date()
        var shown = false
    }

    private let state = NIOLockedValueBox(State())
    private let live: Bool
    private let enabled: Bool

    init(enabled: Bool) {
        self.enabled = enabled
        live = isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    func update(_ p: CrawlProgress) {
        guard enabled else { return }
        let live = self.live
        state.withLockedValue { state in
            let now = Date()
            guard now.timeIntervalSince(state.last) >= (live ? 0.1 : 10) else { return }
            state.last = now
            let rate = p.elapsed > 0 ? Double(p.bytes) / p.elapsed : 0
            let text = "done \(p.done)  queued \(p.queued)  failed \(p.failed)  \(formatBytes(UInt64(p.bytes)))  \(formatBytes(UInt64(rate)))/s"
            if live {
                FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
                state.shown = true
            } else {
                FileHandle.standardError.write(Data(("progress: " + text + "\n").utf8))
            }
        }
    }

    func finish() {
        state.withLockedValue { if $0.shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) } }
    }
}

/// ` over HTTP/2` (or `, 40 over HTTP/2 and 3 over HTTP/1.1`) for the summary line: what the crawl spoke.
private func overProtocols(_ protocols: [String: Int]) -> String {
    guard let only = protocols.first else { return "" }
    if protocols.count == 1 { return " over " + only.key }
    return ", " + protocols.sorted { $0.key > $1.key }.map { "\($0.value) over \($0.key)" }.joined(separator: " and ")
}
