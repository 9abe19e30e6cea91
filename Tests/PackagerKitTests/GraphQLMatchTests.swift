import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// GraphQL request bodies matched in their canonical form, and query parameters a rule leaves out of the keys
/// (docs/FORMAT.md §4.6, §5.5): a client that formats its query otherwise, or adds a cache-busting parameter, finds
/// the recorded answer.
@Suite("match: graphql canonical and ignore-params")
struct GraphQLMatchTests {
    func document(_ text: String) -> String? {
        CanonicalGraphQL.document(Array(text.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    func body(_ text: String, ignoring: [String] = []) -> String? {
        CanonicalGraphQL.canonical(Array(text.utf8), ignoring: ignoring.compactMap(CanonicalJSON.tokens(ofPointer:))).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    @Test("a GraphQL document's canonical text: its tokens, without comments, commas or line breaks, a space only between two names or numbers")
    func canonicalDocument() {
        let written = """
            # the countries page
            query Subdivisions($code: String!, $first: Int = 10) {
              subdivisions(filter: {code: {eq: $code}}, first: $first) {
                nodes { code, name   type }
                ... on Page { total }
              }
            }
            """
        let canonical =
            #"query Subdivisions($code:String!,$first:Int=10){subdivisions(filter:{code:{eq:$code}}first:$first){nodes{code name type}...on Page{total}}}"#
            .replacingOccurrences(of: ",", with: "")
        #expect(document(written) == canonical)
        #expect(
            document(
                "query Subdivisions($code:String! $first:Int=10){subdivisions(filter:{code:{eq:$code}},first:$first){nodes{code,name,type},...on Page{total}}}")
                == canonical)
        // Strings are their values: escapes, \u{…} and block strings that spell one value are one form.
        #expect(document(#"{ f(a: "caf\u00e9", b: "\u{1F600}", c: 1.5e3, d: -0) }"#) == "{f(a:\"café\"b:\"😀\"c:1.5e3 d:-0)}")
        #expect(document("{ f(a: \"\"\"\n    two\n      lines\n  \"\"\") }") == "{f(a:\"two\\n  lines\")}")
        #expect(document("{ f(a: \"two\\n  lines\") }") == "{f(a:\"two\\n  lines\")}")
        #expect(document("{ f(a: \"\"\"say \\\"\"\" \"\"\") }") == "{f(a:\"say \\\"\\\"\\\" \")}")
        // Field order is the answer's order: another order is another query.
        #expect(document("{ a b }") != document("{ b a }"))
        // Not GraphQL: matched by the bytes.
        for text in [
            "{ f(a: \"open) }", "{ f }}", "{ f(a: 01) }", "{ f(a: 1.) }", "{ f(a: \"\\q\") }", "{ a ; }", "", "  # only a comment", "{ f(a: 1x) }",
            "{ f(a: \"\n\") }", "{ a .. b }",
        ] {
            #expect(document(text) == nil, "\(text.debugDescription)")
        }
    }

    @Test("a GraphQL request's canonical body: the query's tokens, the JSON canonical, null and empty members left out, pointers ignored")
    func canonicalBody() {
        let recorded = #"{"query":"query Q($c: String) { s(code: $c) { name } }","variables":{"c":"FR-75","requestId":"r-1"},"operationName":"Q"}"#
        let sent = """
            {
              "operationName": "Q",
              "variables": {"requestId": "r-99", "c": "FR-75"},
              "query": "query Q(\\n  $c: String\\n) {\\n  s(code: $c) {\\n    name\\n  }\\n}\\n",
              "extensions": null
            }
            """
        let expected = #"{"operationName":"Q","query":"query Q($c:String){s(code:$c){name}}","variables":{"c":"FR-75"}}"#
        #expect(body(recorded, ignoring: ["/variables/requestId"]) == expected)
        #expect(body(sent, ignoring: ["/variables/requestId"]) == expected)
        // Absent, null and empty variables are one form; so are an absent and a null operationName.
        #expect(body(#"{"query":"{ a }","variables":{},"operationName":null}"#) == #"{"query":"{a}"}"#)
        #expect(body(#"{"query":"{a}"}"#) == #"{"query":"{a}"}"#)
        // A batch: each operation canonical, in order.
        #expect(body(#"[{"query":"{ a }"},{"query":"{ b, c }"}]"#) == #"[{"query":"{a}"},{"query":"{b c}"}]"#)
        // A query that is not GraphQL, no query, or not an object: the rule leaves the body as sent.
        for text in [#"{"query":"{ a "}"#, #"{"variables":{}}"#, #"{"query":1}"#, #"[]"#, "\"{a}\"", "{a}"] {
            #expect(body(text) == nil, "\(text.debugDescription)")
        }
        let rules = BundleRules(match: [BundleRules.jsonBodyRule(pattern: "http://a/graphql", form: .graphql, ignoring: [])])
        #expect(rules.match == ["http://a/graphql graphql"])
        #expect(
            rules.bodyDigest(canonicalKey: "http://a/graphql", body: Data(#"{"query":"{ a }"}"#.utf8))
                == rules.bodyDigest(canonicalKey: "http://a/graphql", body: Data(#"{"query":"{a}"}"#.utf8)))
        #expect(
            rules.bodyDigest(canonicalKey: "http://a/graphql", body: Data(#"{"query":"{ a }"}"#.utf8))
                != rules.bodyDigest(canonicalKey: "http://a/graphql", body: Data(#"{"query":"{ b }"}"#.utf8)))
    }

    @Test("ignore-params: the names leave the keys of the URLs the rule covers, nowhere else; the rule round-trips through index.bin")
    func ignoredParameters() throws {
        let rules = BundleRules(
            dropQueryParameters: ["utm_*"], match: [BundleRules.ignoreParamsRule(pattern: "http://a/app/*", names: ["t", "_", "cb*"])])
        #expect(rules.match == ["http://a/app/* ignore-params t _ cb*"])
        let read = try BundleRules(decoding: try rules.encoded())
        #expect(read == rules)
        let keys = RequestKeyCanonicalizer(rules: read)
        #expect(keys.canonicalize("http://a/app/main.js?v=3&t=1733000&_=9&cbx=1&utm_source=x") == "http://a/app/main.js?v=3")
        #expect(keys.canonicalize("http://A/app/Main.js?T=1") == "http://a/app/Main.js")
        // Names are compared decoded: `%5F` is `_`.
        #expect(keys.canonicalize("http://a/app/x?%5F=1&q=2") == "http://a/app/x?q=2")
        // Outside the pattern the parameters count.
        #expect(keys.canonicalize("http://a/api/x?t=1&utm_source=y") == "http://a/api/x?t=1")
        // A rule without names, or another form, is refused by a reader.
        #expect(throws: BundleError.self) { try BundleRules(decoding: Array("match http://a/* ignore-params\n".utf8)) }
        #expect(throws: BundleError.self) { try BundleRules(decoding: Array("match http://a/* ignore-params t  \n".utf8)) }
    }

    @Test("a crawl with a cache-busting parameter in its links fetches each file once; the runtime answers any value of it")
    func cacheBusting() async throws {
        try await withOrigin { origin in
            origin.set(
                "/",
                .text(
                    #"<!doctype html><title>app</title><script src="/app.js?v=2&t=1733000001"></script><a href="/data.json?_=1">data</a><a href="/data.json?_=2">again</a><a href="/list.html?page=2">2</a>"#,
                    type: "text/html"))
            // The crawl asks for these URLs without the ignored parameters, as it does without drop-query's.
            origin.set("/app.js?v=2", .text("console.log('v2')", type: "text/javascript"))
            origin.set("/data.json", .text(#"{"n": 1}"#, type: "application/json"))
            origin.set("/list.html?page=2", .text("<p>page 2</p>", type: "text/html"))
            let folder = try TemporaryFolder()
            try folder.file(
                "packager.yml",
                """
                seeds: [\(origin.base)/]
                output: app.zip
                robots: false
                ignore-query: none
                match:
                  - {url: "\(origin.base)/*", ignore-params: [t, _]}
                """)
            let built = try await run(packagerExecutable, ["build", "packager.yml", "--fresh"], in: folder.path)
            #expect(built.status == 0, "\(built.output)")
            // The two links to data.json are one URL: fetched once.
            #expect(origin.count("/data.json") == 1 && origin.requests.allSatisfy { !$0.path.contains("t=") && !$0.path.contains("_=") })
            let bundle = try MountedBundle(path: folder.path + "/app.zip")
            #expect(bundle.rules.match == ["\(origin.base)/* ignore-params t _"])
            let loader = OfflineLoader(bundles: [bundle], policy: .bundleOnly)
            func get(_ path: String) -> BundleResponse? { loader.response(for: BundleRequest(method: "GET", url: origin.base + path)) }
            // Any value of the ignored parameters, or none, finds the recorded answer; the other parameters still count.
            #expect(try get("/app.js?t=1733999999&v=2")?.bodyData() == Data("console.log('v2')".utf8))
            #expect(get("/app.js?v=2") != nil)
            #expect(try get("/data.json?_=1733000555")?.bodyData() == Data(#"{"n": 1}"#.utf8))
            #expect(get("/app.js?v=3&t=1") == nil)
            #expect(get("/list.html?page=2&t=5") != nil && get("/list.html?page=3") == nil)
            #expect(try await run(packagerExecutable, ["check", folder.path + "/app.zip"]).status == 0)
            // packager serve answers the same way.
            let (serve, url) = try await startServe(folder.path + "/app.zip")
            let served = try? await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/app.js?v=2&t=42"])
            serve.terminate()
            try await offPool { serve.waitUntilExit() }
            #expect(served?.output == "200", "\(served?.output ?? "-")")
        }
    }

    @Test("wrong rules are said with their line; two requests that differ only in an ignored parameter are refused, naming both")
    func wrongRules() throws {
        func refusal(_ text: String) -> String {
            do {
                _ = try DeclarationParser().parse(text)
                return "accepted"
            } catch { return "\(error)" }
        }
        let head = "requests:\n  - url: http://a.example/graphql\n    method: POST\n    body: '{\"query\": \"{ a }\"}'\n"
        #expect(refusal(head + "    match: {graphql: pretty}\n").contains("graphql takes 'canonical', not 'pretty'"))
        #expect(refusal(head + "    match: {graphql: canonical, ignore: [variables]}\n").contains(":5:"))
        #expect(refusal(head + "    match: {graphql: canonical, json-body: canonical}\n").contains("not json-body and graphql"))
        #expect(refusal(head + "    match: {ignore: [/a]}\n").contains("ignore names what a body form leaves out"))
        #expect(refusal(head + "    match: {ignore-params: []}\n").contains("at least one"))
        #expect(refusal(head + "    match: {xml-body: canonical}\n").contains(":5:"))
        #expect(refusal(head + "    match: {graphql: canonical, ignore: [/variables/requestId], ignore-params: [t]}\n") == "accepted")
        // A body its rule cannot read is matched by its bytes, and the declaration says so with its line.
        let unread = try DeclarationParser().parse(
            "requests:\n  - url: http://a.example/graphql\n    method: POST\n    body: '{\"query\": \"{ a \"}'\n    match: {graphql: canonical}\n")
        #expect(unread.warnings.contains { $0.contains(":2:") && $0.contains("not a GraphQL request whose query reads") }, "\(unread.warnings)")
        let parsed = try DeclarationParser().parse(head + "    match: {graphql: canonical, ignore-params: [t]}\n")
        #expect(parsed.bundleRules.match == ["http://a.example/graphql graphql", "http://a.example/graphql ignore-params t"], "\(parsed.bundleRules.match)")
        let twice = """
            requests:
              - http://a.example/feed?t=1
              - http://a.example/feed?t=2
            match:
              - {url: "http://a.example/*", ignore-params: [t]}
            """
        let said = refusal(twice)
        #expect(said.contains(":3:") && said.contains("line 2") && said.contains("ignore-params"), "\(said)")
    }
}
