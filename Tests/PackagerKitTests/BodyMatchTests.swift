import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// JSON request bodies matched in their canonical form (docs/FORMAT.md §5.5): a client that sends the recorded
/// document with its members in another order, other whitespace or another request id finds the recorded answer.
@Suite("match: json-body canonical")
struct BodyMatchTests {
    func canonical(_ text: String, ignoring: [String] = []) -> String? {
        let pointers = ignoring.compactMap(CanonicalJSON.tokens(ofPointer:))
        return CanonicalJSON.canonical(Array(text.utf8), ignoring: pointers).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test("the canonical form: members sorted by their bytes, no whitespace, numbers as written, strings escaped only where JSON must")
    func canonicalForm() {
        #expect(canonical(#" { "b" : [1, 2.50, -0e+1] , "a":{"z":true,"y":null} } "#) == #"{"a":{"y":null,"z":true},"b":[1,2.50,-0e+1]}"#)
        // Escapes that spell the same string are one form; what JSON must escape is escaped one way.
        #expect(canonical(#"{"k":"\u0041\/\u00e9\ud83d\ude00"}"#) == "{\"k\":\"A/é😀\"}")
        #expect(canonical("{\"k\":\"a\\u0001\\n\\\"\"}") == "{\"k\":\"a\\u0001\\n\\\"\"}")
        // Names compare by their UTF-8 bytes: "Z" before "a" before "é".
        #expect(canonical(#"{"é":1,"a":2,"Z":3}"#) == #"{"Z":3,"a":2,"é":1}"#)
        // Pointers leave members and elements out; `*` is any one.
        #expect(canonical(#"{"id":"r-1","q":{"w":"x","ts":9}}"#, ignoring: ["/id", "/q/ts"]) == #"{"q":{"w":"x"}}"#)
        #expect(canonical(#"{"rows":[{"a":1,"t":2},{"a":3,"t":4}]}"#, ignoring: ["/rows/*/t"]) == #"{"rows":[{"a":1},{"a":3}]}"#)
        #expect(canonical(#"{"a~b":1,"c/d":2,"e":3}"#, ignoring: ["/a~0b", "/c~1d"]) == #"{"e":3}"#)
        // Not one JSON document: matched by its bytes.
        for text in [#"{"a":1,"a":2}"#, #"{"a":01}"#, #"{"a":1} {}"#, #"{"a":"\ud800"}"#, "{\"a\":\"\u{1}\"}", "[1,]", "nul", "", #"{"a":.5}"#] {
            #expect(canonical(text) == nil, "\(text.debugDescription)")
        }
        #expect(canonical(String(repeating: "[", count: 300) + String(repeating: "]", count: 300)) == nil)
        // Long strings are scanned sixteen bytes at a time: what ends, escapes or is refused is found anywhere in them.
        let long = String(repeating: "0123456789abcdef", count: 3)
        #expect(canonical("{\"k\": \"\(long)\\u0041\(long)\\/\(long)\"}") == "{\"k\":\"\(long)A\(long)/\(long)\"}")
        #expect(canonical("{\"k\": \"\(long)\u{1}\(long)\"}") == nil)
        #expect(canonical("{\"k\": \"\(long)é\(long)\"  }") == "{\"k\":\"\(long)é\(long)\"}")
        #expect(canonical("{\"k\": \"\(long)") == nil)
        #expect(CanonicalJSON.tokens(ofPointer: "a") == nil && CanonicalJSON.tokens(ofPointer: "/a~2") == nil)
    }

    @Test("objects of every size up to 40 members, shuffled, are written with their members in byte order of their names")
    func largeObjectsSorted() throws {
        var state: UInt64 = 7
        for size in 1...40 {
            let names = (0..<size).map { "k\(String($0, radix: 3))-\($0 % 7)" }
            var shuffled = names
            for k in shuffled.indices.reversed() where k > 0 {
                state = state &* 6_364_136_223_846_793_005 &+ 1
                shuffled.swapAt(k, Int((state >> 33) % UInt64(k + 1)))
            }
            let document = "{" + shuffled.map { "\"\($0)\": [\($0.count)]" }.joined(separator: ", ") + "}"
            let expected =
                "{" + names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }.map { "\"\($0)\":[\($0.count)]" }.joined(separator: ",") + "}"
            #expect(canonical(document) == expected, "\(size)")
        }
        // A name twice in a large object: no canonical form.
        #expect(canonical("{" + (0..<20).map { "\"n\($0)\": 1" }.joined(separator: ",") + ", \"n3\": 2}") == nil)
    }

