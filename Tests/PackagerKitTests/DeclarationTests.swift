import Foundation
import TestSupport
import Testing

@testable import PackagerKit

@Suite("declarations: every key read, every mistake located")
struct DeclarationTests {
    let parser = DeclarationParser(environment: ["TOKEN": "abc123"])

    func error(_ yaml: String) -> String {
        do {
            _ = try parser.parse(yaml, file: "site.yml")
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test("the starter template parses, with its defaults")
    func starter() throws {
        let d = try parser.parse(StarterDeclaration.text)
        #expect(d.seeds == ["https://docs.example.com/"])
        #expect(d.scope.maxBytes == 2 << 30)
        #expect(d.scope.maxDepth == 10)
        #expect(d.concurrency.total == 8 && d.concurrency.perHost == 4)
        #expect(d.retries.backoff == 0.5 && d.retries.maxBackoff == 30)
        // Its substitutions are examples, commented out: a file they named would not exist, and build would stop at once.
        #expect(d.substitutions.isEmpty && d.substitutionProblem() == nil)
        #expect(d.dropQueryParameters == ["utm_*", "fbclid", "gclid"])
    }

    @Test("every key is read")
    func everyKey() throws {
        let d = try parser.parse(
            """
            output: out.zip
            seeds: https://a.example/
            urls: [https://b.example/x.json]
            sitemaps: [https://a.example/sitemap.xml]
            scope: {hosts: [A.example, "*.cdn.example"], include: ["*/docs/*"], exclude: ["*.pdf"], max-depth: 2, max-resources: 50, max-bytes: 10MB, requisites-from-any-host: true}
            robots: false
            user-agent: bot/1
            headers: {Authorization: "Bearer ${TOKEN}", X-Price: "$$5"}
            concurrency: 3
            timeouts: {connect: 2s, request: 1m}
            retries: {attempts: 0, backoff: 250ms, max-backoff: 5}
            substitutions: [{prefix: "https://a.example/static/", folder: static}]
            block: "*/ads/*"
            drop-query-parameters: [v]
            content-encoding: encoded
            max-errors: 4
            """, baseDirectory: "/srv/site")
        #expect(d.outputPath == "/srv/site/out.zip")
        #expect(d.seeds == ["https://a.example/"] && d.urls == ["https://b.example/x.json"] && d.sitemaps.count == 1)
        #expect(d.scope.hosts == ["a.example", "*.cdn.example"] && d.scope.maxDepth == 2 && d.scope.maxResources == 50 && d.scope.maxBytes == 10_000_000)
        #expect(d.scope.requisitesFromAnyHost && !d.respectRobots && d.userAgent == "bot/1")
        #expect(
            d.headers == [
                .init(name: "Authorization", value: "Bearer abc123", secret: true, secretParts: ["abc123"]), .init(name: "X-Price", value: "$5", secret: false),
            ])
        #expect(d.secrets == ["Bearer abc123"])
        #expect(d.concurrency.total == 3 && d.concurrency.perHost == 3)
        #expect(d.timeouts.connect == 2 && d.timeouts.request == 60)
        #expect(d.retries.attempts == 0 && d.retries.backoff == 0.25 && d.retries.maxBackoff == 5)
        #expect(d.substitutions.first?.match == .prefix("https://a.example/static/", folder: "static"))
        #expect(d.block == ["*/ads/*"] && d.dropQueryParameters == ["v"] && d.contentEncoding == .encoded && d.maxErrors == 4)
    }

    @Test(
        "mistakes name the file, line and column, and what is wrong",
        arguments: [
            ("seeds: [https://a.example/]\nscope:\n  max-dept: 3\n", "site.yml:3:3: unknown key 'max-dept' in scope; did you mean 'max-depth'?"),
            ("seed: https://a.example/\n", "site.yml:1:1: unknown key 'seed' in the declaration; did you mean 'seeds'?"),
            ("seeds: [https://a.example/]\nconcurrency: {total: zero}\n", "site.yml:2:22: concurrency.total must be a whole number"),
            ("seeds: [ftp://a.example/]\n", "site.yml:1:9: seeds item 'ftp://a.example/' is not an absolute http or https URL"),
            (
                "seeds: [\"https://a.example/a b\"]\n",
                "site.yml:1:9: seeds item 'https://a.example/a b' holds a space, which a URL cannot (write a space in a path as %20)"
            ),
            // A list item indented one space too far continues the item above: two URLs run together, not one encoded.
            (
                "seeds:\n  - https://a.example/a\n   - https://a.example/b\n",
                "site.yml:2:5: seeds item 'https://a.example/a - https://a.example/b' holds a space, which a URL cannot (write a space in a path as %20)"
            ),
            (
                "seeds: [https://a.example/]\nheaders:\n  Authorization: Bearer ${MISSING}\n",
                "site.yml:3:18: environment variable MISSING is not set (it is used in a header)"
            ),
            ("seeds: [https://a.example/]\ntimeouts: {request: soon}\n", "site.yml:2:21: timeouts.request must be a duration such as 10s or 500ms, not 'soon'"),
            (
                "seeds: [https://a.example/]\nsubstitutions:\n  - url: https://a.example/x\n",
                "site.yml:3:5: a substitution needs either 'url' and 'file', or 'prefix' and 'folder'"
            ),
            ("seeds: [https://a.example/\n", "site.yml:2:1: invalid YAML"),
            ("output: x.zip\n", "site.yml:1:1: nothing to fetch: give at least one of 'seeds', 'urls', 'sitemaps' or 'requests'"),
            (
                "seeds: [https://a.example/]\nscope: {hosts: [a.example, https://b.example/docs/]}\n",
                "site.yml:2:28: scope.hosts item 'https://b.example/docs/' is not an origin or host name: an origin has no path, query or user name"
            ),
            (
                "seeds: [https://a.example/]\nscope: {hosts: [\"a.example:99999\"]}\n",
                "site.yml:2:17: scope.hosts item 'a.example:99999' is not an origin or host name: the port must be a number from 1 to 65535"
            ),
            (
                "seeds: [https://a.example/]\nheaders:\n  X-Key: {value: k, origins: [\"ftp://a.example\"]}\n",
                "site.yml:3:31: header 'X-Key' origins item 'ftp://a.example' is not an origin or host name: the scheme must be http or https"
            ),
            (
                "seeds: [https://a.example/]\nseeds: [https://b.example/]\n",
                "site.yml:2:1: 'seeds' is given again: line 1 gives it already, in the same mapping; give each key once"
            ),
            (
                "seeds: [https://a.example/]\nscope:\n  max-depth: 2\n  # a comment\n\n  max-pages: 10\n  \"max-depth\": 3\n",
                "site.yml:7:3: 'max-depth' is given again: line 3 gives it already"
            ),
            (
                "requests:\n  - url: https://a.example/a\n    method: POST\n  - url: https://a.example/b\n    body: x\n    method: PUT\n    url: https://a.example/c\n",
                "site.yml:7:5: 'url' is given again: line 4 gives it already"
            ),
            (
                "requests:\n  - {url: https://a.example/a, url: https://a.example/b}\n  - url: https://a.example/c\n",
                "site.yml:2:6: 'url' given more than once in the mapping this key belongs to"
            ),
            (
                "seeds: [https://a.example/]\nscope: {max-depth: 2, max-pages: 1, max-depth: 3}\n",
                "site.yml:2:9: 'max-depth' given more than once in the mapping this key belongs to"
            ),
        ])
    func locatedErrors(yaml: String, expected: String) {
        let message = error(yaml)
        #expect(message.hasPrefix(expected), "got: \(message)")
    }

    @Test("browser behaviours: each item one action, in order, with the pages it runs on")
    func browserBehaviours() throws {
        let d = try parser.parse(
            """
            seeds: [https://a.example/]
            browser:
              enabled: true
              generic-behaviors: false
              behaviors:
                - type: "#search-input"
                  text: HashMap
                - click: "button.more"
                  pages: "*/api/*"
                - wait: 500
                - script: "document.title"
            """)
        #expect(d.browser.enabled && !d.browser.genericBehaviors)
        #expect(
            d.browser.behaviors == [
                .init(action: .type(selector: "#search-input", text: "HashMap")), .init(pages: "*/api/*", action: .click(selector: "button.more")),
                .init(action: .wait(milliseconds: 500)), .init(action: .script("document.title")),
            ])
        #expect(d.browser.behaviors[1].applies(to: "https://A.example/API/x.html") && !d.browser.behaviors[1].applies(to: "https://a.example/"))
        let visit = PageVisit.Behaviours(d.browser)
        #expect(visit.waits(on: "https://a.example/") == 500)
        // Selectors and text reach the page as string literals, whatever they hold; the generic steps are left out.
        let script = visit.script(for: "https://a.example/api/x")
        #expect(script.contains(##"all("#search-input")"##) && script.contains(#"all("button.more")"#) && !script.contains("details:not([open])"))
        #expect(!visit.script(for: "https://a.example/").contains("button.more"))
        let hostile = PageVisit.Behaviours(declared: [.init(action: .type(selector: "x", text: "\"); alert(1); (\""))]).script(for: "https://a.example/")
        #expect(hostile.contains(#"type(el, "\"); alert(1); (\"")"#), "\(hostile)")
    }

