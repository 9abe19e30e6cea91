import Foundation
import Mustache

/// Renders a ``VerifyReport`` for people (a terminal table, Markdown, HTML) and for machines (JSON, JUnit XML).
public enum ReportFormatter {
    /// The forms `--format` accepts.
    public enum Format: String, CaseIterable, Sendable {
        case text, json, junit, markdown, html
    }

    /// `report` as `format`. The text table groups entries with the same verdict and reason, and lists the first few of a
    /// long group unless `all`; the other formats list every entry.
    public static func render(_ report: VerifyReport, as format: Format, color: Bool = false, all: Bool = false) throws -> String {
        switch format {
        case .text: return text(report, color: color, all: all)
        case .json: return try json(report)
        case .junit: return junit(report)
        case .markdown: return markdown(report)
        case .html: return try html(report)
        }
    }

    // MARK: - Text

    /// What makes two listed entries one group. An entry not tried because its origin was found down groups with the
    /// entries whose attempt found it down.
    static func groupKey(_ entry: EntryVerification) -> String {
        let reason = GroupedListing.groupKey(entry.summary)
        return [entry.verdict.rawValue, entry.liveStatus.map(String.init) ?? "-", entry.verdict == .unreachable ? entry.host : "", reason, entry.advice ?? ""]
            .joined(separator: "\u{0}")
    }

    static func text(_ report: VerifyReport, color: Bool, all: Bool) -> String {
        func paint(_ verdict: Verdict) -> String {
            let name = verdict.rawValue.padding(toLength: 12, withPad: " ", startingAt: 0)
            guard color else { return name }
            let code =
                switch verdict {
                case .fresh: "32"
                case .stale, .gone, .moved: "31"
                case .unreachable: "35"
                default: "33"
                }
            return "\u{1B}[\(code)m\(name)\u{1B}[0m"
        }
        // Fresh entries are summed up, not listed: the table is for what needs attention (and absent when nothing does).
        let listed = report.entries.filter { $0.verdict != .fresh }
        var lines = listed.isEmpty ? [] : ["VERDICT      STATUS  URL"]
        // Entries with the same verdict, status, reason and advice (a whole origin down, say) are one group, explained
        // once after its URLs; a long group lists its first few (all with `all`).
        for group in GroupedListing.groups(listed, by: groupKey) {
            let first = group.items[0]
            let status = first.liveStatus.map(String.init) ?? "-"
            let (shown, more) = GroupedListing.shown(group.items, all: all)
            for entry in shown {
                // Stored and live values come from the bundle and the server: control bytes are shown, not sent to the terminal.
                lines.append("\(paint(entry.verdict)) \(status.padding(toLength: 8, withPad: " ", startingAt: 0))\(terminalSafe(entry.url))")
            }
            if more > 0 { lines.append(GroupedListing.moreLine(more, indent: "             ")) }
            // An origin found down: the entries not tried after it say so, and name it.
            let summary = GroupedListing.groupReason(group.items.lazy.map(\.summary))
            let count = group.items.count
            lines.append("             \(count > 1 ? "these \(count): " : "")\(terminalSafe(summary))")
            if let advice = first.advice { lines.append("             -> \(terminalSafe(advice))") }
        }
        lines.append("")
        lines.append(summaryLine(report))
        return lines.joined(separator: "\n")
    }

    /// `120 entries: 110 fresh, 4 stale, ...` in a fixed order, zeros left out.
    public static func summaryLine(_ report: VerifyReport) -> String {
        let parts = Verdict.allCases.compactMap { verdict -> String? in
            let n = report.counts[verdict.rawValue] ?? 0
            return n == 0 ? nil : "\(n) \(verdict.rawValue)"
        }
        return "\(report.entries.count) entries: " + parts.joined(separator: ", ") + String(format: " (in %.1f s)", report.seconds)
    }

