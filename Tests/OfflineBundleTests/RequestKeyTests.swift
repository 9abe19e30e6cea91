import Testing

@testable import OfflineBundle

@Suite("request keys")
struct RequestKeyTests {
    static let cases: [(String, String?)] = [
        ("https://example.com", "https://example.com/"),
        ("HTTPS://Example.COM:443/a/b", "https://example.com/a/b"),
        ("http://example.com:80/", "http://example.com/"),
        ("http://example.com:8080/", "http://example.com:8080/"),
        ("https://example.com:80/", "https://example.com:80/"),
        ("https://user:secret@example.com/x", "https://example.com/x"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/a/b/..", "https://example.com/a/"),
        ("https://example.com/%7Euser/%41%2f", "https://example.com/~user/A%2F"),
        ("https://example.com/a b", "https://example.com/a%20b"),
        ("https://example.com/caf\u{e9}", "https://example.com/caf%C3%A9"),
        ("https://example.com/p?b=2&a=1", "https://example.com/p?a=1&b=2"),
        ("https://example.com/p?a=2&a=1", "https://example.com/p?a=1&a=2"),
        ("https://example.com/p?", "https://example.com/p"),
        ("https://example.com/p?&&x=1&", "https://example.com/p?x=1"),
        ("https://example.com/p#section", "https://example.com/p"),
        ("https://example.com/p?q=1#frag", "https://example.com/p?q=1"),
        ("https://[2001:DB8::1]:443/", "https://[2001:db8::1]/"),
        ("  https://example.com/trim  ", "https://example.com/trim"),
        ("/relative/path", nil),
        ("example.com/no-scheme", nil),
        ("mailto:someone@example.com", nil),
        ("https:///no-host", nil),
        ("http://example.com:abc/", nil),
    ]

    @Test("canonical forms", arguments: cases)
    func canonical(input: String, expected: String?) {
        #expect(RequestKeyCanonicalizer().canonicalize(input) == expected)
    }

    @Test("drop patterns remove tracking parameters, case-insensitively and through escapes")
    func dropped() {
        let c = RequestKeyCanonicalizer(dropQueryParameters: ["utm_*", "fbclid", "v"])
        #expect(c.canonicalize("https://e.com/p?utm_source=a&UTM_Medium=b&id=7&fbclid=z") == "https://e.com/p?id=7")
        #expect(c.canonicalize("https://e.com/app.js?v=123") == "https://e.com/app.js")
        #expect(c.canonicalize("https://e.com/p?utm%5Fsource=a&view=1") == "https://e.com/p?view=1")
        #expect(c.canonicalize("https://e.com/p?version=2") == "https://e.com/p?version=2")
    }

    @Test("queries read as forms: + is a space, %2B a plus, one name's values keep their order; idempotent")
    func formQueries() {
        let form = RequestKeyCanonicalizer(dropQueryParameters: ["utm_*"], formQuery: true)
        #expect(form.canonicalize("https://e.com/x?q=a+b") == "https://e.com/x?q=a%20b")
        #expect(form.canonicalize("https://e.com/x?q=a%20b") == "https://e.com/x?q=a%20b")
        #expect(form.canonicalize("https://e.com/x?q=a%2bb") == "https://e.com/x?q=a%2Bb")
        #expect(form.canonicalize("https://e.com/x?_col=type&_col=name") == "https://e.com/x?_col=type&_col=name")
        #expect(form.canonicalize("https://e.com/x?_col=name&z=1&_col=type") == "https://e.com/x?_col=name&_col=type&z=1")
        #expect(form.canonicalize("https://e.com/x?a.b=1&a=2") == "https://e.com/x?a=2&a.b=1")
        #expect(form.canonicalize("https://e.com/x?b=2&utm_source=m&a=1") == "https://e.com/x?a=1&b=2")
        for (input, _) in Self.cases {
            guard let key = form.canonicalize(input) else { continue }
            #expect(form.canonicalize(key) == key, "\(input)")
        }
        // Only keys a reader without the form reading would not find need the flag.
        #expect(form.needsFormQuery("https://e.com/x?q=a%20b") && form.needsFormQuery("https://e.com/x?_col=type&_col=name"))
        #expect(!form.needsFormQuery("https://e.com/x?a=1&b=2") && !form.needsFormQuery("https://e.com/x"))
        // The classic reading is unchanged.
        #expect(RequestKeyCanonicalizer().canonicalize("https://e.com/x?_col=type&_col=name&q=a+b") == "https://e.com/x?_col=name&_col=type&q=a+b")
    }

    @Test("canonicalizing a key gives the same key")
    func idempotent() {
        let c = RequestKeyCanonicalizer(dropQueryParameters: ["utm_*"])
        for (input, _) in Self.cases {
            guard let key = c.canonicalize(input) else { continue }
            #expect(c.canonicalize(key) == key)
        }
    }

    @Test("the key shape check accepts exactly the bytes a canonical key holds, in each place")
    func keyShapeByteSets() {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        let raw = unreserved.union("!$&'()*+,;=:@/?%".utf8)
        let host = Set("abcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        for c in UInt8.min...UInt8.max {
            let path = Array("http://h/a".utf8) + [c]
            #expect(path.withUnsafeBytes { isWellFormedKey($0) } == raw.contains(c), "path byte \(c)")
            let inHost = Array("https://a".utf8) + [c] + Array("b/".utf8)
            #expect(inHost.withUnsafeBytes { isWellFormedKey($0) } == (host.contains(c) || c == UInt8(ascii: "/")), "host byte \(c)")
        }
        for key in ["http://a/", "https://a/", "http://[::1]:8080/x?y=1", "https://h:65535/%20", "http://a.b-c_d~e/"] {
            #expect(isWellFormedKey(key), "\(key)")
        }
        for key in ["http:/a/", "https:/a/", "ftp://a/", "http://A/", "http://a", "http://a:0/", "http://a:65536/", "http://a:/", "http://[]/", "https://"] {
            #expect(!isWellFormedKey(key), "\(key)")
        }
    }
}

@Suite("content negotiation read from the header's bytes (H19)")
struct NegotiationScanTests {
    static func candidate(_ type: String, language: String? = nil) -> RequestQualifiers.Candidate {
        RequestQualifiers.Candidate(entry: 0, qualifiers: RequestQualifiers(), contentType: type, contentLanguage: language)
    }