    @Test(
        "request mistakes are located and say what is wrong",
        arguments: [
            ("requests:\n  - url: https://a.example/x\n    method: P0ST\n", "site.yml:3:13: 'P0ST' is not an HTTP method"),
            ("requests:\n  - url: https://a.example/x\n    method: HEAD\n", "site.yml:3:13: a HEAD is answered from its GET: declare the GET"),
            ("requests:\n  - url: https://a.example/x\n    body: a\n    body-file: b\n", "site.yml:2:5: a request has a body or a body-file, not both"),
            ("requests:\n  - url: https://a.example/x\n    body-file: nowhere.json\n", "site.yml:3:16: cannot read the body-file 'nowhere.json'"),
            ("requests:\n  - url: https://a.example/x\n    volatile: [query_ms]\n", "site.yml:3:16: 'query_ms' is not a JSON pointer: it must start with '/'"),
            ("requests:\n  - url: https://a.example/x\n    volatile: [/a~2]\n", "site.yml:3:16: '/a~2' is not a JSON pointer: '~' must be followed by 0 or 1"),
            ("requests:\n  - url: https://a.example/x\n    paginate: {json: next}\n", "site.yml:3:22: 'next' is not a JSON pointer"),
            ("requests:\n  - url: https://a.example/x\n    paginate: {link: true, header: X}\n", "site.yml:3:28: paginate takes one of link, json and header"),
            ("requests:\n  - url: https://a.example/x\n    status: 99\n", "site.yml:3:13: a request's status must be at least 200"),
            (
                "requests:\n  - url: https://a.example/x\n    headers: {X-Key: \"${TOKEN}\"}\n    vary: [X-Key]\n",
                "site.yml:4:12: header 'X-Key' holds a secret: it cannot choose an answer"
            ),
            ("requests:\n  - https://a.example/x\n  - https://a.example/x\n", "site.yml:3: this request is the same as the one on line 2"),
            ("requests:\n  - url: ftp://a.example/x\n", "site.yml:2:10: request url 'ftp://a.example/x' is not an absolute http or https URL"),
            ("requests:\n  - method: POST\n", "site.yml:2:5: a request needs a url"),
            ("requests:\n  - url: https://a.example/x\n    metod: POST\n", "site.yml:3:5: unknown key 'metod' in a request; did you mean 'method'?"),
        ])
    func requestErrors(yaml: String, expected: String) {
        let message = error(yaml)
        #expect(message.hasPrefix(expected), "got: \(message)")
    }