    /// Writes `report` as `format` to `path`, atomically as every output is (a temporary file renamed when whole). JSON
    /// and JUnit go out as they are made, a MiB at a time: a report of 1,000,000 entries, encoded whole by
    /// `JSONEncoder` (its tree of values, then its bytes, then a String and its copy), took 2.4 GB.
    public static func write(_ report: VerifyReport, as format: Format, color: Bool = false, all: Bool = false, to path: String) throws {
        let output = try AtomicOutput(destination: path)
        try write(report, as: format, color: color, all: all) { try output.write($0) }
        try output.commit()
    }

    /// Gives `report` as `format` to `send` in pieces: JSON and JUnit as they are made, about a MiB at a time, each
    /// piece ending after a whole entry (standard output, a pipe); the other forms whole.
    public static func write(
        _ report: VerifyReport, as format: Format, color: Bool = false, all: Bool = false, into send: @escaping ([UInt8]) throws -> Void
    ) throws {
        switch format {
        case .json, .junit:
            let sink = ReportSink(send: send)
            if format == .json { try json(report, into: sink) } else { try junit(report, into: sink) }
            try sink.finish()
        case .text, .markdown, .html: try send(Array(try render(report, as: format, color: color, all: all).utf8))
        }
    }

    /// Where a report's bytes go: given to `send` as they are made, or kept (``render(_:as:color:all:)``).
    final class ReportSink {
        var bytes: [UInt8] = []
        private let send: (([UInt8]) throws -> Void)?

        init(send: (([UInt8]) throws -> Void)? = nil) {
            self.send = send
            bytes.reserveCapacity(send == nil ? 1 << 16 : (1 << 20) + 4096)
        }

        func append(_ text: String) { bytes += text.utf8 }
        func string(_ text: String) { JSONValue.writeString(text, to: &bytes) }

        /// Gives what was made to `send` once it holds a MiB.
        func flushIfFull() throws {
            guard let send, bytes.count >= 1 << 20 else { return }
            try send(bytes)
            bytes.removeAll(keepingCapacity: true)
        }

        /// Gives the rest.
        func finish() throws {
            guard let send, !bytes.isEmpty else { return }
            try send(bytes)
            bytes.removeAll()
        }
    }

    // MARK: - JSON

    static func json(_ report: VerifyReport) throws -> String {
        let sink = ReportSink()
        try json(report, into: sink)
        return String(decoding: sink.bytes, as: UTF8.self)
    }

    /// The report as JSON, written by hand: `VerifyReport`'s Codable form (its keys sorted, an absent optional left
    /// out, two spaces of indent), without `JSONEncoder`'s tree of the whole report. A test decodes it back.
    static func json(_ report: VerifyReport, into out: ReportSink) throws {
        func changes(_ list: [Change], _ indent: String) {
            guard !list.isEmpty else { return out.append("[]") }
            out.append("[")
            for (i, change) in list.enumerated() {
                out.append(i == 0 ? "\n\(indent)  {\n" : ",\n\(indent)  {\n")
                out.append("\(indent)    \"field\" : ")
                out.string(change.field)
                if let live = change.live {
                    out.append(",\n\(indent)    \"live\" : ")
                    out.string(live)
                }
                if let recorded = change.recorded {
                    out.append(",\n\(indent)    \"recorded\" : ")
                    out.string(recorded)
                }
                out.append("\n\(indent)  }")
            }
            out.append("\n\(indent)]")
        }
        out.append("{\n  \"bundle\" : ")
        out.string(report.bundle)
        out.append(",\n  \"checkedAt\" : ")
        out.string(report.checkedAt)
        out.append(",\n  \"counts\" : {")
        for (i, (verdict, count)) in report.counts.sorted(by: { $0.key < $1.key }).enumerated() {
            out.append(i == 0 ? "\n    " : ",\n    ")
            out.string(verdict)
            out.append(" : \(count)")
        }
        out.append(report.counts.isEmpty ? "}" : "\n  }")
        out.append(",\n  \"entries\" : [")
        for (i, entry) in report.entries.enumerated() {
            out.append(i == 0 ? "\n    {" : ",\n    {")
            if let advice = entry.advice {
                out.append("\n      \"advice\" : ")
                out.string(advice)
                out.append(",")
            }
            out.append("\n      \"attempts\" : \(entry.attempts),\n      \"changes\" : ")
            changes(entry.changes, "      ")
            if let error = entry.error {
                out.append(",\n      \"error\" : ")
                out.string(error)
            }
            if let live = entry.liveStatus { out.append(",\n      \"liveStatus\" : \(live)") }
            out.append(",\n      \"method\" : ")
            out.string(entry.method)
            out.append(",\n      \"notes\" : ")
            changes(entry.notes, "      ")
            out.append(",\n      \"recordedStatus\" : \(entry.recordedStatus),\n      \"url\" : ")
            out.string(entry.url)
            out.append(",\n      \"verdict\" : ")
            out.string(entry.verdict.rawValue)
            out.append("\n    }")
            try out.flushIfFull()
        }
        out.append(report.entries.isEmpty ? "]" : "\n  ]")
        out.append(",\n  \"failOn\" : [")
        for (i, verdict) in report.failOn.enumerated() {
            out.append(i == 0 ? "\n    " : ",\n    ")
            out.string(verdict.rawValue)
        }
        out.append(report.failOn.isEmpty ? "]" : "\n  ]")
        out.append(",\n  \"seconds\" : \(report.seconds)\n}")
    }

