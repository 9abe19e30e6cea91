import Foundation
import OfflineBundle

/// How a probe judges what the server answered against what the bundle recorded.
extension Probe {
    /// Judges a content entry from the live answer.
    func judge(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification, validated: Bool) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        if answer.status == 304 && validated { return }
        if (answer.status == 404 || answer.status == 410) && recorded.status != answer.status {
            result.verdict = .gone
            result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            return
        }
        if (300...399).contains(answer.status) {
            result.verdict = .moved
            result.changes = [Change("location", recorded: nil, live: answer.header("location").map { Self.absolute($0, base: recorded.url) })]
            return
        }
        var changes: [Change] = []
        if answer.status != recorded.status { changes.append(Change("status", recorded: String(recorded.status), live: String(answer.status))) }
        let liveETag = answer.header("etag")
        if let etag = recorded.etag, let liveETag, !HTTPRules.weaklyEqual(etag, liveETag) { changes.append(Change("etag", recorded: etag, live: liveETag)) }
        let liveModified = answer.header("last-modified")
        if let modified = recorded.lastModified, let liveModified, !Self.sameDate(modified, liveModified) {
            changes.append(Change("last-modified", recorded: modified, live: liveModified))
        }
        // Content-Length compares only identity bodies (verify asks for identity).
        if let size = recorded.size, let length = answer.header("content-length").flatMap(UInt64.init), answer.header("content-encoding") == nil,
            length != size
        {
            changes.append(Change("content-length", recorded: String(size), live: String(length)))
        }
        if let type = recorded.contentType, let liveType = answer.header("content-type"), Self.normalizedType(type) != Self.normalizedType(liveType) {
            changes.append(Change("content-type", recorded: type, live: liveType))
        }
        if let digest = answer.sha256, let recordedDigest = recorded.sha256 ?? (recorded.size == nil ? Self.emptyDigest : nil), digest != recordedDigest {
            changes.append(Change("sha256", recorded: recordedDigest, live: digest))
        }
        if !changes.isEmpty {
            result.verdict = .stale
            result.changes = changes
        } else if !validated && answer.sha256 == nil && liveETag == nil && liveModified == nil {
            // Nothing to compare but sizes and types, which matched: the content itself cannot be vouched for.
            result.verdict = .unverifiable
        } else if !validated && answer.sha256 == nil && recorded.etag == nil && recorded.lastModified == nil {
            result.verdict = .unverifiable
        }
    }

    /// Judges a recorded redirect: the same target is fresh; another is moved.
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
                result.verdict = .stale
                result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            }
            return
        }
        result.verdict = answer.status == 404 || answer.status == 410 ? .gone : .stale
        result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
    }

    static let emptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    static func sameDate(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let x = HTTPDates.parse(a), let y = HTTPDates.parse(b) else { return false }
        return x == y
    }

    static func normalizedType(_ type: String) -> String { type.lowercased().replacingOccurrences(of: " ", with: "") }

    static func absolute(_ location: String, base: String) -> String {
        URL(string: location, relativeTo: URL(string: base))?.absoluteURL.absoluteString ?? location
    }
}
