import Foundation
import OfflineBundle

/// `--check-substituted`: whether the remote URL a local file stands in for changed since the build.
extension Probe {
    /// Asks the remote with `If-Modified-Since` the entry's build time and reads its body (up to `--max-body`).
    ///
    /// - `304`, a `Last-Modified` no later than the build, or the same bytes as the local file: unchanged (a note);
    /// - a later `Last-Modified`, a `404`/`410` or a redirect: changed (a change, which fails the job only when
    ///   `substituted` is among the `--fail-on` verdicts);
    /// - other bytes and no `Last-Modified`: the remote cannot say when it changed (a note).
    ///
    /// The verdict stays `substituted` either way: the bundle answers from the local file, which may be stale too.
    func checkRemote(of recorded: Recorded, into result: inout EntryVerification) async {
        result.method = "GET (the remote of a substituted entry)"
        let since = recorded.fetchedAt ?? bundle.createdAt
        var conditions: [(String, String)] = []
        if let since { conditions.append(("If-Modified-Since", HTTPDates.format(since))) }
        let answer: Answer
        do {
            answer = try await send(
                recorded.url, method: .GET, headers: conditions,
                body: .hashWhen { [limit = options.maxBodyBytes] status, _ in status == 200 ? (limit, false) : nil })
        } catch let error as FetchError {
            result.notes = [Change("remote unreachable", recorded: nil, live: error.message)]
            result.attempts = error.attempts
            return
        } catch {
            result.notes = [Change("remote unreachable", recorded: nil, live: "\(error)")]
            return
        }
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        let built = since.map { HTTPDates.format($0) } ?? "the build"
        switch answer.status {
        case 304:
            result.notes = [Change("remote", recorded: nil, live: "not modified since \(built)")]
        case 404, 410:
            result.changes = [Change("remote", recorded: nil, live: "gone (\(answer.status))")]
        case 300...399:
            result.changes = [
                Change("remote", recorded: nil, live: "redirects to \(answer.header("location").map { Self.absolute($0, base: recorded.url) } ?? "nowhere")")
            ]
        case 200:
            let modified = answer.header("last-modified").flatMap { HTTPDates.parse($0) }
            if let digest = answer.sha256, digest == recorded.sha256 {
                result.notes = [Change("remote", recorded: nil, live: "the same bytes as the local file")]
            } else if let modified, let since, modified > since {
                result.changes = [Change("remote", recorded: nil, live: "modified \(answer.header("last-modified") ?? ""), after the build (\(built))")]
            } else if modified != nil {
                result.notes = [Change("remote", recorded: nil, live: "last modified before the build (\(answer.header("last-modified") ?? ""))")]
            } else {
                result.notes = [Change("remote", recorded: nil, live: "differs from the local file and gives no Last-Modified: cannot tell when it changed")]
            }
        default:
            result.notes = [Change("remote", recorded: nil, live: "answers \(answer.status)")]
        }
        result.advice = advice(for: result, recorded)
    }
}
