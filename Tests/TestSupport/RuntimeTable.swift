import Foundation
import OfflineBundle
import PackagerKit

/// One request of the table every client integration answers, and what it must get.
public struct RuntimeCase: Sendable, CustomStringConvertible {
    public var path: String
    public var headers: [(String, String)]
    public var status: Int
    /// Headers that must be present with these values (nil: must be present, any value).
    public var expectedHeaders: [(String, String?)]
    public var body: Data
    /// The request's method and body (a declared request's answer is chosen by them).
    public var method = "GET"
    public var requestBody: Data?

    public var description: String { "\(method) \(path) \(headers)" }
}

/// A release bundle and a hotfix bundle for `origin`, and runtime rules, layered in one loader: what the shared table
/// of ``runtimeCases`` is answered from, by URLSession, AsyncHTTPClient and Hummingbird alike.
///
/// - the release bundle carries a block pattern (`*/tracker/*`) that no crawled page met, a page fetched 100 seconds
///   ago (so `Age` is at least 100), and `/override.txt`, which a runtime rule replaces;
/// - the hotfix bundle, first, answers `/hotfix.txt` and nothing else;
/// - the runtime rules block `*/runtime-blocked/*`, answer `/flags.json` with bytes and `/override.txt` with a file.
///
/// With `releaseAsDelta`, the release bundle is mounted as a delta (docs/FORMAT.md §12) over an older release (another
/// page, no `/override.txt`, a page since removed), so the table proves a delta answers as the release itself.
///
/// With `mountRelease`, the release bundle is mounted by it from the path it was written to (a remote bundle's test
/// puts it behind a web server and mounts its URL).
public func runtimeLoader(
    origin: String, folder: TemporaryFolder, policy: OfflinePolicy, options: LoaderOptions = LoaderOptions(), releaseAsDelta: Bool = false,
    mountRelease: ((String) throws -> MountedBundle)? = nil
) throws -> OfflineLoader {
    var release = BundleWriter(options: .init(rules: BundleRules(block: ["*/tracker/*"])))
    release.add(
        .init(
            url: origin + "/", headers: [("content-type", "text/html; charset=utf-8"), ("etag", "\"page-v1\"")], body: .data(Data(samplePage.utf8)),
            fetchedAt: Date().addingTimeInterval(-100)))
    release.add(.init(url: origin + "/override.txt", headers: [("content-type", "text/plain")], body: .data(Data("from the bundle".utf8))))
    try release.write(to: folder.path + "/release.zip")
    var hotfix = BundleWriter()
    hotfix.add(.init(url: origin + "/hotfix.txt", headers: [("content-type", "text/plain")], body: .data(Data("hotfix".utf8))))
    try hotfix.write(to: folder.path + "/hotfix.zip")
    try folder.file("rules/override.txt", "from the rule")
    try folder.file(
        "rules/rules.yml",
        """
        block: ["*/runtime-blocked/*"]
        substitutions:
          - url: \(origin)/override.txt
            file: override.txt
        """)
    var rules = try OfflineRules(contentsOf: folder.path + "/rules/rules.yml")
    rules.substitutions.append(.url(origin + "/flags.json", bytes: Data("{\"on\":true}".utf8), mediaType: "application/json"))
    // An API's declared requests (docs/FORMAT.md §5.4): answers chosen by method and body, by Accept, by a credential.
    var api = BundleWriter()
    for (query, hit) in [("a", "apple"), ("b", "banana")] {
        var entry = RecordedExchange(url: origin + "/api/search", headers: [("content-type", "application/json")], body: .data(Data("[\"\(hit)\"]".utf8)))
        entry.request = RecordedRequest(method: "POST", body: Data("{\"q\":\"\(query)\"}".utf8))
        api.add(entry)
    }
    for (type, text) in [("application/json", "[1]"), ("text/csv", "id\n1\n")] {
        var entry = RecordedExchange(url: origin + "/api/items", headers: [("content-type", type), ("vary", "Accept")], body: .data(Data(text.utf8)))
        entry.request = RecordedRequest(headers: [.init(name: "accept", value: type)], keyHeaders: [.init(name: "accept", value: type)])
        api.add(entry)
    }
    var bearer = RecordedExchange(
        url: origin + "/api/private", headers: [("content-type", "application/json")], body: .data(Data("{\"for\":\"bearers\"}".utf8)))
    bearer.request = RecordedRequest(keyHeaders: [.init(name: "authorization", value: "bearer")])
    api.add(bearer)
    try api.write(to: folder.path + "/api.zip")
    var releaseBundle = try mountRelease?(folder.path + "/release.zip") ?? MountedBundle(path: folder.path + "/release.zip")
    if releaseAsDelta {
        var older = BundleWriter(options: .init(rules: BundleRules(block: ["*/tracker/*"])))
        older.add(
            .init(
                url: origin + "/", headers: [("content-type", "text/html; charset=utf-8"), ("etag", "\"page-v0\"")],
                body: .data(Data((samplePage + "<p>the release before</p>").utf8)), fetchedAt: Date().addingTimeInterval(-1000)))
        older.add(.init(url: origin + "/gone.txt", headers: [("content-type", "text/plain")], body: .data(Data("since removed".utf8))))
        try older.write(to: folder.path + "/older.zip")
        try DeltaBundles.make(old: folder.path + "/older.zip", new: folder.path + "/release.zip", to: folder.path + "/release.delta.zip")
        releaseBundle = try MountedBundle(deltaPath: folder.path + "/release.delta.zip", base: try MountedBundle(path: folder.path + "/older.zip"))
    }
    let bundles = [try MountedBundle(path: folder.path + "/hotfix.zip"), releaseBundle, try MountedBundle(path: folder.path + "/api.zip")]
    return try OfflineLoader(bundles: bundles, policy: policy, options: options).adding(rules)
}

