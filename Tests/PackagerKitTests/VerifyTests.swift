import Crypto
import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

@Suite("packager verify against a server whose content changed")
struct VerifyTests {
    /// A bundle recorded from `origin`, then the origin's content changed under it.
    func scenario(_ origin: Origin, folder: TemporaryFolder) throws -> String {
        let html = "text/html"
        origin.set("/same.html", .text("<p>same</p>", type: html, headers: [("ETag", "\"s1\"")]))
        origin.set("/dated.html", .text("<p>dated</p>", type: html, headers: [("Last-Modified", "Sat, 21 Nov 2026 10:00:00 GMT")]))
        origin.set("/edited.html", .text("<p>edited, new</p>", type: html, headers: [("ETag", "\"e2\"")]))
        origin.set("/redirect", .redirect("/elsewhere.html"))
        origin.set("/now-redirects.html", .redirect("/new-home.html"))
        var noHead = Origin.Resource.text("plain text body", type: "text/plain")
        noHead.allowsHEAD = false
        origin.set("/no-head.txt", noHead)
        origin.set("/no-validators.txt", .text("0123456789", type: "text/plain"))
        var busy = Origin.Resource.text("{}", type: "application/json", headers: [("ETag", "\"b1\"")])
        busy.failures = 1
        busy.failureStatus = 429
        busy.retryAfter = "1"
        origin.set("/busy.json", busy)

        var writer = BundleWriter()
        let base = origin.base
        writer.add(.init(url: base + "/same.html", headers: [("content-type", html), ("etag", "\"s1\"")], body: .data(Data("<p>same</p>".utf8))))
        writer.add(
            .init(
                url: base + "/dated.html", headers: [("content-type", html), ("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT")],
                body: .data(Data("<p>dated</p>".utf8))))
        writer.add(.init(url: base + "/edited.html", headers: [("content-type", html), ("etag", "\"e1\"")], body: .data(Data("<p>edited</p>".utf8))))
        writer.add(.init(url: base + "/deleted.html", headers: [("content-type", html), ("etag", "\"d1\"")], body: .data(Data("<p>gone</p>".utf8))))
        writer.add(.init(url: base + "/redirect", status: 301, headers: [("location", "/target.html")]))
        writer.add(.init(url: base + "/now-redirects.html", headers: [("content-type", html), ("etag", "\"n1\"")], body: .data(Data("<p>n</p>".utf8))))
        writer.add(.init(url: base + "/no-head.txt", headers: [("content-type", "text/plain")], body: .data(Data("plain text body".utf8))))
        writer.add(.init(url: base + "/no-validators.txt", headers: [("content-type", "text/plain")], body: .data(Data("abcdefghij".utf8))))
        writer.add(.init(url: base + "/busy.json", headers: [("content-type", "application/json"), ("etag", "\"b1\"")], body: .data(Data("{}".utf8))))
        writer.add(.init(url: "http://127.0.0.1:9/down.html", headers: [("content-type", html), ("etag", "\"x\"")], body: .data(Data("x".utf8))))
        writer.add(.init(url: base + "/logo.svg", kind: .substituted, headers: [("content-type", "image/svg+xml")], body: .data(Data("<svg/>".utf8))))
        writer.add(.init(url: base + "/ads.js", status: 204, kind: .blocked))
        try writer.write(to: folder.path + "/b.zip")
        return folder.path + "/b.zip"
    }

    func options() -> Verifier.Options {
        var options = Verifier.Options()
        options.allowPrivateAddresses = true
        options.retries.attempts = 2
        options.retries.backoff = 0.05
        // The origin runs in this test process: in the full parallel run this suite's first test took 124 to 149 s
        // (1.3 s alone), once a request timed out into "unreachable", and once a connection to it took past 0.5 s
        // (the refresh left an entry unchecked). Timeouts are not what these tests check (the one that does sets its
        // own); the down host's port refuses at once, so nothing waits for these.
        options.timeouts.connect = 10
        options.timeouts.request = 600
        return options
    }

    @Test("each change gets its verdict; bodies without the origin's validators are compared by SHA-256, none with --shallow")
    func verdicts() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let bundle = try scenario(origin, folder: folder)
            let report = try await Verifier(options: options()).verify(bundleAt: bundle)
            let verdicts = Dictionary(uniqueKeysWithValues: report.entries.map { ($0.url.replacingOccurrences(of: origin.base, with: ""), $0.verdict) })
            #expect(verdicts["/same.html"] == .fresh)
            #expect(verdicts["/dated.html"] == .fresh)
            #expect(verdicts["/edited.html"] == .stale)
            #expect(verdicts["/deleted.html"] == .gone)
            #expect(verdicts["/redirect"] == .moved)
            #expect(verdicts["/now-redirects.html"] == .moved)
            #expect(verdicts["/no-head.txt"] == .fresh)
            #expect(verdicts["/no-validators.txt"] == .stale)
            #expect(report.entries.first { $0.url.hasSuffix("/no-validators.txt") }?.changes.first?.field == "sha256")
            #expect(verdicts["/busy.json"] == .fresh)
            #expect(verdicts["http://127.0.0.1:9/down.html"] == .unreachable)
            #expect(verdicts["/logo.svg"] == .substituted && verdicts["/ads.js"] == .blocked)
            let edited = try #require(report.entries.first { $0.url.hasSuffix("/edited.html") })
            #expect(edited.changes.contains(Change("etag", recorded: "\"e1\"", live: "\"e2\"")))
            let moved = try #require(report.entries.first { $0.url.hasSuffix("/redirect") })
            #expect(moved.changes == [Change("location", recorded: origin.base + "/target.html", live: origin.base + "/elsewhere.html")])
            // The server that refuses HEAD was asked with GET; the 429 was retried after Retry-After.
            #expect(origin.count("/busy.json") == 2)
            #expect(origin.count("/logo.svg") == 0 && origin.count("/ads.js") == 0)
            #expect(report.exitCode == 2)
            #expect(report.entries.first { $0.url.hasSuffix("/edited.html") }?.advice == "packager refresh BUNDLE re-fetches it")