    @Test("Accept: the most specific range decides, q=0 refuses, a quoted comma stays inside its item, case does not matter")
    func accept() {
        let json = Self.candidate("application/json; charset=utf-8")
        #expect(RequestQualifiers.Scan.mediaWeight("text/csv;q=0.5, application/json;q=0.9", json) == 900)
        #expect(RequestQualifiers.Scan.mediaWeight("application/*;q=0.2, */*;q=0.1", json) == 200)
        #expect(RequestQualifiers.Scan.mediaWeight("APPLICATION/JSON;Q=0, */*", json) == 0)
        #expect(RequestQualifiers.Scan.mediaWeight("text/csv", json) == 0)
        // The comma inside the quotes is a parameter's, not a new item: no range `b"` names JSON.
        #expect(RequestQualifiers.Scan.mediaWeight("text/html;x=\"a, application/json;q=1;y=b\"", json) == 0)
        #expect(RequestQualifiers.Scan.mediaWeight("text/html;x=\"a,\\\"b\";q=0.5, application/json;q=0.3", json) == 300)
        #expect(RequestQualifiers.Scan.mediaWeight("application/json;q=nan", json) == 1000)
    }

    @Test("Accept-Language: a tag, its prefix, the range's prefix; the longest range decides")
    func languages() {
        let french = Self.candidate("text/plain", language: "fr")
        #expect(RequestQualifiers.Scan.languageWeight("fr-CH, de;q=0.5", french) == 1000)
        #expect(RequestQualifiers.Scan.languageWeight("de, *;q=0.1", french) == 100)
        #expect(RequestQualifiers.Scan.languageWeight("fr;q=0.4, fr-ca;q=0.8", french) == 800)
        #expect(RequestQualifiers.Scan.languageWeight("es", french) == 0)
    }
}
