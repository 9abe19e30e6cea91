import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Link resolution on bytes (`Crawler.resolve`), against the Foundation `URL` resolution it replaced, compared by the
/// request key each gives: the crawl must find the same URLs, faster.
@Suite("resolving links on bytes")
struct ResolveTests {
    static let canonicalizer = RequestKeyCanonicalizer()

    /// The resolution `Crawler.resolve` did before, through Foundation's `URL`, kept as the reference.
    static func foundationResolve(_ raw: String, against base: String) -> String? {
        var allowed = CharacterSet()
        for byte in UInt8(0x21)...UInt8(0x7E) where !"\"<>\\^`{|}".utf8.contains(byte) { allowed.insert(Unicode.Scalar(byte)) }
        var text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        text.removeAll { $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard !text.isEmpty, !text.hasPrefix("#") else { return nil }
        let encoded = text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
        guard let baseURL = URL(string: base), let url = URL(string: encoded, relativeTo: baseURL)?.absoluteURL,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else { return nil }
        var absolute = url.absoluteString
        if let hash = absolute.firstIndex(of: "#") { absolute = String(absolute[..<hash]) }
        return absolute
    }

    static func key(_ url: String?) -> String? { url.flatMap { canonicalizer.canonicalize($0) }.flatMap { isWellFormedKey($0) ? $0 : nil } }

    @Test(
        "each form of reference resolves as RFC 3986 §5.2 says",
        arguments: [
            ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"), ("//g", "http://g/"),
            ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"), ("#s", nil), ("g#s", "http://a/b/c/g"), ("g?y#s", "http://a/b/c/g?y"),
            (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("", nil), (".", "http://a/b/c/"), ("./", "http://a/b/c/"),
            ("..", "http://a/b/"), ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../g", "http://a/g"),
            ("../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"),
            ("./../g", "http://a/b/g"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
            // Browsers' ways: spaces and line breaks, backslashes, other schemes, a scheme-relative http link.
            ("  g\n\th  ", "http://a/b/c/gh"), ("g\\h", "http://a/b/c/g/h"), ("\\\\other/x", "http://other/x"), ("mailto:x@a", nil),
            ("javascript:void(0)", nil), ("data:text/plain,x", nil), ("HTTPS://Other:443/x", "https://other/x"), ("http:g", "http://a/b/c/g"),
            ("https:other/x", "https://other/x"), ("../img/bg.png", "http://a/b/img/bg.png"), ("g h", "http://a/b/c/g%20h"),
            ("caf\u{E9}", "http://a/b/c/caf%C3%A9"), ("g?a=1&b", "http://a/b/c/g?a=1&b"),
        ])
    func rfc3986Examples(reference: String, expected: String?) {
        #expect(Self.key(URLReference.resolve(reference, against: "http://a/b/c/d;p?q")) == expected, "\(reference)")
    }

    @Test(
        "what is requested: dot segments removed and unsafe bytes encoded, the rest (query order too) as written",
        arguments: [
            ("../img/bg.png", "http://h/css/site.css", "http://h/img/bg.png"), ("./a/./b/../c", "http://h/x/", "http://h/x/a/c"),
            ("../../../x", "http://h/a/", "http://h/x"), ("a b?q=1 2&a=0", "http://h/", "http://h/a%20b?q=1%202&a=0"),
            ("caf\u{E9}", "http://h/", "http://h/caf%C3%A9"), ("x/..", "http://h/p/", "http://h/p/"), ("?b=2&a=1", "http://h/p", "http://h/p?b=2&a=1"),
            ("/a/%2e%2E/b", "http://h/", "http://h/a/%2e%2E/b"),
        ])
    func requestTargets(reference: String, base: String, expected: String) {
        #expect(URLReference.resolve(reference, against: base) == expected)
    }

    @Test(
        "every link of Debian's python3.11-doc resolves to the key Foundation's URL gave",
        .enabled(
            if: FileManager.default.fileExists(atPath: "/usr/share/doc/python3.11/html/index.html"),
            "python3.11-doc is not installed (apt-get install python3.11-doc)"))
    func realSite() throws {
        let root = "/usr/share/doc/python3.11/html"
        var compared = 0
        var differences = [String]()
        // Every third page (sorted, so the same ones each run): tens of thousands of links, in seconds.
        let pages = (FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".html") }.sorted()
        for (n, path) in pages.enumerated() where n % 3 == 0 {
            guard let data = FileManager.default.contents(atPath: root + "/" + path) else { continue }
            let page = "https://docs.example/py/" + path
            let links = LinkExtractor.html([UInt8](data))
            // Tokens and strings are made only of the tags and attributes link discovery reads: the links are the same
            // as with all of them.
            if n % 30 == 0 { #expect(links == LinkExtractor.html([UInt8](data), filtered: false), "\(path)") }
            let base = links.baseHref.flatMap { URLReference.resolve($0, against: page) } ?? page
            for raw in links.requisites + links.links {
                compared += 1
                let old = Self.key(Self.foundationResolve(raw, against: base))
                let new = Self.key(URLReference.resolve(raw, against: base))
                if old != new { differences.append("\(path): \(raw.debugDescription): \(old ?? "nil") -> \(new ?? "nil")") }
            }
        }
        #expect(compared > 15_000, "only \(compared) links compared")
        #expect(differences.isEmpty, "\(differences.count) of \(compared) differ: \(differences.prefix(20))")
    }
}