    @Test("random documents written 20 ways each (member order, whitespace, escapes) have one canonical form, which is its own, and parses as the same JSON")
    func randomDocuments() throws {
        var state: UInt64 = 0x5EED
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        indirect enum Value {
            case object([(String, Value)])
            case array([Value])
            case string(String)
            case scalar(String)
        }
        func value(_ depth: Int) -> Value {
            switch next(depth > 3 ? 2 : 4) {
            case 0: return .scalar(["true", "false", "null", "0", "-1.50", "2e+10", "17"][next(7)])
            case 1: return .string(["", "a", "é/ü", "line\nbreak", "quote\"", "tab\t", "😀", "\u{1}"][next(8)])
            case 2:
                var names = Set<String>()
                return .object(
                    (0..<next(5)).compactMap { _ in
                        let name = ["a", "b", "Z", "é", "a b", "~/", "requestId", "_"][next(8)]
                        return names.insert(name).inserted ? (name, value(depth + 1)) : nil
                    })
            default: return .array((0..<next(4)).map { _ in value(depth + 1) })
            }
        }
        func space() -> String { ["", " ", "\n  ", "\t"][next(4)] }
        func string(_ text: String) -> String {
            // Some characters escaped one of JSON's ways, at random.
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += next(2) == 0 ? "\\n" : "\\u000a"
                case "\t": out += "\\t"
                case "/": out += next(2) == 0 ? "/" : "\\/"
                case "\u{1}": out += "\\u0001"
                case "é": out += next(2) == 0 ? "é" : "\\u00e9"
                case "😀": out += next(2) == 0 ? "😀" : "\\ud83d\\ude00"
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        func write(_ value: Value) -> String {
            switch value {
            case .scalar(let text): return text
            case .string(let text): return string(text)
            case .array(let items): return "[" + space() + items.map(write).joined(separator: space() + "," + space()) + space() + "]"
            case .object(let members):
                var shuffled = members
                for k in shuffled.indices.reversed() where k > 0 { shuffled.swapAt(k, next(k + 1)) }
                let written = shuffled.map { member -> String in
                    let name = string(member.0)
                    let inner = write(member.1)
                    return name + space() + ":" + space() + inner
                }
                return "{" + space() + written.joined(separator: "," + space()) + space() + "}"
            }
        }
        for _ in 0..<200 {
            let document = value(0)
            let forms = Set((0..<20).map { _ in canonical(write(document)) })
            #expect(forms.count == 1 && forms.first! != nil, "\(forms)")
            let form = try #require(forms.first ?? nil)
            #expect(canonical(form) == form)
            // Foundation reads the same document from the canonical form and from one written otherwise.
            let read = try JSONSerialization.jsonObject(with: Data(form.utf8), options: [.fragmentsAllowed]) as? NSObject
            let other = try JSONSerialization.jsonObject(with: Data(write(document).utf8), options: [.fragmentsAllowed]) as? NSObject
            #expect(read == other, "\(form)")
        }
    }

    @Test("a secret body recorded under a match rule is given back by the declaration for verify and refresh: its digest is of the canonical form")
    func secretBodyRestored() {
        let url = "http://a.example/login"
        let rules = BundleRules(match: [BundleRules.jsonBodyRule(pattern: url, ignoring: ["/requestId"])])
        var recorded = RecordedRequest(method: "POST")
        recorded.withheldBodyDigest = rules.bodyDigest(canonicalKey: url, body: Data(#"{"password": "s3cret", "user": "ann", "requestId": "r-1"}"#.utf8))
        // The declaration as it stands now: its members in another order, another request id.
        var declared = Declaration.Request(url: url, method: "POST")
        declared.body = Data(#"{"user": "ann", "requestId": "r-2", "password": "s3cret"}"#.utf8)
        #expect(recorded.restoringBody(url: url, declared: [declared], rules: rules).body == declared.body)
        // Without the rule the digests differ: not given back (sent without its body, it would be another request).
        #expect(recorded.restoringBody(url: url, declared: [declared]).body == nil)
    }

    @Test("a secret header for a URL whose key lost a parameter to the rules comes from the declared request for it, not another of its origin")
    func secretHeaderUnderRules() {
        let rules = BundleRules(dropQueryParameters: ["utm_*"], match: [BundleRules.ignoreParamsRule(pattern: "https://api.example/*", names: ["t"])])
        var mine = Declaration.Request(url: "https://api.example/items?utm_source=x&t=1")
        mine.headers = [.init(name: "X-Api-Key", value: "mine", secret: true)]
        var other = Declaration.Request(url: "https://api.example/other")
        other.headers = [.init(name: "X-Api-Key", value: "other", secret: true)]
        let recorded = RecordedRequest(method: "GET", headers: [.init(name: "x-api-key", value: nil)])
        #expect(recorded.headersToSend(url: "https://api.example/items", declared: [other, mine], rules: rules).map(\.1) == ["mine"])
        // Without the rules, the URLs differ and the origin's first request gives its value.
        #expect(recorded.headersToSend(url: "https://api.example/items", declared: [other, mine]).map(\.1) == ["other"])
    }

    @Test("what the client writes itself (Host, Content-Length, the connection's fields), recorded by its name alone, is not missed as a secret")
    func senderFieldsAreNotSent() {
        // As imports before this kept them: by their names alone, a secret's form.
        let recorded = RecordedRequest(
            method: "POST",
            headers: [
                .init(name: "host", value: ""), .init(name: "Content-Length", value: ""), .init(name: "connection", value: nil),
                .init(name: "content-type", value: "application/json"), .init(name: "x-api-key", value: nil),
            ])
        let sending = recorded.sending(url: "https://api.example/items", declared: [])
        #expect(sending.headers.map(\.0) == ["content-type"])
        #expect(sending.missing == ["x-api-key"], "a real secret is still missed")
        // A Host a declaration gave a value (a virtual host on an address) is sent as given.
        let virtual = RecordedRequest(method: "GET", headers: [.init(name: "host", value: "api.internal")])
        #expect(virtual.sending(url: "http://10.0.0.5/api", declared: []).headers.map(\.1) == ["api.internal"])
    }

    @Test("a form body's canonical form: decoded, ignored names left out, sorted by name with one name's values in order, encoded one way")
    func canonicalFormBody() {
        func form(_ text: String, ignoring: [String] = []) -> String? {
            CanonicalForm.canonical(Array(text.utf8), ignoring: Set(ignoring.map { Array($0.utf8) })).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(form("q=rain+today&b=2&a=1&b=1") == "a=1&b=2&b=1&q=rain%20today")
        #expect(form("q=rain%20today&a=%31&csrf=x9&&flag", ignoring: ["csrf"]) == "a=1&flag&q=rain%20today")
        #expect(form("n=%C3%A9&m=%e2%82%ac") == "m=%E2%82%AC&n=%C3%A9")
        #expect(form("a=%zz") == nil && form("a=%4") == nil)
        let rules = BundleRules(match: [BundleRules.formBodyRule(pattern: "http://a/login", ignoring: ["csrf_token"])])
        #expect(rules.bodyForMatching(canonicalKey: "http://a/login", body: Data("user=x&csrf_token=1".utf8)) == Data("user=x".utf8))
        #expect(
            rules.bodyDigest(canonicalKey: "http://a/login", body: Data("b=2&a=1".utf8))
                == rules.bodyDigest(canonicalKey: "http://a/login", body: Data("a=1&b=2".utf8)))
        // Not under the rule's pattern: as sent.
        #expect(rules.bodyForMatching(canonicalKey: "http://a/other", body: Data("b=2&a=1".utf8)) == Data("b=2&a=1".utf8))
    }

    @Test("a rule this reader does not know is refused, never ignored; the rule round-trips through index.bin")
    func unknownFormRefused() throws {
        #expect(throws: BundleError.self) { try BundleRules(decoding: Array("match http://a/* xml-body\n".utf8)) }
        #expect(throws: BundleError.self) { try BundleRules(decoding: Array("match http://a/* json-body id\n".utf8)) }
        let rules = BundleRules(match: [BundleRules.jsonBodyRule(pattern: "http://a/search*", ignoring: ["/request id", "/50%"])])
        #expect(rules.match == ["http://a/search* json-body /request%20id /50%25"])
        let read = try BundleRules(decoding: try rules.encoded())
        #expect(read == rules)
        #expect(BundleRules.bodyMatch(read.match[0])?.ignoring == [["request id"], ["50%"]])
    }

    static func declaration(_ base: String) -> String {
        """
        output: api.zip
        robots: false
        requests:
          - url: \(base)/api/search
            method: POST
            headers: {Content-Type: application/json}
            body: '{"q": "a", "page": {"size": 10, "from": 0}, "requestId": "r-1"}'
            match: {json-body: canonical, ignore: [/requestId]}
          - url: \(base)/api/plain
            method: POST
            body: '{"q": "a", "n": 1}'
        match:
          - {url: "\(base)/api/other*", json-body: canonical}
        """
    }

    @Test("build records the canonical digest; a client's reordered body, other whitespace or request id finds the answer; another value misses")
    func endToEnd() async throws {
        try await withOrigin { origin in
            origin.route("/api/search") { _ in .text("{\"hits\": [\"apple\"]}", type: "application/json") }
            origin.route("/api/plain") { _ in .text("{\"plain\": true}", type: "application/json") }
            let folder = try TemporaryFolder()
            try folder.file("packager.yml", Self.declaration(origin.base))
            let built = try await run(packagerExecutable, ["build", "packager.yml", "--fresh"], in: folder.path)
            #expect(built.status == 0, "\(built.output)")
            let bundle = try MountedBundle(path: folder.path + "/api.zip")
            // The declaration's own rules first, then each request's (its URL, canonical).
            #expect(bundle.rules.match == ["\(origin.base)/api/other* json-body", "\(origin.base)/api/search json-body /requestId"], "\(bundle.rules)")
            let loader = OfflineLoader(bundles: [bundle], policy: .bundleOnly)
            func post(_ path: String, _ body: String) -> BundleResponse? {
                var headers = HTTPFields()
                headers[.contentType] = "application/json"
                return loader.response(for: BundleRequest(method: "POST", url: origin.base + path, headers: headers, body: Data(body.utf8)))
            }
            // The same document, written otherwise, with another request id.
            let reordered = #"{"requestId":"r-77","page":{"from":0,"size":10},"q":"a"}"#
            #expect(try post("/api/search", reordered)?.bodyData() == Data("{\"hits\": [\"apple\"]}".utf8))
            #expect(post("/api/search", "{\n  \"q\" : \"a\",\n  \"page\": {\"size\": 10, \"from\": 0}\n}") != nil)
            // Another value is another request: a miss, said against the recorded one.
            #expect(post("/api/search", #"{"q":"b","page":{"size":10,"from":0}}"#) == nil)
            let why = try #require(loader.explainMiss(BundleRequest(method: "POST", url: origin.base + "/api/search", body: Data(#"{"q":"b"}"#.utf8))))
            #expect(why.kind == .body, "\(why)")
            // Said by JSON pointer against the recorded body (the ignored request id is not a difference).
            #expect(why.differences == ["body /page: absent, recorded {\"from\":0,\"size\":10}", "body /q: \"b\", recorded \"a\""], "\(why)")
            // Without a rule, bodies are matched as sent.
            #expect(post("/api/plain", #"{"q": "a", "n": 1}"#) != nil)
            #expect(post("/api/plain", #"{"n": 1, "q": "a"}"#) == nil)
            // check reads every body; verify sends the recorded request again and finds it fresh.
            #expect(try await run(packagerExecutable, ["check", folder.path + "/api.zip"]).status == 0)
            let verify = try await run(packagerExecutable, ["verify", folder.path + "/api.zip", "--allow-private-addresses", "--resend-unsafe"])
            #expect(verify.status == 0, "\(verify.output)")
            #expect(!verify.output.contains("cannot be sent again"), "\(verify.output)")
        }
    }

    @Test("wrong rules are said with their line; two requests one rule makes one are refused, naming both lines")
    func wrongRules() throws {
        func refusal(_ text: String) -> String {
            do {
                _ = try DeclarationParser().parse(text)
                return "accepted"
            } catch { return "\(error)" }
        }
        let head = "requests:\n  - url: http://a.example/s\n    method: POST\n    body: '{\"q\": 1, \"r\": 2}'\n"
        #expect(refusal(head + "    match: {json-body: sorted}\n").contains("json-body takes 'canonical', not 'sorted'"))
        #expect(refusal(head + "    match: {json-body: canonical, ignore: [requestId]}\n").contains(":5:"))
        #expect(refusal(head + "match:\n  - {json-body: canonical}\n").contains("a match rule needs a url"))
        #expect(refusal(head + "    match: {url: 'http://a.example/*', json-body: canonical}\n").contains("url"))
        #expect(refusal(head + "    match: {json-body: canonical, form-body: canonical}\n").contains("not json-body and form-body"))
        #expect(refusal(head + "    match: {form-body: canonical, ignore: [csrf]}\n") == "accepted")
        let parsed = try DeclarationParser().parse(head + "match:\n  - {url: 'http://a.example/login', form-body: canonical, ignore: [csrf token]}\n")
        #expect(parsed.bundleRules.match == ["http://a.example/login form-body csrf%20token"], "\(parsed.bundleRules.match)")
        let twice = head + "    match: {json-body: canonical}\n  - url: http://a.example/s\n    method: POST\n    body: '{\"r\": 2, \"q\": 1}'\n"
        let said = refusal(twice)
        #expect(said.contains(":6:") && said.contains("line 2") && said.contains("one document under the match rule"), "\(said)")
    }
}