    // MARK: - JUnit

    /// One test suite per host, one test case per entry; failing verdicts are failures, substituted,
    /// blocked and unverifiable entries are skipped. Jenkins and GitLab read this form.
    static func junit(_ report: VerifyReport) -> String {
        let sink = ReportSink()
        // In memory, nothing is written that could fail.
        try? junit(report, into: sink)
        return String(decoding: sink.bytes, as: UTF8.self)
    }

    static func junit(_ report: VerifyReport, into out: ReportSink) throws {
        let failOn = Set(report.failOn)
        let hosts = Dictionary(grouping: report.entries, by: \.host).sorted { $0.key < $1.key }
        let failures = report.failures.count
        out.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
        out.append(
            "<testsuites name=\"packager verify\" tests=\"\(report.entries.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(String(format: "%.3f", report.seconds))\">\n"
        )
        for (host, entries) in hosts {
            let hostFailures = entries.filter { failOn.contains($0.verdict) }.count
            let skipped = entries.filter { !failOn.contains($0.verdict) && $0.verdict != .fresh }.count
            out.append(
                "  <testsuite name=\"\(escape(host))\" tests=\"\(entries.count)\" failures=\"\(hostFailures)\" errors=\"0\" skipped=\"\(skipped)\" timestamp=\"\(report.checkedAt)\">\n"
            )
            for entry in entries {
                out.append("    <testcase classname=\"\(escape(host))\" name=\"\(escape(entry.url))\">\n")
                if failOn.contains(entry.verdict) {
                    let advice = entry.advice.map { " (" + $0 + ")" } ?? ""
                    out.append(
                        "      <failure type=\"\(entry.verdict.rawValue)\" message=\"\(escape(entry.verdict.rawValue + ": " + entry.summary + advice))\"/>\n")
                } else if entry.verdict != .fresh {
                    out.append("      <skipped message=\"\(escape(entry.verdict.rawValue + ": " + entry.summary))\"/>\n")
                }
                out.append("    </testcase>\n")
                try out.flushIfFull()
            }
            out.append("  </testsuite>\n")
        }
        out.append("</testsuites>\n")
    }

