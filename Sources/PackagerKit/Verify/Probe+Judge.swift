import Foundation
import HTTPTypes
import OfflineBundle

/// How a probe judges what the server answered against what the bundle recorded.
///
/// The rules, by kind of evidence (docs/VERIFY.md has them as a table):
/// - a body read and hashed decides: the same SHA-256 is fresh whatever the headers say, and header differences become
///   notes; a different one (or a longer body) is stale;
/// - without a body, a validator the origin sent decides: `304`, or `200` with weakly equal ETags (RFC 9110 §8.8.3.2)
///   and the same Last-Modified, is fresh;
/// - media types compare by type and subtype, and the charset only when both sides name one;
/// - `Content-Length` compares only uncoded answers, and a different length over an uncoded body proves other content.
extension Probe {
    /// 404/410 (gone) and 3xx (moved) answers to a content entry; true when the answer was one of them.
    private func judgeGoneOrMoved(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) -> Bool {
        if (answer.status == 404 || answer.status == 410) && recorded.status != answer.status {
            result.verdict = .gone
            result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            return true
        }
        if (300...399).contains(answer.status) && answer.status != 304 {
            result.verdict = .moved
            result.changes = [
                Change("status", recorded: String(recorded.status), live: String(answer.status)),
                Change("location", recorded: nil, live: answer.header("location").map { Self.absolute($0, base: recorded.url) }),
            ]
            return true
        }
        return false
    }

    /// A page of a paged answer (by `Link` or a header) whose content is unchanged but that now has a next page where
    /// it had none (the list grew), or none where it had one: stale, so that refresh walks the pages again and the
    /// bundle never names a next page it lacks. (The next page's URL itself may change on every answer: Kinto's carry
    /// a token made afresh each time; the page it names is checked as an entry of its own.)
    func judgeNextPage(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        guard result.verdict == .fresh, answer.status != 304, let word = recorded.request?.paginate,
            let pagination = Declaration.Pagination(word: word), !word.hasPrefix("json:")
        else { return }
        let live = answer.headers.map { (name: $0.name.canonicalName, value: $0.value) }
        let was = Recorder.nextPage(of: recorded.headers, body: Data(), pagination: pagination).map { Self.absolute($0, base: recorded.url) }
        let now = Recorder.nextPage(of: live, body: Data(), pagination: pagination).map { Self.absolute($0, base: recorded.url) }
        guard (was == nil) != (now == nil) else { return }
        result.verdict = .stale
        result.changes = [Change("next page", recorded: was, live: now)]
    }

    /// What every judge of a body does first: the live status and attempts recorded, a 404/410 or a redirect judged as
    /// such (nil then: nothing more to judge), and a status change as the first change.
    private func begin(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) -> [Change]? {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        if judgeGoneOrMoved(recorded, answer, into: &result) { return nil }
        return answer.status == recorded.status ? [] : [Change("status", recorded: String(recorded.status), live: String(answer.status))]
    }

    /// A content entry whose live body was read: the digest decides.
    func judgeContent(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        guard var changes = begin(recorded, answer, into: &result) else { return }
        let recordedDigest = recorded.sha256 ?? Self.emptyDigest
        if answer.longer {
            changes.append(Change("body", recorded: "\(recorded.size ?? 0) bytes", live: "longer"))
        } else if let digest = answer.sha256, digest != recordedDigest {
            changes.append(Change("sha256", recorded: recordedDigest, live: digest))
        }
        let headers = Self.headerChanges(recorded, headers: answer.headers)
        if changes.isEmpty {
            result.notes = headers
            judgeNextPage(recorded, answer, into: &result)
        } else {
            result.verdict = .stale
            result.changes = changes + headers
            if recorded.isHTML, let body = answer.body { result.notes = newResources(recorded, live: body) }
        }
    }

