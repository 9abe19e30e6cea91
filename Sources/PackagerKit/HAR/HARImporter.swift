import Foundation
import OfflineBundle

/// HAR 1.2 (what browsers' developer tools, Playwright, mitmproxy and Charles record) read into bundle entries:
/// `packager pack --from-har`.
///
/// Each entry's request becomes its key (method, URL, body digest, and the headers its response's `Vary` names or a
/// credential: docs/FORMAT.md §5.4), its response the answer. Secrets are stripped as the crawl strips them: a
/// credential (`Authorization`, `Cookie`) is never stored, in the answer's headers or the recorded request's, and the
/// answer keeps only the headers a crawl keeps. What the format cannot hold is skipped, each named with its entry
/// number: WebSocket sessions, URLs that are not http or https, requests that got no answer (status 0), 304s and
/// bodies the HAR did not record. Damaged input (not JSON, a missing URL, bad base64) refuses the whole file.
public enum HARImporter {
    /// What a HAR file gave.
    public struct Imported: Sendable {
        public var entries: [BundleWriter.Entry]
        /// Entries left out: their number in `log.entries` (from 1), URL and why.
        public var skipped: [(entry: Int, url: String, reason: String)]
    }

    /// Reads the HAR file at `path`.
    ///
    /// - Throws: ``PackagerError`` naming the file (and the entry) when it is not HAR, or an entry is damaged.
    public static func read(_ path: String) throws -> Imported {
        guard let data = FileManager.default.contents(atPath: path) else { throw PackagerError(.io, "cannot read the HAR file", subject: path) }
        return try read(data, name: path)
    }

    static func read(_ data: Data, name: String) throws -> Imported {
        func fail(_ message: String) -> PackagerError { PackagerError(.invalidInput, "\(name): \(message)") }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw fail("not a HAR file: it is not JSON (\(error.localizedDescription))")
        }
        guard let log = (root as? [String: Any])?["log"] as? [String: Any], let list = log["entries"] as? [Any] else {
            throw fail("not a HAR file: it has no log.entries")
        }
        let canonicalizer = RequestKeyCanonicalizer(formQuery: true)
        var imported = Imported(entries: [], skipped: [])
        var byKey: [String: (entry: Int, index: Int)] = [:]
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plainDates = ISO8601DateFormatter()
        for (offset, item) in list.enumerated() {
            let number = offset + 1
            func entryFail(_ message: String) -> PackagerError { fail("entry \(number) of log.entries: \(message)") }
            guard let entry = item as? [String: Any], let request = entry["request"] as? [String: Any], let response = entry["response"] as? [String: Any]
            else { throw entryFail("it has no request and response") }
            guard let url = request["url"] as? String, !url.isEmpty else { throw entryFail("request.url is missing") }
            func skip(_ reason: String) { imported.skipped.append((number, url, reason)) }
            let method = (request["method"] as? String ?? "GET").uppercased()
            let status = (response["status"] as? NSNumber)?.intValue ?? 0
            guard HTTPRules.isFetchableURL(url) else {
                skip("not an http or https URL")
                continue
            }
            if status == 101 || entry["_webSocketMessages"] != nil || (entry["_resourceType"] as? String) == "websocket" {
                skip("a WebSocket session, which a bundle cannot hold")
                continue
            }
            guard (200...599).contains(status) else {
                skip(status == 0 ? "no answer was recorded (status 0: the request failed or was blocked)" : "status \(status) is not a final HTTP status")
                continue
            }
            if status == 304 {
                skip("a 304 holds no content: the HAR recorded a revalidation, not the answer")
                continue
            }
            guard method != "HEAD" else {
                skip("a HEAD is answered from its GET")
                continue
            }
            let sent = pairs(request["headers"]).filter { !$0.name.hasPrefix(":") }
            let answered = pairs(response["headers"]).filter { !$0.name.hasPrefix(":") }
            // The request body: postData.text (as sent); a form given only as params is rebuilt as the form encoding.
            var requestBody: Data?
            if let postData = request["postData"] as? [String: Any] {
                if let text = postData["text"] as? String {
                    requestBody = Data(text.utf8)
                } else if let params = postData["params"] as? [[String: Any]], !params.isEmpty {
                    requestBody = Data(
                        params.map { "\(formEncoded($0["name"] as? String ?? ""))=\(formEncoded($0["value"] as? String ?? ""))" }.joined(separator: "&")
                            .utf8)
                }
            }
            if let body = requestBody, body.count > BundleRequest.maxBodySize {
                throw entryFail("the request body is \(body.count) bytes, over the \(BundleRequest.maxBodySize) bytes a bundle's readers match on")
            }
            // The response body, decoded as the HAR holds it (base64 when it says so).
            let content = response["content"] as? [String: Any] ?? [:]
            let size = (content["size"] as? NSNumber)?.intValue ?? 0
            var body = Data()
            if let text = content["text"] as? String {
                if (content["encoding"] as? String)?.lowercased() == "base64" {
                    guard let decoded = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
                        throw entryFail("response.content.text is not valid base64")
                    }
                    body = decoded
                } else {
                    body = Data(text.utf8)
                }
            } else if size > 0 {
                skip("the HAR holds no body for it (content.size \(size)): the recording left it out")
                continue
            }
            let credential: Set<String> = ["authorization", "proxy-authorization", "cookie"]
            let recorded = Crawler.recorded(
                method: method, body: requestBody, sent: sent, vary: [], responseHeaders: answered, secret: { credential.contains($0) },
                scan: SecretScan([]))
            guard let key = recorded.key(for: url, canonicalizer: canonicalizer) else {
                skip("not a URL a bundle can hold")
                continue
            }
            // The body as the HAR holds it is decoded: no Content-Encoding describes it any more.
            let headers = Crawler.storedHeaders(answered, policy: .decoded, secrets: SecretScan([])).filter { $0.name != "content-encoding" }
            let started = (entry["startedDateTime"] as? String).flatMap { dates.date(from: $0) ?? plainDates.date(from: $0) }
            var written = BundleWriter.Entry(
                url: url, status: status, headers: headers, body: (status == 204 || body.isEmpty && status != 200) ? nil : .data(body), fetchedAt: started,
                originDate: answered.first { $0.name == "date" }.flatMap { HTTPDates.parse($0.value) })
            written.request = recorded
            // The same request twice in one recording (a page polled, reloaded): the later answer is kept.
            if let earlier = byKey[key] {
                imported.skipped.append((earlier.entry, url, "the same request as entry \(number), whose answer is kept"))
                imported.entries[earlier.index] = written
                byKey[key] = (number, earlier.index)
            } else {
                byKey[key] = (number, imported.entries.count)
                imported.entries.append(written)
            }
        }
        imported.skipped.sort { $0.entry < $1.entry }
        return imported
    }

    /// `[{name, value}]` as pairs, names lowercased.
    static func pairs(_ value: Any?) -> [(name: String, value: String)] {
        (value as? [[String: Any]] ?? []).compactMap { item in
            guard let name = item["name"] as? String, let value = item["value"] as? String else { return nil }
            return (name.lowercased(), value)
        }
    }

    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        return (text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text).replacingOccurrences(of: "%20", with: "+")
    }
}