    @Test("a request body over the 1 MiB that readers match on is refused, named")
    func oversizedBody() throws {
        let folder = try TemporaryFolder()
        try folder.file("big.json", String(repeating: "x", count: (1 << 20) + 1))
        do {
            let yaml = "requests:\n  - url: https://a.example/x\n    method: POST\n    body-file: big.json\n"
            _ = try parser.parse(yaml, file: "site.yml", baseDirectory: folder.path)
            Issue.record("no error")
        } catch {
            #expect("\(error)".contains("site.yml:4:16: the request body is 1048577 bytes, over the 1048576 bytes"), "\(error)")
        }
    }

    @Test(
        "browser behaviour mistakes are located and say what is wrong",
        arguments: [
            (
                "seeds: [https://a.example/]\nbrowser:\n  behaviors:\n    - click: a\n      wait: 5\n",
                "site.yml:4:7: an item of browser.behaviors takes one action, click, type, wait or script, not click and wait"
            ),
            (
                "seeds: [https://a.example/]\nbrowser:\n  behaviors:\n    - type: \"#q\"\n",
                "site.yml:4:7: type needs text: what is typed into the elements it selects"
            ),
            (
                "seeds: [https://a.example/]\nbrowser:\n  behaviors:\n    - wait: 60000\n",
                "site.yml:4:13: browser.behaviors wait is at most 10000 milliseconds"
            ),
            (
                "seeds: [https://a.example/]\nbrowser:\n  behaviors:\n    - clik: a\n",
                "site.yml:4:7: unknown key 'clik' in an item of browser.behaviors; did you mean 'click'?"
            ),
            ("seeds: [https://a.example/]\nbrowser:\n  behaviors: {click: a}\n", "site.yml:3:14: browser.behaviors must be a list of steps"),
        ])
    func behaviourErrors(yaml: String, expected: String) {
        let message = error(yaml)
        #expect(message.hasPrefix(expected), "got: \(message)")
    }
}