    /// A JSON answer with volatile fields: its JSON without them decides; what differs is named by pointer, and the
    /// validators and length (which change with the volatile fields) are notes.
    func judgeStableJSON(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        guard var changes = begin(recorded, answer, into: &result) else { return }
        let live = answer.body.flatMap { StableJSON.digest(of: Data($0), volatile: recorded.volatile) }
        if live != recorded.stableSHA256 {
            changes += jsonChanges(recorded, live: answer.body)
            if changes.isEmpty || live == nil {
                changes.append(Change("json", recorded: recorded.stableSHA256, live: live ?? "not JSON, or longer than --max-body"))
            }
        }
        if changes.isEmpty {
            result.notes = Self.headerChanges(recorded, headers: answer.headers)
            judgeNextPage(recorded, answer, into: &result)
        } else {
            result.verdict = .stale
            result.changes = changes
        }
    }

    /// The fields of the stored JSON that the live one changed, volatile ones left out, each as a change named by its
    /// pointer (at most 10, and a count of the rest).
    func jsonChanges(_ recorded: Recorded, live: [UInt8]?) -> [Change] {
        guard let live, let entry = bundle.entry(forKey: recorded.key), let stored = try? bundle.body(of: entry),
            let old = StableJSON.stableData(stored, volatile: recorded.volatile).flatMap(JSONDiff.parse),
            let new = StableJSON.stableData(Data(live), volatile: recorded.volatile).flatMap(JSONDiff.parse)
        else { return [] }
        let (shown, total) = JSONDiff.differences(old, new, limit: 10)
        var changes = shown.map { Change($0.pointer.isEmpty ? "/" : $0.pointer, recorded: $0.old, live: $0.new) }
        if total > shown.count { changes.append(Change("json", recorded: nil, live: "\(total - shown.count) more fields changed")) }
        return changes
    }

    /// A conditional GET whose body was not read: 304, or the same validators, is fresh.
    func judgeValidated(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        if answer.status == 304 { return }
        if judgeGoneOrMoved(recorded, answer, into: &result) { return }
        var changes: [Change] = []
        if answer.status != recorded.status { changes.append(Change("status", recorded: String(recorded.status), live: String(answer.status))) }
        changes += Self.headerChanges(recorded, headers: answer.headers)
        if !changes.isEmpty {
            result.verdict = .stale
            result.changes = changes
        }
        judgeNextPage(recorded, answer, into: &result)
    }

    /// `--shallow` on an entry without the origin's validators: only a status or an uncoded length can prove a change.
    func judgeShallow(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        if judgeGoneOrMoved(recorded, answer, into: &result) { return }
        let headers = Self.headerChanges(recorded, headers: answer.headers)
        var changes: [Change] = []
        if answer.status != recorded.status { changes.append(Change("status", recorded: String(recorded.status), live: String(answer.status))) }
        changes += headers.filter { $0.field == "content-length" }
        if changes.isEmpty {
            result.verdict = .unverifiable
            result.notes = headers
        } else {
            result.verdict = .stale
            result.changes = changes
            result.notes = headers.filter { $0.field != "content-length" }
        }
    }

    /// Judges a recorded redirect: the same target is fresh (another redirect status is a note); another is moved.
    func judgeRedirect(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        let was = recorded.location.map { Self.absolute($0, base: recorded.url) }
        if (300...399).contains(answer.status) {
            let now = answer.header("location").map { Self.absolute($0, base: recorded.url) }
            if now != was {
                result.verdict = .moved
                result.changes = [Change("location", recorded: was, live: now)]
            } else if answer.status != recorded.status {
                // The same target: a client lands where the bundle sends it (a packed folder's 301 is another server's 308).
                result.notes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            }
            return
        }
        result.verdict = answer.status == 404 || answer.status == 410 ? .gone : .stale
        result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
    }

    /// The recorded headers the live ones contradict, by rule: ETags weakly, dates as instants, lengths of uncoded
    /// answers only, media types by essence (and charset when both name one). A validator the writer made up is not
    /// among the recorded ones, so it is never compared.
    static func headerChanges(_ recorded: Recorded, headers: HTTPFields) -> [Change] {
        var changes: [Change] = []
        if let etag = recorded.etag, let live = headers[.eTag], !HTTPRules.weaklyEqual(etag, live) {
            changes.append(Change("etag", recorded: etag, live: live))
        }
        if let modified = recorded.lastModified, let live = headers[.lastModified], !sameDate(modified, live) {
            changes.append(Change("last-modified", recorded: modified, live: live))
        }
        let coded = headers[.contentEncoding].map { $0.lowercased() != "identity" } ?? false
        if let size = recorded.size, !coded, let length = headers[.contentLength].flatMap(UInt64.init), length != size {
            changes.append(Change("content-length", recorded: String(size), live: String(length)))
        }
        if let type = recorded.contentType, let live = headers[.contentType], !MediaTypeRule.same(type, live) {
            changes.append(Change("content-type", recorded: type, live: live))
        }
        return changes
    }