    static func escape(_ s: String) -> String {
        // Most URLs need no escaping; skip the scalar-by-scalar copy for them.
        if !s.utf8.contains(where: {
            $0 < 0x20 || $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "'")
        }) {
            return s
        }
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default:
                // XML 1.0 cannot carry most control characters, even escaped.
                if c.value < 0x20 && c != "\n" && c != "\t" && c != "\r" { out += "?" } else { out.unicodeScalars.append(c) }
            }
        }
        return out
    }

    // MARK: - Markdown

    /// A summary table and the entries that need attention, fit for a pull-request comment.
    static func markdown(_ report: VerifyReport) -> String {
        var md = ["### packager verify: \(report.failures.isEmpty ? "all fresh" : "\(report.failures.count) to look at")", ""]
        md.append("| verdict | entries |")
        md.append("|---|---|")
        for verdict in Verdict.allCases where (report.counts[verdict.rawValue] ?? 0) > 0 {
            md.append("| \(verdict.rawValue) | \(report.counts[verdict.rawValue] ?? 0) |")
        }
        let attention = report.entries.filter { $0.verdict != .fresh }
        if !attention.isEmpty {
            md.append("")
            md.append("| verdict | URL | what changed | what to do |")
            md.append("|---|---|---|---|")
            for entry in attention {
                md.append(
                    "| \(entry.verdict.rawValue) | \(markdownCell(entry.url)) | \(markdownCell(entry.summary)) | \(markdownCell(entry.advice ?? "")) |")
            }
        }
        md.append("")
        md.append("<sub>\(markdownCell(report.bundle)), checked \(report.checkedAt) in \(String(format: "%.1f", report.seconds)) s</sub>")
        return md.joined(separator: "\n") + "\n"
    }

    /// A table cell that shows `s` as text: HTML and Markdown syntax are escaped (a key cannot open a tag or a link in
    /// the comment it lands in), and a line break cannot end the row.
    static func markdownCell(_ s: String) -> String {
        var marked = ""
        for c in s.unicodeScalars {
            switch c {
            case "|", "\\", "`", "*", "_", "[", "]", "(", ")", "!", "#", "~":
                marked += "\\"
                marked.unicodeScalars.append(c)
            case "\n", "\r", "\t": marked += " "
            default: marked.unicodeScalars.append(c)
            }
        }
        // Then HTML, as every other report escapes it (the backslashes and entities do not meet).
        return escape(marked)
    }

    // MARK: - HTML

    /// The Mustache template in Templates/verify-report.html.mustache, with a chart of verdicts by host.
    static func html(_ report: VerifyReport) throws -> String {
        let template = try MustacheTemplate(string: String(decoding: PackageResources.verify_report_html_mustache, as: UTF8.self))
        let hosts = Dictionary(grouping: report.entries, by: \.host).sorted { $0.key < $1.key }
        let widest = max(1, hosts.map(\.value.count).max() ?? 1)
        let chart: [[String: Any]] = hosts.map { host, entries in
            let bars: [[String: Any]] = Verdict.allCases.compactMap { verdict in
                let n = entries.filter { $0.verdict == verdict }.count
                guard n > 0 else { return nil }
                return ["verdict": verdict.rawValue, "count": n, "width": String(format: "%.1f", 100.0 * Double(n) / Double(widest))]
            }
            return ["host": escape(host), "total": entries.count, "bars": bars]
        }
        // Every string is escaped here, per Unicode scalar, and the template inserts it as it is: Mustache's own escaping
        // goes by Character, and `"` followed by a combining mark is one Character that is not `"`.
        let e = escape
        let rows: [[String: Any]] = report.entries.filter { $0.verdict != .fresh }.map {
            var row: [String: Any] = [
                "verdict": $0.verdict.rawValue, "url": e($0.url), "status": $0.liveStatus.map(String.init) ?? "-", "summary": e($0.summary),
                "method": e($0.method),
            ]
            if let advice = $0.advice { row["advice"] = e(advice) }
            return row
        }
        let counts: [[String: Any]] = Verdict.allCases.map { ["verdict": $0.rawValue, "count": report.counts[$0.rawValue] ?? 0] }
        let context: [String: Any] = [
            "bundle": escape(report.bundle), "checkedAt": escape(report.checkedAt), "seconds": String(format: "%.1f", report.seconds),
            "total": report.entries.count,
            "failures": report.failures.count, "ok": report.failures.isEmpty, "counts": counts, "hosts": chart, "rows": rows, "hasRows": !rows.isEmpty,
            "summary": escape(summaryLine(report)),
        ]
        return template.render(context)
    }
}
