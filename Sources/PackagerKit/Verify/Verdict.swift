import Foundation
import OfflineBundle

/// What `packager verify` concluded about one entry.
public enum Verdict: String, Codable, Sendable, CaseIterable, Comparable {
    /// The live server still answers as recorded.
    case fresh
    /// It answers with something else; ``EntryVerification/changes`` says what.
    case stale
    /// It answers 404 or 410 where the bundle recorded content.
    case gone
    /// A recorded redirect now points elsewhere, or content now redirects.
    case moved
    /// No answer after the retries (connection errors, timeouts, 429 or 5xx).
    case unreachable
    /// Nothing the server said can vouch for the content: no validators from the origin, and `--shallow` kept the body unread.
    case unverifiable
    /// Answered from a local file at build time: reported, not probed.
    case substituted
    /// Answered by a block rule: reported, not probed.
    case blocked

    public static func < (a: Verdict, b: Verdict) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The verdicts that fail a nightly job unless `--fail-on` says otherwise.
    public static let failingByDefault: Set<Verdict> = [.stale, .gone, .moved, .unreachable]
}

/// One difference between the recorded response and the live one.
public struct Change: Codable, Sendable, Equatable {
    /// What differs: status, etag, last-modified, content-length, content-type, location, sha256.
    public var field: String
    public var recorded: String?
    public var live: String?

    /// The field of a note listing resources a live page links that the bundle lacks (refresh reads it too).
    public static let newResources = "new resources"

    public init(_ field: String, recorded: String?, live: String?) {
        self.field = field
        self.recorded = recorded
        self.live = live
    }
}

/// The verdict for one entry, with the evidence.
public struct EntryVerification: Codable, Sendable, Equatable {
    /// The request key.
    public var url: String
    public var verdict: Verdict
    /// The recorded status, and the live one when the server answered.
    public var recordedStatus: Int
    public var liveStatus: Int?
    /// How the entry was checked: conditional GET, HEAD, GET, deep GET, or not probed.
    public var method: String
    public var changes: [Change]
    /// Why the entry could not be checked: for unreachable entries, the last error; for a declared POST (or another
    /// method that may change the server) that was not sent again, that.
    public var error: String?
    public var attempts: Int
    /// Differences that do not make the entry stale: headers that changed over a byte-identical body (say
    /// `content-type: text/html; charset=utf-8 -> text/html`), or, with `--check-substituted`, what the remote says.
    public var notes: [Change] = []
    /// What to run about a verdict that needs attention: `packager refresh`, or a rebuild when the page links new resources.
    public var advice: String? = nil

    /// The ``method`` of an entry no request was sent for (substituted, blocked, or its host known to be down).
    public static let notProbed = "not probed"

    /// Whether a request was sent for the entry.
    public var probed: Bool { method != Self.notProbed }

    /// The host the entry belongs to (with its port, when the key has one), for grouping.
    public var host: String { keyOrigin(url).map { String($0.authority) } ?? url }

    /// How the error of an entry not tried because its origin was found down begins.
    static let notTriedPrefix = "not tried: "

    /// One line that says why, for tables and reports.
    public var summary: String {
        if let error { return error }
        func list(_ changes: [Change]) -> String {
            changes.map { $0.recorded == nil ? "\($0.field): \($0.live ?? "none")" : "\($0.field) \($0.recorded!) -> \($0.live ?? "none")" }.joined(
                separator: "; ")
        }
        if changes.isEmpty {
            let plain: String
            switch verdict {
            case .fresh: plain = method == "conditional GET" ? "304 Not Modified" : notes.isEmpty ? "unchanged" : "same body"
            case .unverifiable: plain = "no ETag or Last-Modified from the origin, and --shallow left the body unread"
            case .substituted: plain = probed ? "answered from a local file" : "answered from a local file; not probed"
            case .blocked: plain = "blocked at build time; not probed"
            default: plain = verdict.rawValue
            }
            return notes.isEmpty ? plain : plain + " (" + list(notes) + ")"
        }
        return list(changes) + (notes.isEmpty ? "" : " (" + list(notes) + ")")
    }
}

/// Every entry's verdict and the counts, as reports print them.
public struct VerifyReport: Codable, Sendable {
    public var bundle: String
    public var checkedAt: String
    public var seconds: Double
    public var entries: [EntryVerification]
    public var counts: [String: Int]
    /// The verdicts that fail the job.
    public var failOn: [Verdict]

    public init(bundle: String, checkedAt: Date, seconds: Double, entries: [EntryVerification], failOn: Set<Verdict>) {
        self.bundle = bundle
        self.checkedAt = HTTPDates.iso8601(checkedAt)
        self.seconds = seconds
        self.entries = entries.sorted { $0.url < $1.url }
        var counts: [String: Int] = [:]
        for verdict in Verdict.allCases { counts[verdict.rawValue] = 0 }
        for entry in entries { counts[entry.verdict.rawValue, default: 0] += 1 }
        self.counts = counts
        self.failOn = failOn.sorted()
    }

    /// Entries whose verdict fails the job.
    ///
    /// A substituted entry whose remote was checked (`--check-substituted`) fails only when the remote changed since the build.
    public var failures: [EntryVerification] {
        entries.filter { failOn.contains($0.verdict) && !($0.verdict == .substituted && $0.probed && $0.changes.isEmpty) }
    }

    /// The documented exit status: 0 nothing fails; 2 when an entry is unreachable and that fails the job
    /// (the check itself is incomplete); 1 when something else fails it.
    public var exitCode: Int32 {
        let failing = Set(failures.map(\.verdict))
        if failing.isEmpty { return 0 }
        return failing.contains(.unreachable) ? 2 : 1
    }
}