/// The requests of the shared table and what each must get: none of them reaches the network.
public let runtimeCases: [RuntimeCase] = [
    RuntimeCase(path: "/tracker/pixel.gif", headers: [], status: 204, expectedHeaders: [], body: Data()),
    RuntimeCase(path: "/runtime-blocked/a.js", headers: [], status: 204, expectedHeaders: [], body: Data()),
    RuntimeCase(
        path: "/flags.json", headers: [], status: 200, expectedHeaders: [("content-type", "application/json"), ("content-length", "11")],
        body: Data("{\"on\":true}".utf8)),
    RuntimeCase(
        path: "/override.txt", headers: [], status: 200, expectedHeaders: [("content-type", "text/plain; charset=utf-8")], body: Data("from the rule".utf8)),
    RuntimeCase(path: "/hotfix.txt", headers: [], status: 200, expectedHeaders: [("content-type", "text/plain")], body: Data("hotfix".utf8)),
    RuntimeCase(path: "/", headers: [], status: 200, expectedHeaders: [("etag", "\"page-v1\""), ("age", nil)], body: Data(samplePage.utf8)),
    RuntimeCase(path: "/", headers: [("If-None-Match", "\"page-v1\"")], status: 304, expectedHeaders: [("etag", "\"page-v1\"")], body: Data()),
    RuntimeCase(
        path: "/flags.json", headers: [("Range", "bytes=1-4")], status: 206, expectedHeaders: [("content-range", "bytes 1-4/11")],
        body: Data("\"on\"".utf8)),
    // Declared requests: by method and body, by content negotiation, by credential.
    RuntimeCase(
        path: "/api/search", headers: [("Content-Type", "application/json")], status: 200, expectedHeaders: [("content-type", "application/json")],
        body: Data("[\"apple\"]".utf8), method: "POST", requestBody: Data("{\"q\":\"a\"}".utf8)),
    RuntimeCase(
        path: "/api/search", headers: [("Content-Type", "application/json")], status: 200, expectedHeaders: [], body: Data("[\"banana\"]".utf8),
        method: "POST", requestBody: Data("{\"q\":\"b\"}".utf8)),
    RuntimeCase(
        path: "/api/items", headers: [("Accept", "text/csv")], status: 200, expectedHeaders: [("content-type", "text/csv"), ("vary", "Accept")],
        body: Data("id\n1\n".utf8)),
    RuntimeCase(
        path: "/api/items", headers: [("Accept", "text/csv;q=0.1, application/json;q=0.5")], status: 200,
        expectedHeaders: [("content-type", "application/json")], body: Data("[1]".utf8)),
    RuntimeCase(
        path: "/api/private", headers: [("Authorization", "Bearer any-token")], status: 200, expectedHeaders: [],
        body: Data("{\"for\":\"bearers\"}".utf8)),
]

/// Whether a response matches a case; the mismatch in words when not.
public func mismatch(_ wanted: RuntimeCase, status: Int, header: (String) -> String?, body: Data) -> String? {
    if status != wanted.status { return "\(wanted): status \(status), wanted \(wanted.status)" }
    for (name, value) in wanted.expectedHeaders {
        guard let got = header(name) else { return "\(wanted): no \(name)" }
        if let value, got != value { return "\(wanted): \(name) is \(got), wanted \(value)" }
    }
    if wanted.path == "/", wanted.status == 200, let age = header("age").flatMap(Int.init), age < 100 { return "\(wanted): Age \(age) < 100" }
    if body != wanted.body { return "\(wanted): body of \(body.count) bytes differs" }
    return nil
}

/// A bundle whose origin ignores queries (`ignore-query: origin/*`) and whose URLs have request variants: `/private`
/// recorded for a bearer only (`{"owner":"alice"}`, no plain entry), `/items` as a plain GET (`[1]`, JSON) and for
/// `Accept: text/csv` (`a,b\n1,2\n`). A request with a query reaches them through the query-less fallback.
public func writeQuerylessVariantBundle(origin: String, to path: String) throws {
    var writer = BundleWriter(options: .init(rules: BundleRules(ignoreQuery: [origin + "/*"])))
    var bearer = RecordedExchange(url: origin + "/private", headers: [("content-type", "application/json")], body: .data(Data("{\"owner\":\"alice\"}".utf8)))
    bearer.request = RecordedRequest(keyHeaders: [.init(name: "authorization", value: "bearer")])
    writer.add(bearer)
    writer.add(.init(url: origin + "/items", headers: [("content-type", "application/json")], body: .data(Data("[1]".utf8))))
    var csv = RecordedExchange(url: origin + "/items", headers: [("content-type", "text/csv"), ("vary", "Accept")], body: .data(Data("a,b\n1,2\n".utf8)))
    csv.request = RecordedRequest(headers: [.init(name: "accept", value: "text/csv")], keyHeaders: [.init(name: "accept", value: "text/csv")])
    writer.add(csv)
    try writer.write(to: path)
}
