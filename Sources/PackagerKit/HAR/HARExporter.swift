import Foundation
import NIOHTTP1
import OfflineBundle

/// A bundle written as HAR 1.2 (`packager export --format har`), for the tools that replay recordings: Playwright's
/// `routeFromHAR`, mitmproxy, browsers' developer tools.
///
/// Each entry gives one HAR entry: the request as recorded (its method, its URL, the headers and body a declared
/// request was sent with; a secret header's value and a body that held a secret are left out, the body said so by a
/// `comment`), and the answer with its stored headers and its body, checked (text as text, other bytes in base64).
/// Entries are written one at a time, in key order, to a temporary file renamed into place; the same bundle always
/// gives the same bytes.
public enum HARExporter {
    /// Writes the bundle at `bundlePath` to `output` as HAR; returns the number of entries written.
    @discardableResult
    public static func export(bundle bundlePath: String, to output: String) throws -> Int {
        // The output's folder first (a large bundle's index goes to a scratch file there), then the bundle: one that
        // does not mount fails as for the other formats (exit 1; a delta is refused before, exit 2).
        if let problem = OutputFile.problem(with: output) { throw problem }
        let bundle = try MountedBundle(path: bundlePath, options: .wholeBundlePass(scratchIn: (output as NSString).deletingLastPathComponent))
        // The manifest's entries one at a time beside the index's, both in key order: what was sent for each request
        // (a manifest that cannot be read leaves the requests as their keys say, as it did when decoded whole).
        var manifest = try? bundle.manifestEntries()
        func recorded(_ key: String) -> ManifestRequest? {
            do {
                return try manifest?.request(forKey: key)
            } catch {
                // The entries after one that cannot be read go as their keys say.
                manifest = nil
                return nil
            }
        }
        let atomic = try AtomicOutput(destination: output)
        let dates = ISO8601DateFormatter()
        dates.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let created = bundle.createdAt ?? Date(timeIntervalSince1970: 0)
        try atomic.write(
            Array(
                "{\"log\": {\"version\": \"1.2\", \"creator\": {\"name\": \"packager\", \"version\": \"\(PackagerVersion.string)\"}, \"entries\": [\n"
                    .utf8))
        var count = 0
        for position in 0..<bundle.entryCount {
            let entry = bundle.entry(at: position)
            let object = try harEntry(entry, in: bundle, request: recorded(entry.key), started: dates.string(from: entry.fetchedAt ?? created))
            var json = Array((count == 0 ? "" : ",\n").utf8)
            object.writeSortingKeys(to: &json)
            try atomic.write(json)
            count += 1
        }
        try atomic.write(Array("\n]}}\n".utf8))
        try atomic.commit()
        return count
    }

    /// What an export writes for a credential the key names by its scheme (`Bearer [redacted]`): never the credential,
    /// but enough that a tool replaying the export, or packager packing it again, keys the answer as a credential's.
    static func credentialPlaceholder(_ scheme: String) -> String {
        scheme.isEmpty ? "[redacted]" : scheme.prefix(1).uppercased() + scheme.dropFirst() + " [redacted]"
    }

    static func harEntry(_ entry: BundleEntry, in bundle: MountedBundle, request: ManifestRequest?, started: String) throws -> JSONValue {
        let split = RequestQualifiers.split(key: entry.key)
        let url = String(split.url)
        let method = request?.method ?? split.qualifiers?.method ?? "GET"
        // The request headers as recorded, a secret's (left empty) left out.
        var sentHeaders: [JSONValue] = (request?.headers ?? []).filter { $0.count == 2 && !$0[1].isEmpty }.map {
            ["name": .string($0[0]), "value": .string($0[1])]
        }
        // A credential the key names is exported as a placeholder of its scheme: without it, a tool replaying the HAR
        // (or packing it again) would take the answer for an anonymous one.
        for qualifier in split.qualifiers?.headers ?? [] where RequestQualifiers.credentialHeaders.contains(qualifier.name) {
            guard let scheme = qualifier.value, !sentHeaders.contains(where: { $0["name"].string == qualifier.name }) else { continue }
            sentHeaders.append(["name": .string(qualifier.name), "value": .string(credentialPlaceholder(scheme))])
        }
        var harRequest: [String: JSONValue] = [
            "method": .string(method), "url": .string(url), "httpVersion": "HTTP/1.1", "headers": .array(sentHeaders), "cookies": [], "headersSize": -1,
            "queryString": .array(queryString(of: url).map { ["name": .string($0.name), "value": .string($0.value)] }),
            "bodySize": .number(Double(request?.bodyData?.count ?? 0)),
        ]
        if request?.bodySecret == true {
            // The bundle kept only the body's digest: a tool replaying the HAR cannot send it, and packager, reading
            // the HAR again, skips the entry rather than key it as a request without a body.
            harRequest["bodySize"] = -1
            harRequest["_bodySecret"] = true
            harRequest["comment"] = "the request body held a secret: the bundle keeps only its digest (the key's b=), so it is not exported"
        } else if let body = request?.bodyData {
            let type = request?.headers.first { $0.first == "content-type" }?.last ?? "application/octet-stream"
            // A body that is not UTF-8 goes in base64, said by `encoding` as response content says it (HAR 1.2 has no
            // field for it in postData; packager reads it back).
            if let text = String(validating: body, as: UTF8.self) {
                harRequest["postData"] = ["mimeType": .string(type), "text": .string(text)]
            } else {
                harRequest["postData"] = ["mimeType": .string(type), "text": .string(body.base64EncodedString()), "encoding": "base64"]
            }
        }
        let headers = entry.headers
        let type = headers.first { $0.name == "content-type" }?.value ?? ""
        let body = try bundle.body(of: entry)
        var content: [String: JSONValue] = ["size": .number(Double(body.count)), "mimeType": .string(type)]
        if !body.isEmpty {
            if MediaTypes.isCompressible(type), let text = String(data: body, encoding: .utf8) {
                content["text"] = .string(text)
            } else {
                content["text"] = .string(body.base64EncodedString())
                content["encoding"] = "base64"
            }
        }
        let location = headers.first { $0.name == "location" }.flatMap { URLReference.resolve($0.value, against: url) } ?? ""
        let response: JSONValue = [
            "status": .number(Double(entry.status)), "statusText": .string(reason(entry.status)), "httpVersion": "HTTP/1.1",
            "headers": .array(
                headers.map { ["name": .string($0.name), "value": .string($0.value)] } + [["name": "content-length", "value": .string(String(body.count))]]),
            "cookies": [], "content": .object(content), "redirectURL": .string(location), "headersSize": -1, "bodySize": .number(Double(body.count)),
        ]
        return [
            "startedDateTime": .string(started), "time": 0, "request": .object(harRequest), "response": response, "cache": [:],
            "timings": ["send": 0, "wait": 0, "receive": 0],
        ]
    }

    /// The URL's query as HAR lists it: each parameter's name and value, decoded.
    static func queryString(of url: String) -> [(name: String, value: String)] {
        guard let components = URLComponents(string: url), let items = components.queryItems else { return [] }
        return items.map { ($0.name, $0.value ?? "") }
    }

    static func reason(_ status: Int) -> String {
        HTTPResponseStatus(statusCode: status).reasonPhrase
    }
}
