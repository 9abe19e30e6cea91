import Foundation
import OfflineBundle

/// The one step from an HTTP response to what a bundle records of it, which every capture source calls: the crawl (and
/// the browser's requests, which it fetches), declared requests, HAR and WARC import (``ExchangeImport``) and refresh.
/// What a response keeps of its headers, the `Date` it was sent with, the request it answers and the headers that
/// choose it, and the next page of a paginated answer are decided here and nowhere else.
enum Recorder {
    /// A fetched response as the bundle records it: its stored headers (``storedHeaders(_:policy:secrets:)``), its
    /// body, and when it was fetched and sent.
    static func entry(url: String, response: Fetcher.Response, policy: Declaration.ContentEncodingPolicy, secrets: SecretScan) -> RecordedExchange {
        RecordedExchange(
            url: url, status: response.status, headers: storedHeaders(response.headers, policy: policy, secrets: secrets), body: source(response.body),
            fetchedAt: response.fetchedAt, originDate: originDate(response.headers))
    }

    /// Headers worth keeping: what a client needs to use the response and what verify compares. Credentials, cookies and
    /// anything carrying a secret from the environment are never kept.
    static func storedHeaders(
        _ headers: [(name: String, value: String)], policy: Declaration.ContentEncodingPolicy, secrets: SecretScan
    ) -> [(name: String, value: String)] {
        headers.filter { header in
            guard HeaderPolicy.recorded.contains(header.name) else { return false }
            // AsyncHTTPClient decodes gzip and deflate (not x-gzip); any other coding is kept, since the bytes still carry it.
            if header.name == "content-encoding" && policy == .decoded && ["gzip", "deflate"].contains(header.value.lowercased()) {
                return false
            }
            return !secrets.found(in: header.value)
        }
    }

    /// The `Date` a response carries, when it carries a valid one.
    static func originDate(_ headers: [(name: String, value: String)]) -> Date? {
        headers.first { $0.name == "date" }.flatMap { HTTPDates.parse($0.value) }
    }

    /// A received body as the writer takes it.
    static func source(_ body: Fetcher.Body) -> BundleWriter.BodySource? {
        switch body {
        case .none: return nil
        case .memory(let data): return .data(data)
        case .file(let path): return .file(path)
        }
    }

    /// The request as recorded: method, headers (a secret's value left out), body, and the headers that choose the
    /// answer: the declared `vary`, the response's `Vary` (but `Accept-Encoding`, which every reader answers itself,
    /// `User-Agent`, which every client sends its own, and names that are not tokens), and a credential sent, by its
    /// scheme. Several fields of one name are one value, joined with `, ` (as readers join them).
    ///
    /// - Returns: the request, or why it cannot be kept: an answer that varies on a secret header (its value would
    ///   be the key).
    static func request(
        method: String, body: Data?, sent: [(name: String, value: String)], vary: [String], responseHeaders: [(name: String, value: String)],
        secret: (String) -> Bool, scan: SecretScan
    ) -> Swift.Result<RecordedRequest, KeyProblem> {
        func isSecret(_ name: String, _ value: String) -> Bool { secret(name) || scan.found(in: value) }
        let headers = sent.map { header -> RecordedRequest.Header in
            let name = header.name.lowercased()
            return .init(name: name, value: isSecret(name, header.value) ? "" : header.value)
        }
        var chosenBy = vary
        for field in responseHeaders where field.name == "vary" {
            for name in field.value.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() })
            where RequestQualifiers.isKeyHeaderName(name) && name != "accept-encoding" && name != "user-agent" && !chosenBy.contains(name) {
                chosenBy.append(name)
            }
        }
        // A credential sent chooses the answer by its scheme; a cookie only where the answer says it varies on it (a
        // browser's recording sends cookies everywhere).
        for name in ["authorization", "proxy-authorization"] where sent.contains(where: { $0.name.lowercased() == name }) && !chosenBy.contains(name) {
            chosenBy.append(name)
        }
        var keyHeaders: [RecordedRequest.Header] = []
        for name in chosenBy.sorted() {
            let values = sent.filter { $0.name.lowercased() == name }.map(\.value)
            let value = values.isEmpty ? nil : values.joined(separator: ", ")
            // A secret never enters a key: a credential by its scheme (or its presence), a cookie by its presence; the
            // answer to another secret header cannot be told apart without its value.
            if let value, !RequestQualifiers.credentialHeaders.contains(name), isSecret(name, value) {
                return .failure(KeyProblem(message: "its answer varies on header '\(name)', which holds a secret: the key would hold it"))
            }
            keyHeaders.append(.init(name: name, value: value.map { RequestQualifiers.keyValue(name: name, value: $0) }))
        }
        return .success(RecordedRequest(method: method, headers: headers, body: body, keyHeaders: keyHeaders))
    }

    /// Why a request's answer cannot be kept under a key.
    struct KeyProblem: Error {
        var message: String
    }

    /// The next page's URL, as the pagination says, or nil on the last page.
    static func nextPage(of headers: [(name: String, value: String)], body: Data, pagination: Declaration.Pagination) -> String? {
        switch pagination {
        case .none:
            return nil
        case .link:
            for field in headers where field.name == "link" {
                if let next = LinkHeader.target(of: field.value, rel: "next") { return next }
            }
            return nil
        case .header(let name):
            return headers.first { $0.name == name }.map { $0.value.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
        case .json(let text):
            guard let pointer = JSONPointer(text), let value = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else {
                return nil
            }
            return (pointer.resolve(in: value) as? String).flatMap { $0.isEmpty ? nil : $0 }
        }
    }
}

/// `Link` header values (RFC 8288): `<uri>; rel="next", <uri>; rel="prev"`.
enum LinkHeader {
    /// The target of the first link whose `rel` holds `relation` (a space-separated list, no case).
    static func target(of value: String, rel relation: String) -> String? {
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { return nil }
            let target = String(rest[rest.index(after: open)..<close])
            var params = rest[rest.index(after: close)...]
            // The parameters run to the next link (a comma outside quotes) or the end.
            var end = params.endIndex
            var quoted = false
            for i in params.indices {
                if params[i] == "\"" { quoted.toggle() }
                if params[i] == "," && !quoted {
                    end = i
                    break
                }
            }
            rest = end < params.endIndex ? params[params.index(after: end)...] : ""
            params = params[..<end]
            for param in params.split(separator: ";") {
                let parts = param.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, parts[0].lowercased() == "rel" else { continue }
                let rels = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased().split(separator: " ")
                if rels.contains(Substring(relation.lowercased())) { return target }
            }
        }
        return nil
    }
}