            // --shallow reads no body: entries without the origin's validators (of the same length) are unverifiable.
            var shallow = options()
            shallow.shallow = true
            let shallowReport = try await Verifier(options: shallow).verify(bundleAt: bundle)
            let shallowVerdicts = Dictionary(
                uniqueKeysWithValues: shallowReport.entries.map { ($0.url.replacingOccurrences(of: origin.base, with: ""), $0.verdict) })
            #expect(shallowVerdicts["/no-head.txt"] == .unverifiable && shallowVerdicts["/no-validators.txt"] == .unverifiable)
            #expect(
                shallowVerdicts["/edited.html"] == .stale && shallowVerdicts["/same.html"] == .fresh,
                "\(shallowReport.entries.map { "\($0.url) \($0.verdict) \($0.summary)" })")
            #expect(origin.requests.contains { $0.path == "/no-head.txt" && $0.method == "GET" })
            #expect(shallowReport.entries.first { $0.url.hasSuffix("/no-head.txt") }?.advice == "run verify without --shallow to compare bodies")
        }
    }

    @Test("exit codes as documented, and a JUnit file that counts the failures")
    func exitCodesAndJUnit() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let bundle = try scenario(origin, folder: folder)
            // Generous request timeouts: the origin runs in the test process, which shares two cores with every other test.
            let args = ["verify", bundle, "--allow-private-addresses", "--retries", "1", "--timeout", "30", "--connect-timeout", "0.5"]
            var result = try await run(packagerExecutable, args + ["--format", "junit", "--output", folder.path + "/verify.xml"])
            #expect(result.status == 2, "\(result.output)")
            #expect(result.output.contains("12 entries: 4 fresh, 2 stale, 1 gone, 2 moved, 1 unreachable, 1 substituted, 1 blocked"))
            let python = """
                import sys, xml.etree.ElementTree as ET
                root = ET.parse(sys.argv[1]).getroot()
                cases = root.findall('.//testcase')
                print(root.get('tests'), root.get('failures'), len(cases), len(root.findall('.//failure')), len(root.findall('.//skipped')))
                """
            let counts = try await run("python3", ["-c", python, folder.path + "/verify.xml"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(counts == "12 6 12 6 2")
            result = try await run(packagerExecutable, args + ["--fail-on", "stale,gone,moved"])
            #expect(result.status == 1)
            #expect(result.output.contains("stale") && result.output.contains("etag \"e1\" -> \"e2\""))
            // The advised command runs as printed: with the options this check needed to reach the origin.
            let advised = try #require(result.output.firstMatch(of: /packager refresh (.*?) re-fetches it/).map { String($0.1) }, "\(result.output)")
            #expect(advised.contains("--allow-private-addresses"), "\(advised)")
            let refreshed = try await run(
                "sh", ["-c", "\(packagerExecutable) refresh \(advised) -o refreshed.zip --retries 0 --connect-timeout 0.5"], in: folder.path)
            #expect(refreshed.status != 2 && FileManager.default.fileExists(atPath: folder.path + "/refreshed.zip"), "\(refreshed.output)")
            result = try await run(packagerExecutable, args + ["--fail-on", "gone"])
            #expect(result.status == 1)
            result = try await run(packagerExecutable, args + ["--fail-on", "blocked,"])
            #expect(result.status == 1)
            result = try await run(packagerExecutable, args + ["--fail-on", "substituted", "--format", "json"])
            #expect(result.status == 1 && result.output.contains("\"verdict\" : \"substituted\""))
            result = try await run(packagerExecutable, args + ["--fail-on", "nonsense"])
            #expect(result.status == 2)
            // Usage errors and a check that cannot be made exit 2, never 1 (which means stale), and never crash.
            for bad in [
                ["--fail-on", ""], ["--timeout", "nan"], ["--timeout", "inf"], ["--connect-timeout", "1e300"], ["--rate", "nan"], ["--max-body", "0"],
            ] {
                let refused = try await run(packagerExecutable, args + bad)
                #expect(refused.status == 2, "\(bad): \(refused.output)")
            }
            try folder.file("junk.zip", "not a bundle")
            #expect(try await run(packagerExecutable, ["verify", folder.path + "/junk.zip"]).status == 2)
            #expect(try await run(packagerExecutable, ["verify", bundle, "-o", "/nonexistent/folder/r.json"]).status == 2)
            // refresh: the down host's entry could not be checked, so the refresh is incomplete (2), and says which.
            let refresh = try await run(
                packagerExecutable,
                ["refresh", bundle, "--allow-private-addresses", "-o", folder.path + "/r.zip", "--retries", "0", "--connect-timeout", "0.5"])
            #expect(refresh.status == 1 && refresh.output.contains("could not check http://127.0.0.1:9/down.html"), "\(refresh.output)")
            for format in ["markdown", "html"] {
                result = try await run(packagerExecutable, args + ["--format", format, "-o", folder.path + "/report.\(format)"])
                let text = try String(contentsOfFile: folder.path + "/report.\(format)", encoding: .utf8)
                #expect(text.contains("/edited.html") && text.contains("stale"))
            }
            let html = try String(contentsOfFile: folder.path + "/report.html", encoding: .utf8)
            #expect(html.contains("Verdicts by host") && html.contains("class=\"bar stale\""))
        }
    }

    @Test("refresh re-fetches only what changed; diff shows it; everything else is byte-identical")
    func refreshAndDiff() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let bundle = try scenario(origin, folder: folder)
            let summary = try await Refresher(options: options()).refresh(bundleAt: bundle, output: folder.path + "/new.zip")
            #expect(
                Set(summary.refreshed.map { $0.url.replacingOccurrences(of: origin.base, with: "") }) == [
                    "/edited.html", "/deleted.html", "/redirect", "/now-redirects.html", "/no-validators.txt",
                ])
            let old = try MountedBundle(path: bundle)
            let new = try MountedBundle(path: folder.path + "/new.zip")
            for entry in old.entries {
                let after = try #require(new.entry(forKey: entry.key))
                if summary.refreshed.contains(where: { $0.url == entry.key }) { continue }
                #expect(after.status == entry.status && after.kind == entry.kind && after.body?.sha256 == entry.body?.sha256)
                #expect(after.headers.map { "\($0.name): \($0.value)" } == entry.headers.map { "\($0.name): \($0.value)" })
            }
            #expect(try new.body(of: #require(new.entry(forKey: origin.base + "/edited.html"))) == Data("<p>edited, new</p>".utf8))
            #expect(new.entry(forKey: origin.base + "/deleted.html")?.status == 404)

            let diff = try BundleDiff.compare(old: bundle, new: folder.path + "/new.zip")
            #expect(diff.added.isEmpty && diff.removed.isEmpty)
            #expect(
                Set(diff.changed.map { $0.url.replacingOccurrences(of: origin.base, with: "") }) == [
                    "/edited.html", "/deleted.html", "/redirect", "/now-redirects.html", "/no-validators.txt",
                ])
            #expect(diff.unchanged == 7)
            let cli = try await run(packagerExecutable, ["diff", bundle, folder.path + "/new.zip"])
            #expect(cli.status == 1 && cli.output.contains("0 added, 0 removed, 5 changed, 7 unchanged"))
            #expect(try await run(packagerExecutable, ["diff", bundle, bundle]).status == 0)
            // A bundle that cannot be read is not a difference: 2, as cmp and diff say trouble.
            let missing = try await run(packagerExecutable, ["diff", bundle, folder.path + "/nope.zip"])
            #expect(missing.status == 2 && missing.output.contains("nope.zip"), "\(missing.status): \(missing.output)")
            // A changed page whose body is damaged: the comparison cannot be made (2), it is not a difference (1).
            let damaged = folder.path + "/damaged.zip"
            try FileManager.default.copyItem(atPath: folder.path + "/new.zip", toPath: damaged)
            try flipByte(at: try #require(try offset(of: Data("<p>edited, new</p>".utf8), in: damaged)) + 3, in: damaged)
            let broken = try await run(packagerExecutable, ["diff", bundle, damaged])
            #expect(broken.status == 2 && broken.output.contains("damaged"), "\(broken.status): \(broken.output)")

            // Nothing left to refresh (the origin answers as the new bundle recorded, but for the down host): nothing is written.
            let before = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/new.zip"))
            var quiet = options()
            quiet.retries.attempts = 0
            let again = try await Refresher(options: quiet).refresh(bundleAt: folder.path + "/new.zip", output: folder.path + "/new.zip")
            #expect(
                again.write == nil && again.refreshed.isEmpty && again.unchecked.map(\.url) == ["http://127.0.0.1:9/down.html"],
                "\(again.unchecked.map { "\($0.url): \($0.reason)" })")
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/new.zip")) == before)
            // Nothing to refresh, another output asked for: a copy, byte for byte, written as every output is (nothing
            // left beside it).
            try FileManager.default.createDirectory(atPath: folder.path + "/copy", withIntermediateDirectories: true)
            let copied = try await Refresher(options: quiet).refresh(bundleAt: folder.path + "/new.zip", output: folder.path + "/copy/same.zip")
            #expect(copied.write == nil)
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/copy/same.zip")) == before)
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/copy") == ["same.zip"])
        }
    }

    @Test("a host that refuses connections is not asked again for each of its entries")
    func downHostNotReprobed() async throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        for i in 0..<20 {
            writer.add(
                .init(url: "http://127.0.0.1:9/p\(i).html", headers: [("content-type", "text/html"), ("etag", "\"\(i)\"")], body: .data(Data("\(i)".utf8))))
        }
        try writer.write(to: folder.path + "/down.zip")
        var options = Verifier.Options()
        options.allowPrivateAddresses = true
        options.concurrency = 2
        options.perHost = 2
        options.retries.attempts = 0
        options.timeouts.connect = 0.3
        let report = try await Verifier(options: options).verify(bundleAt: folder.path + "/down.zip")
        #expect(report.entries.allSatisfy { $0.verdict == .unreachable })
        let tried = report.entries.filter { $0.attempts > 0 }
        let skipped = report.entries.filter { $0.error?.hasPrefix("not tried: http://127.0.0.1:9 could not be reached") == true }
        #expect(tried.count <= 2 && tried.count + skipped.count == 20, "\(report.entries.map { $0.error ?? "-" })")
        #expect(skipped.allSatisfy { $0.method == "not probed" && $0.attempts == 0 })
        #expect(report.exitCode == 2)
        // For a person: the entries that found the host down and those not tried after are one group with one advice.
        #expect(report.entries.allSatisfy { $0.advice == report.entries[0].advice && $0.advice != nil }, "\(report.entries.map(\.advice))")
        let args = [folder.path + "/down.zip", "--allow-private-addresses", "--retries", "0", "--connect-timeout", "0.3", "--concurrency", "2"]
        let verify = try await run(packagerExecutable, ["verify"] + args)
        let lines = verify.output.split(separator: "\n").map(String.init)
        #expect(verify.status == 2 && lines.count <= 9, "\(verify.output)")
        #expect(lines.contains("             these 20: http://127.0.0.1:9 could not be reached (cannot connect: connection refused)"), "\(verify.output)")
        #expect(lines.contains("             ... and 17 more (--verbose lists them)"), "\(verify.output)")
        let verbose = try await run(packagerExecutable, ["verify", "--verbose"] + args)
        #expect(verbose.output.split(separator: "\n").filter { $0.hasPrefix("unreachable") }.count == 20, "\(verbose.output)")
        let quiet = try await run(packagerExecutable, ["verify", "-q"] + args)
        #expect(quiet.status == 2 && quiet.output.split(separator: "\n").count == 1, "\(quiet.output)")
        #expect(quiet.output.hasPrefix("20 entries: 20 unreachable"), "\(quiet.output)")
        let refresh = try await run(packagerExecutable, ["refresh", "-o", folder.path + "/r.zip"] + args)
        #expect(refresh.status == 1 && refresh.output.contains("  could not check these 20: http://127.0.0.1:9 could not be reached"), "\(refresh.output)")
        #expect(refresh.output.contains("    ... and 17 more (--verbose lists them)") && refresh.output.split(separator: "\n").count <= 7, "\(refresh.output)")
        let both = try await run(packagerExecutable, ["verify", "-q", "-v"] + args)
        #expect(both.status == 2 && both.output.contains("--quiet and --verbose cannot both be given"), "\(both.output)")
    }

    @Test("the JSON report written by hand is what JSONEncoder made of it, key for key; JSON and JUnit files are the rendered bytes")
    func handWrittenJSONReport() throws {
        var rng = SystemRandomNumberGenerator()
        let odd = ["plain", "quote \" and \\ back", "slash / and tab \t", "control \u{01}\u{1F}", "é ü 漢字 🙂", "", "line\nbreak\r"]
        func text() -> String { odd.randomElement(using: &rng)! + String(Int.random(in: 0..<1000, using: &rng)) }
        var entries: [EntryVerification] = []
        for i in 0..<500 {
            let changes = (0..<Int.random(in: 0...2, using: &rng)).map { _ in
                Change(text(), recorded: Bool.random(using: &rng) ? text() : nil, live: Bool.random(using: &rng) ? text() : nil)
            }
            var entry = EntryVerification(
                url: "https://h\(i % 7).example/\(text())", verdict: Verdict.allCases.randomElement(using: &rng)!, recordedStatus: 200,
                liveStatus: Bool.random(using: &rng) ? Int.random(in: 100...599, using: &rng) : nil, method: text(), changes: changes,
                error: Bool.random(using: &rng) ? text() : nil, attempts: Int.random(in: 0...4, using: &rng))
            entry.notes = i % 3 == 0 ? [Change("new resources", recorded: nil, live: text())] : []
            entry.advice = i % 2 == 0 ? text() : nil
            entries.append(entry)
        }
        let folder = try TemporaryFolder()
        for report in [
            VerifyReport(bundle: "b \"1\".zip", checkedAt: Date(), seconds: 12.345678, entries: entries, failOn: Verdict.failingByDefault),
            VerifyReport(bundle: "empty.zip", checkedAt: Date(), seconds: 0, entries: [], failOn: []),
        ] {
            let written = try ReportFormatter.render(report, as: .json)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let mine = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? NSDictionary
            let theirs = try JSONSerialization.jsonObject(with: encoder.encode(report)) as? NSDictionary
            #expect(mine != nil && mine == theirs)
            let back = try JSONDecoder().decode(VerifyReport.self, from: Data(written.utf8))
            #expect(back.entries == report.entries && back.counts == report.counts && back.failOn == report.failOn && back.bundle == report.bundle)
            for format in [ReportFormatter.Format.json, .junit] {
                try ReportFormatter.write(report, as: format, to: folder.path + "/r")
                #expect(try String(contentsOfFile: folder.path + "/r", encoding: .utf8) == ReportFormatter.render(report, as: format))
            }
        }
    }

    @Test("the text report shows control bytes from a stored or live value, never sends them to the terminal")
    func textReportIsTerminalSafe() throws {
        let entry = EntryVerification(
            url: "http://127.0.0.1:8080/page", verdict: .stale, recordedStatus: 200, liveStatus: 200, method: "GET",
            changes: [Change("content-type", recorded: "\u{1B}]2;PWNED\u{07}\u{1B}[31mRED", live: "text/html")], error: nil, attempts: 1)
        let report = VerifyReport(bundle: "b.zip", checkedAt: Date(), seconds: 1, entries: [entry], failOn: Verdict.failingByDefault)
        let text = try ReportFormatter.render(report, as: .text)
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(text.debugDescription)")
        #expect(text.contains("\\u{1b}]2;PWNED"))
    }

    @Test("the text report explains once the entries with the same verdict and reason (a whole origin not asked), and shortens a long group")
    func textReportGroupsRepeatedReasons() throws {
        func refused(_ path: String) -> EntryVerification {
            var entry = EntryVerification(
                url: "http://127.0.0.1:8480" + path, verdict: .unreachable, recordedStatus: 200, liveStatus: nil, method: EntryVerification.notProbed,
                changes: [], error: "not asked: 127.0.0.1 is a loopback address", attempts: 0)
            entry.advice = "name the origin"
            return entry
        }
        let stale = EntryVerification(
            url: "http://127.0.0.1:8480/c", verdict: .stale, recordedStatus: 200, liveStatus: 200, method: "GET",
            changes: [Change("etag", recorded: "\"a\"", live: "\"b\"")], error: nil, attempts: 1)
        let entries = [refused("/a"), refused("/b"), stale, refused("/d")]
        let report = VerifyReport(bundle: "b.zip", checkedAt: Date(), seconds: 1, entries: entries, failOn: Verdict.failingByDefault)
        let lines = try ReportFormatter.render(report, as: .text).split(separator: "\n").map(String.init)
        // One group for the three, wherever they stand in the bundle's order.
        #expect(
            Array(lines.prefix(8)) == [
                "VERDICT      STATUS  URL",
                "unreachable  -       http://127.0.0.1:8480/a",
                "unreachable  -       http://127.0.0.1:8480/b",
                "unreachable  -       http://127.0.0.1:8480/d",
                "             these 3: not asked: 127.0.0.1 is a loopback address",
                "             -> name the origin",
                "stale        200     http://127.0.0.1:8480/c",
                "             \(stale.summary)",
            ], "\(lines)")
        // A long group shows its first three and a count, unless every URL is asked for.
        let many = (0..<12).map { refused("/p\($0)") }
        let long = VerifyReport(bundle: "b.zip", checkedAt: Date(), seconds: 1, entries: many, failOn: Verdict.failingByDefault)
        let short = try ReportFormatter.render(long, as: .text).split(separator: "\n").map(String.init)
        #expect(short.filter { $0.hasPrefix("unreachable") }.count == 3 && short.contains("             ... and 9 more (--verbose lists them)"), "\(short)")
        #expect(short.contains("             these 12: not asked: 127.0.0.1 is a loopback address"))
        let all = try ReportFormatter.render(long, as: .text, all: true).split(separator: "\n").map(String.init)
        #expect(all.filter { $0.hasPrefix("unreachable") }.count == 12 && !all.contains { $0.contains("more (--verbose") }, "\(all)")
    }

    @Test("HTML and Markdown reports escape what a key or a server says, per Unicode scalar")
    func reportsEscape() throws {
        // `"` followed by a combining mark is one Character that is not `"`: escaping by Character lets it through.
        let hostile = "http://127.0.0.1:8080/a\"\u{301} onmouseover=alert(1) x=\"<script>alert(2)</script>[x](javascript:alert(3))|"
        var entry = EntryVerification(
            url: hostile, verdict: .stale, recordedStatus: 200, liveStatus: 200, method: "GET",
            changes: [Change("etag", recorded: "\"a\"\u{301}", live: "<b>")],
            error: nil, attempts: 1)
        entry.advice = "packager refresh \"x\u{301}.zip\""
        let report = VerifyReport(bundle: "b\"\u{301}<i>.zip", checkedAt: Date(), seconds: 1, entries: [entry], failOn: Verdict.failingByDefault)

        let html = try ReportFormatter.render(report, as: .html)
        let scalars = Array(html.unicodeScalars)
        let quoteThenMark = zip(scalars, scalars.dropFirst()).contains { $0 == "\"" && $1 == "\u{301}" }
        #expect(!quoteThenMark, "a quote before a combining mark went out unescaped")
        #expect(!html.contains("<script>") && !html.contains("<b>") && !html.contains("<i>"))
        #expect(html.contains("&quot;\u{301} onmouseover") && html.contains("&lt;script&gt;"))

        let markdown = try ReportFormatter.render(report, as: .markdown)
        #expect(!markdown.contains("<script>") && !markdown.contains("<i>") && !markdown.contains("<b>"))
        #expect(!markdown.contains("[x](javascript"), "a key must not become a Markdown link")
        #expect(markdown.contains("&lt;script&gt;") && markdown.contains("\\[x\\]\\(javascript:alert\\(3\\)\\)\\|"))
        // The table keeps its four columns: the key's `|` is escaped.
        let row = try #require(markdown.split(separator: "\n").last { $0.hasPrefix("| stale") })
        #expect(row.replacingOccurrences(of: "\\|", with: "").filter { $0 == "|" }.count == 5)
    }

    @Test("refresh: a signed bundle is signed again or refused; a corrupt carried-over body fails the refresh; re-fetches stop at --max-body")
    func refreshKeepsGuarantees() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            origin.set("/a.html", .text("<p>a, new</p>", type: "text/html", headers: [("ETag", "\"a2\"")]))
            origin.set("/b.txt", .text("same b", type: "text/plain", headers: [("ETag", "\"b1\"")]))
            var endless = Origin.Resource.text("", type: "text/plain", headers: [("ETag", "\"e2\"")])
            endless.endless = true
            origin.set("/endless.txt", endless)
            let key = Curve25519.Signing.PrivateKey()
            var writer = BundleWriter(options: .init(signingKey: key))
            writer.add(.init(url: origin.base + "/a.html", headers: [("content-type", "text/html"), ("etag", "\"a1\"")], body: .data(Data("<p>a</p>".utf8))))
            writer.add(.init(url: origin.base + "/b.txt", headers: [("content-type", "text/plain"), ("etag", "\"b1\"")], body: .data(Data("same b".utf8))))
            writer.add(
                .init(url: origin.base + "/endless.txt", headers: [("content-type", "text/plain"), ("etag", "\"e1\"")], body: .data(Data("short".utf8))))
            let signed = folder.path + "/signed.zip"
            try writer.write(to: signed)
            let original = try Data(contentsOf: URL(fileURLWithPath: signed))

            // Without the key: refused before any request, and the bundle is left as it was.
            var refresher = Refresher(options: options())
            await #expect(throws: PackagerError.self) { try await refresher.refresh(bundleAt: signed, output: signed) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: signed)) == original && origin.requests.isEmpty)
            let cli = try await run(packagerExecutable, ["refresh", signed, "--allow-private-addresses"])
            #expect(cli.status != 0 && cli.output.contains("is signed") && cli.output.contains("--sign-key"), "\(cli.output)")

            // Another key: refused too (consumers check the key that signed it).
            refresher.signingKey = Curve25519.Signing.PrivateKey()
            await #expect(throws: PackagerError.self) { try await refresher.refresh(bundleAt: signed, output: signed) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: signed)) == original && origin.requests.isEmpty)

            // With it: signed again; the endless body stops at the byte cap and keeps its old response.
            refresher.signingKey = key
            refresher.options.maxBodyBytes = 64 << 10
            let summary = try await refresher.refresh(bundleAt: signed, output: signed)
            #expect(summary.refreshed.map(\.url) == [origin.base + "/a.html"])
            #expect(summary.failed.count == 1 && summary.failed[0].reason == "body longer than the --max-body limit of 65536 bytes", "\(summary.failed)")
            var mount = MountedBundle.Options()
            mount.requiredPublicKey = Array(key.publicKey.rawRepresentation)
            let new = try MountedBundle(path: signed, options: mount)
            #expect(new.isSigned)
            #expect(try new.body(of: #require(new.entry(forKey: origin.base + "/a.html"))) == Data("<p>a, new</p>".utf8))
            #expect(try new.body(of: #require(new.entry(forKey: origin.base + "/endless.txt"))) == Data("short".utf8))

            // A carried-over body that no longer matches its digest is never copied into the new bundle.
            let unsigned = folder.path + "/unsigned.zip"
            var plain = BundleWriter()
            plain.add(.init(url: origin.base + "/a.html", headers: [("content-type", "text/html"), ("etag", "\"a1\"")], body: .data(Data("<p>a</p>".utf8))))
            plain.add(.init(url: origin.base + "/b.txt", headers: [("content-type", "text/plain"), ("etag", "\"b1\"")], body: .data(Data("same b".utf8))))
            try plain.write(to: unsigned)
            let at = try #require(try offset(of: Data("same b".utf8), in: unsigned))
            try flipByte(at: at, in: unsigned)
            await #expect(throws: (any Error).self) { try await Refresher(options: options()).refresh(bundleAt: unsigned, output: folder.path + "/out.zip") }
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"))
        }
    }

    @Test("--deep stops at --max-body: an endless body is unreachable, a longer one stale, and neither is read to its end")
    func deepHasByteCap() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            var endless = Origin.Resource.text("", type: "text/plain")
            endless.endless = true
            origin.set("/endless.txt", endless)
            origin.set("/grown.txt", .text(String(repeating: "x", count: 100_000), type: "text/plain"))
            var writer = BundleWriter()
            writer.add(.init(url: origin.base + "/endless.txt", headers: [("content-type", "text/plain")], body: .data(Data(count: 200_000))))
            writer.add(.init(url: origin.base + "/grown.txt", headers: [("content-type", "text/plain")], body: .data(Data("x".utf8))))
            try writer.write(to: folder.path + "/b.zip")
            let result = try await run(
                packagerExecutable,
                ["verify", folder.path + "/b.zip", "--allow-private-addresses", "--deep", "--max-body", "64K", "--retries", "0", "--format", "json"])
            #expect(result.status == 2, "\(result.output)")
            let report = try JSONDecoder().decode(VerifyReport.self, from: Data(result.output[result.output.firstIndex(of: "{")!...].utf8))
            let endlessEntry = try #require(report.entries.first { $0.url.hasSuffix("/endless.txt") })
            #expect(endlessEntry.verdict == .unreachable && endlessEntry.error == "body longer than 65536 bytes (the --max-body limit); not compared")
            #expect(endlessEntry.advice == "the check is incomplete: raise --max-body to compare this body", "\(endlessEntry.advice ?? "-")")
            let grown = try #require(report.entries.first { $0.url.hasSuffix("/grown.txt") })
            #expect(grown.verdict == .stale && grown.changes.first == Change("body", recorded: "1 bytes", live: "longer"))
            let both = try await run(packagerExecutable, ["verify", folder.path + "/b.zip", "--deep", "--shallow"])
            #expect(both.status == 2 && both.output.contains("--deep and --shallow cannot both be given"), "\(both.output)")
            let size = try await run(packagerExecutable, ["verify", folder.path + "/b.zip", "--max-body", "lots"])
            #expect(size.status == 2 && size.output.contains("--max-body: 'lots' is not a size"), "\(size.output)")
        }
    }

    @Test("an identical body with other validators is fresh with notes; a changed page that links new resources advises a rebuild")
    func contentDecides() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            // The server now sends another ETag and no charset, over the same bytes.
            origin.set("/same.html", .text("<p>same</p>", type: "text/html", headers: [("ETag", "\"s2-gzip\"")]))
            origin.set("/links.html", .text("<link rel=stylesheet href=a.css><link rel=stylesheet href=new.css><a href=/more.html>m</a>", type: "text/html"))
            origin.set("/text.html", .text("<link rel=stylesheet href=a.css><p>new words</p>", type: "text/html"))
            var writer = BundleWriter()
            writer.add(
                .init(
                    url: origin.base + "/same.html", headers: [("content-type", "text/html; charset=utf-8"), ("etag", "\"s1\"")],
                    body: .data(Data("<p>same</p>".utf8))))
            writer.add(
                .init(url: origin.base + "/links.html", headers: [("content-type", "text/html")], body: .data(Data("<link rel=stylesheet href=a.css>".utf8))))
            writer.add(
                .init(
                    url: origin.base + "/text.html", headers: [("content-type", "text/html")],
                    body: .data(Data("<link rel=stylesheet href=a.css><p>old words</p>".utf8))))
            writer.add(.init(url: origin.base + "/a.css", headers: [("content-type", "text/css")], body: .data(Data("p{}".utf8))))
            origin.set("/a.css", .text("p{}", type: "text/css"))
            try writer.write(to: folder.path + "/b.zip")
            let report = try await Verifier(options: options()).verify(bundleAt: folder.path + "/b.zip")
            func entry(_ path: String) throws -> EntryVerification { try #require(report.entries.first { $0.url == origin.base + path }) }

            let same = try entry("/same.html")
            #expect(same.verdict == .fresh && same.method == "conditional GET, body compared")
            #expect(same.notes == [Change("etag", recorded: "\"s1\"", live: "\"s2-gzip\"")], "charset on one side only is no difference")
            #expect(same.summary == "same body (etag \"s1\" -> \"s2-gzip\")")

            let links = try entry("/links.html")
            #expect(links.verdict == .stale)
            #expect(links.notes == [Change("new resources", recorded: nil, live: origin.base + "/more.html and 1 more")])
            #expect(links.advice?.hasPrefix("rebuild: the page links new resources") == true)
            let text = try entry("/text.html")
            #expect(text.verdict == .stale && text.notes.isEmpty && text.advice == "packager refresh BUNDLE re-fetches it")
        }
    }

    @Test("--check-substituted: a remote changed since the build is a change that fails only with --fail-on substituted")
    func substitutedRemotes() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let built = Date(timeIntervalSince1970: 1_790_000_000)
            origin.set("/same.js", .text("local", type: "text/javascript"))
            origin.set("/newer.js", .text("v2", type: "text/javascript", headers: [("Last-Modified", HTTPDates.format(built.addingTimeInterval(86400)))]))
            origin.set("/older.js", .text("v0", type: "text/javascript", headers: [("Last-Modified", HTTPDates.format(built.addingTimeInterval(-86400)))]))
            origin.set("/undated.js", .text("other", type: "text/javascript"))
            var writer = BundleWriter()
            for name in ["same", "newer", "older", "undated", "gone"] {
                writer.add(
                    .init(
                        url: origin.base + "/\(name).js", kind: .substituted, headers: [("content-type", "text/javascript")], body: .data(Data("local".utf8)),
                        fetchedAt: built, source: "vendor/\(name).js"))
            }
            try writer.write(to: folder.path + "/b.zip")
            let bundle = folder.path + "/b.zip"

            // Not asked for: substituted entries are not probed.
            #expect(try await run(packagerExecutable, ["verify", bundle, "--allow-private-addresses"]).status == 0)
            #expect(origin.requests.isEmpty)

            var options = options()
            options.checkSubstituted = true
            options.failOn = [.substituted]
            // The origin answers from this test process: under the full suite's load a connection once took past the
            // helper's 0.5 s, twice, and the remotes were unreachable rather than compared.
            options.timeouts.connect = 10
            let report = try await Verifier(options: options).verify(bundleAt: bundle)
            func entry(_ name: String) throws -> EntryVerification { try #require(report.entries.first { $0.url == origin.base + "/\(name).js" }) }
            #expect(report.entries.allSatisfy { $0.verdict == .substituted })
            #expect(try entry("same").changes.isEmpty && entry("same").notes.first?.live == "the same bytes as the local file")
            #expect(try entry("newer").changes.first?.live?.hasPrefix("modified ") == true)
            #expect(try entry("older").changes.isEmpty && entry("older").notes.first?.live?.hasPrefix("last modified before the build") == true)
            #expect(try entry("undated").changes.isEmpty && entry("undated").notes.first?.live?.hasPrefix("differs from the local file") == true)
            #expect(try entry("gone").changes == [Change("remote", recorded: nil, live: "gone (404)")])
            #expect(Set(report.failures.map { $0.url.replacingOccurrences(of: origin.base, with: "") }) == ["/newer.js", "/gone.js"])
            #expect(origin.requests.first { $0.path == "/newer.js" }?.headers["if-modified-since"] == HTTPDates.format(built))

            // A remote that cannot be reached is a note, not a change.
            var unreachable = options
            unreachable.retries.attempts = 0
            var far = BundleWriter()
            far.add(
                .init(
                    url: "http://127.0.0.1:9/lib.js", kind: .substituted, headers: [("content-type", "text/javascript")], body: .data(Data("local".utf8)),
                    fetchedAt: built, source: "vendor/lib.js"))
            try far.write(to: folder.path + "/far.zip")
            let farReport = try await Verifier(options: unreachable).verify(bundleAt: folder.path + "/far.zip")
            #expect(farReport.failures.isEmpty && farReport.entries.first?.notes.first?.field == "remote unreachable")

            let cli = try await run(packagerExecutable, ["verify", bundle, "--allow-private-addresses", "--check-substituted"])
            #expect(cli.status == 0, "a remote change is a note unless --fail-on names substituted: \(cli.output)")
            let failing = try await run(packagerExecutable, ["verify", bundle, "--allow-private-addresses", "--check-substituted", "--fail-on", "substituted"])
            #expect(failing.status == 1 && failing.output.contains("after the build"), "\(failing.output)")
        }
    }

    @Test("a server that accepts connections and never answers is given up on after three timeouts in a row")
    func hangingHostGivenUp() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            var writer = BundleWriter()
            for i in 0..<30 {
                var slow = Origin.Resource.text("\(i)", type: "text/plain", headers: [("ETag", "\"\(i)\"")])
                slow.delay = 3
                origin.set("/p\(i).txt", slow)
                writer.add(
                    .init(url: origin.base + "/p\(i).txt", headers: [("content-type", "text/plain"), ("etag", "\"\(i)\"")], body: .data(Data("\(i)".utf8))))
            }
            try writer.write(to: folder.path + "/b.zip")
            var options = options()
            options.retries.attempts = 0
            options.timeouts.request = 0.5
            options.concurrency = 2
            options.perHost = 2
            let report = try await Verifier(options: options).verify(bundleAt: folder.path + "/b.zip")
            #expect(report.entries.allSatisfy { $0.verdict == .unreachable })
            // Given up on as a host that did not answer in time, or (on a machine loaded enough that even the connection
            // took past 0.5 s) as one that could not be reached: either way the rest are not tried.
            let skipped = report.entries.filter {
                guard let error = $0.error, error.hasPrefix("not tried: ") else { return false }
                return error.contains("did not answer in time (3 requests in a row timed out")
                    || error.contains("could not be reached (cannot connect: timed out)")
            }
            #expect(skipped.count >= 25, "\(report.entries.map { $0.error ?? "-" })")
            // A handful of requests, not one per entry (a loaded machine changes how long they take, not how many).
            #expect(origin.requests.count <= 5, "\(origin.requests.count) requests")
        }
    }
}

@Suite("diff's hunks of a changed text body")
struct TextDiffTests {
    @Test("a replaced line reads as diff prints it: the old line, then the new, with the lines around it")
    func replacedLineOrder() {
        let hunk = TextDiff.unified("one\ntwo\nthree\nfour\nfive\nsix", "one\ntwo\nTHREE\nfour\nfive\nsix\nseven", context: 1)
        #expect(hunk == ["@@", "  two", "- three", "+ THREE", "  four", "@@", "  six", "+ seven"], "\(hunk)")
    }
}