    /// What to run about a verdict that needs attention.
    func advice(for result: EntryVerification, _ recorded: Recorded, failure: FetchError.Code? = nil) -> String? {
        if result.verdict == .fresh { return nil }
        let refresh = "packager refresh \(options.bundleArgument)"
        switch result.verdict {
        case .stale:
            if result.notes.contains(where: { $0.field == Change.newResources }) {
                return "rebuild: the page links new resources the bundle lacks (\(refresh) would re-fetch the page alone)"
            }
            return "\(refresh) re-fetches it"
        case .gone: return "\(refresh) records the \(result.liveStatus ?? 404); drop the URL from the declaration if it is gone for good"
        case .moved: return "\(refresh) records the redirect; rebuild to crawl its target"
        case .unreachable:
            if failure == .bodyTooLong { return "the check is incomplete: raise --max-body to compare this body" }
            return "the check is incomplete: run verify again once \(keyOrigin(recorded.url).map { String($0.origin) } ?? "the server") answers as it should"
        case .unverifiable: return "run verify without --shallow to compare bodies"
        case .substituted where !result.changes.isEmpty:
            return "the remote changed since the build: compare \(recorded.url) with the local file, and update or drop the substitution"
        default: return nil
        }
    }

    /// The resources a changed page links (requisites anywhere, links on its own origin) that neither the stored page
    /// linked nor the bundle holds: a refresh would record a page whose new links answer from the network.
    func newResources(_ recorded: Recorded, live: [UInt8]) -> [Change] {
        guard let entry = bundle.entry(forKey: recorded.url), let stored = try? bundle.body(of: entry) else { return [] }
        let before = Self.resources(in: Array(stored), page: recorded.url)
        let missing = Self.resources(in: live, page: recorded.url).filter { !before.contains($0) && bundle.entry(for: $0) == nil }.sorted()
        guard let first = missing.first else { return [] }
        let more = missing.count > 1 ? " and \(missing.count - 1) more" : ""
        return [Change(Change.newResources, recorded: nil, live: first + more)]
    }

    /// A page's requisites (any origin) and same-origin links, resolved (absolute http(s) URLs without fragments).
    static func resources(in page: [UInt8], page url: String) -> Set<String> {
        let links = LinkExtractor.html(page)
        let base = links.baseHref.flatMap { URLReference.resolve($0, against: url) } ?? url
        let origin = keyOrigin(url).map { String($0.origin) }
        var found = Set<String>()
        for raw in links.requisites {
            if let absolute = URLReference.resolve(raw, against: base) { found.insert(absolute) }
        }
        for raw in links.links {
            guard let absolute = URLReference.resolve(raw, against: base), let origin, keyOrigin(absolute).map({ String($0.origin) }) == origin else {
                continue
            }
            found.insert(absolute)
        }
        return found
    }

    static let emptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    static func sameDate(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let x = HTTPDates.parse(a), let y = HTTPDates.parse(b) else { return false }
        return x == y
    }

    static func absolute(_ location: String, base: String) -> String {
        URLReference.resolve(location, against: base) ?? location
    }
}

/// Media types compared as RFC 9110 §8.3.1 describes them: type and subtype case-insensitively; parameters other than
/// charset do not name another type; a charset only when both sides name one (one server's default is not a change).
enum MediaTypeRule {
    static func same(_ a: String, _ b: String) -> Bool {
        guard MediaTypes.essence(of: a) == MediaTypes.essence(of: b) else { return false }
        guard let x = MediaTypes.charset(of: a), let y = MediaTypes.charset(of: b) else { return true }
        return x == y
    }
}
