import Testing

@testable import PackagerKit

private func html(_ text: String) -> ExtractedLinks { LinkExtractor.html(Array(text.utf8)) }
private func css(_ text: String) -> [String] { LinkExtractor.css(Array(text.utf8)) }

private func tokens(_ text: String, text elements: Set<String> = ["style"]) -> [HTMLToken] {
    var tokenizer = HTMLTokenizer(Array(text.utf8), emittingTextOf: elements)
    var all: [HTMLToken] = []
    while let token = tokenizer.next() { all.append(token) }
    return all
}

@Suite("HTML tokenizer")
struct HTMLTokenizerTests {
    @Test("Attributes in every quoting style, lowercased names, self-closing")
    func attributes() {
        #expect(
            tokens(#"<A B=c D='e f' G="h>i" J k/>"#) == [
                .startTag(
                    name: "a",
                    attributes: [
                        .init(name: "b", value: "c"), .init(name: "d", value: "e f"), .init(name: "g", value: "h>i"),
                        .init(name: "j", value: ""), .init(name: "k", value: ""),
                    ], selfClosing: true)
            ])
        #expect(
            tokens("<br/><p/ x>") == [
                .startTag(name: "br", attributes: [], selfClosing: true), .startTag(name: "p", attributes: [.init(name: "x", value: "")], selfClosing: false),
            ])
    }

    @Test("End tags drop their attributes; the first of duplicate attributes wins")
    func endTagsAndDuplicates() {
        #expect(tokens("</DIV class=x></ >") == [.endTag(name: "div")])
        #expect(tokens("<a href=1 HREF=2 href='3'>") == [.startTag(name: "a", attributes: [.init(name: "href", value: "1")], selfClosing: false)])
    }

    @Test("Quirky attribute syntax follows the standard")
    func quirks() {
        // A leading '=' is part of the name; a quote right after a quoted value starts a new attribute.
        #expect(
            tokens(#"<x =a=b c="d"e>"#) == [
                .startTag(
                    name: "x", attributes: [.init(name: "=a", value: "b"), .init(name: "c", value: "d"), .init(name: "e", value: "")], selfClosing: false)
            ])
        // '<' inside a tag is just a character.
        #expect(tokens("<a<b c<d=e>") == [.startTag(name: "a<b", attributes: [.init(name: "c<d", value: "e")], selfClosing: false)])
        // Not a tag: "< a", "<3".
        #expect(tokens("< a> <3 <>").isEmpty)
    }

    @Test("CR and CR LF become LF")
    func newlines() {
        #expect(tokens("<a\r\ntitle='x\r\ny\rz'>") == [.startTag(name: "a", attributes: [.init(name: "title", value: "x\ny\nz")], selfClosing: false)])
    }

    @Test(
        "Character references in attribute values",
        arguments: [
            ("?a=1&amp;b=2", "?a=1&b=2"),
            ("?a=1&amp=2", "?a=1&amp=2"),
            ("?a=1&ampb", "?a=1&ampb"),
            ("x&amp", "x&"),
            ("&lt;&gt;&quot;&apos;&nbsp;", "<>\"'\u{A0}"),
            ("&AMP;&LT;&GT;&QUOT;", "&<>\""),
            ("&apos", "&apos"),
            ("&copy;&unknown;", "&copy;&unknown;"),
            ("&#47;p&#x2F;q&#X2f;", "/p/q/"),
            ("&#47p", "/p"),
            ("&#128;&#0;&#x110000;&#xD800;", "\u{20AC}\u{FFFD}\u{FFFD}\u{FFFD}"),
            ("&#99999999999999999999;", "\u{FFFD}"),
            ("&#;&#x;&;& &", "&#;&#x;&;& &"),
        ])
    func characterReferences(written: String, decoded: String) {
        #expect(tokens("<a href=\"\(written)\">") == [.startTag(name: "a", attributes: [.init(name: "href", value: decoded)], selfClosing: false)])
    }

    @Test("Raw text and RCDATA elements end only at their own end tag")
    func rawText() {
        #expect(
            tokens("<style>a<b>c</styles></STYLE >") == [
                .startTag(name: "style", attributes: [], selfClosing: false), .rawText(element: "style", text: "a<b>c</styles>"), .endTag(name: "style"),
            ])
        #expect(
            tokens("<title>&amp;x &ampy <b></title>", text: ["title"]) == [
                .startTag(name: "title", attributes: [], selfClosing: false), .rawText(element: "title", text: "&x &y <b>"), .endTag(name: "title"),
            ])
        // Self-closing syntax does not stop the switch; an end tag at the very end of input is text.
        #expect(tokens("<style/>x</style") == [.startTag(name: "style", attributes: [], selfClosing: true), .rawText(element: "style", text: "x</style")])
    }

    @Test("Script data escapes: a nested <script> inside <!-- hides the first </script>")
    func scriptData() {
        let page = "<script><!-- <script> x </script> <b> --></script><i>"
        #expect(
            tokens(page) == [
                .startTag(name: "script", attributes: [], selfClosing: false), .endTag(name: "script"),
                .startTag(name: "i", attributes: [], selfClosing: false),
            ])
        #expect(tokens("<script><!-- </script><i>").count == 3)
        #expect(tokens("<script>a<!--b--></script><i>").count == 3)
        #expect(tokens("<script><!--<script>--></script><i>").count == 3)
    }
}

@Suite("HTML links")
struct HTMLLinkTests {
    @Test("Every kind of requisite")
    func requisites() {
        let page = """
            <!doctype html><html><head>
            <link rel=stylesheet href=s.css><link rel="shortcut icon" href=i.ico><link rel=APPLE-TOUCH-ICON href=t.png>
            <link rel=apple-touch-icon-precomposed href=tp.png><link rel=mask-icon href=m.svg><link rel=preload href=p.woff2 as=font>
            <link rel=modulepreload href=mp.js><link rel=prefetch href=pf.js><link rel=manifest href=app.webmanifest>
            <link rel=alternate href=feed.xml><link rel=canonical href=/canonical>
            <link rel=preload as=image href=hero.jpg imagesrcset="hero-2x.jpg 2x">
            <script src=app.js></script><style>body { background: url(bg.png) }</style>
            </head><body background=body.png>
            <img src=a.png srcset="a2.png 2x"><picture><source srcset="p.webp 1x, p2.webp 2x" type=image/webp><img src=p.png></picture>
            <video src=v.mp4 poster=poster.jpg><source src=v.webm><track src=subs.vtt></video><audio src=a.mp3></audio>
            <embed src=e.swf><object data=o.pdf></object><input type=IMAGE src=btn.png><input type=text src=no.png>
            <iframe src=frame.html></iframe><frameset><frame src=f.html></frameset>
            <table background=tb.png><tr><td background=td.png><th background=th.png></table>
            <div style="background-image: url('div.png')"></div><svg><image href=svg.png /></svg>
            </body></html>
            """
        #expect(
            html(page).requisites == [
                "s.css", "i.ico", "t.png", "tp.png", "m.svg", "p.woff2", "mp.js", "pf.js", "app.webmanifest", "hero.jpg", "hero-2x.jpg", "app.js", "bg.png",
                "body.png", "a.png", "a2.png", "p.webp", "p2.webp", "p.png", "v.mp4", "poster.jpg", "v.webm", "subs.vtt", "a.mp3", "e.swf", "o.pdf", "btn.png",
                "frame.html", "f.html", "tb.png", "td.png", "th.png", "div.png", "svg.png",
            ])
        #expect(html(page).links.isEmpty)
    }

    @Test("Navigation links, trimmed, empty and repeated ones dropped")
    func links() {
        let found = html("<a href=' /a '>x</a><area href=/b><a href=''><a href=/a><a>no href</a><A HREF=\"/c\">")
        #expect(found.links == ["/a", "/b", "/c"])
        #expect(found.requisites.isEmpty)
    }

    @Test(
        "srcset candidates",
        arguments: [
            ("a.jpg 1x, b.jpg 2x", ["a.jpg", "b.jpg"]),
            ("a.jpg 100w,b.jpg 200w", ["a.jpg", "b.jpg"]),
            ("a,b.jpg 100w, c,d.jpg 200w", ["a,b.jpg", "c,d.jpg"]),
            ("x.jpg,y.jpg", ["x.jpg,y.jpg"]),
            ("x.jpg, y.jpg", ["x.jpg", "y.jpg"]),
            ("x.jpg,, y.jpg 2x,", ["x.jpg", "y.jpg"]),
            ("  one.png  ", ["one.png"]),
            ("data:image/png;base64,AAA= 1x, b.png 2x", ["data:image/png;base64,AAA=", "b.png"]),
            ("a.png 100w 50h, b.png 1.5x, c.png .5x", ["a.png", "b.png", "c.png"]),
            ("bad.png 2q, bad2.png 1x 2x, bad3.png 100w 1x, bad4.png 50h, bad5.png 0w, bad6.png -1x, ok.png", ["ok.png"]),
            ("f(1).png 1x, g.png (a, b) 2x", ["f(1).png"]),
            ("", []),
            (",,,", []),
        ])
    func srcset(value: String, expected: [String]) {
        #expect(LinkExtractor.srcsetURLs(value) == expected)
    }

    @Test("The first <base href> counts")
    func base() {
        #expect(html("<base target=_top><base href=' /root/ '><base href=/other/>").baseHref == "/root/")
        #expect(html("<base href=''><base href=/other/>").baseHref == nil)
        #expect(html("<a href=x>").baseHref == nil)
    }

    @Test(
        "Meta refresh targets",
        arguments: [
            ("5; url=/next", "/next"),
            ("0;URL='/quoted'junk", "/quoted"),
            ("0; Url = \"/double\"", "/double"),
            ("1, url=/comma", "/comma"),
            ("0 /bare", "/bare"),
            ("0.5; /fraction", "/fraction"),
            (".5;url=/dot", "/dot"),
            ("0; urx", "urx"),
            ("0; url", "url"),
            ("3", nil),
            ("3;", nil),
            ("abc; url=/x", nil),
            ("3x; url=/x", nil),
        ] as [(String, String?)])
    func refresh(content: String, expected: String?) {
        #expect(LinkExtractor.refreshURL(content) == expected)
    }

    @Test("Meta refresh is a navigation link; other meta tags are not")
    func refreshLink() {
        let found = html("<META HTTP-EQUIV=Refresh CONTENT='0; URL=/moved'><meta name=refresh content='0; url=/no'>")
        #expect(found.links == ["/moved"])
        #expect(found.requisites.isEmpty)
    }

    @Test("Entities, uppercase and unquoted attributes")
    func attributeSyntax() {
        let found = html("<A HREF=/p?a=1&amp;b=2>x</A><IMG SRC=/img.png?w=1&h=2><a href=/q?x=1&copy=2><a href=foo/>")
        #expect(found.links == ["/p?a=1&b=2", "/q?x=1&copy=2", "foo/"])
        #expect(found.requisites == ["/img.png?w=1&h=2"])
    }

    @Test("Links in comments, bogus comments and CDATA are not reported")
    func comments() {
        let page = """
            <!-- <a href=c1> --><!-- <!-- <a href=c2> --!><a href=after1>
            <!--><a href=after2><!---><a href=after3><!----><a href=after4>
            <? <a href=pi> ?><![CDATA[ <a href=cdata> ]]></ <a href=endbogus>
            <!DOCTYPE html PUBLIC "-//x" "<a href=doctype>"><a href=after5>
            """
        #expect(html(page).links == ["after1", "after2", "after3", "after4", "after5"])
    }

    @Test("Markup inside scripts, textareas and other raw text is not reported")
    func rawText() {
        let page = """
            <script>var s = "<img src=x>"; document.write('<a href=js>')</script><img src=real.png>
            <script><!-- <script> </script> <img src=hidden> --></script><img src=after.png>
            <textarea><img src=ta></textarea><title><a href=t></title><xmp><a href=xmp></xmp>
            <noembed><img src=ne></noembed><noframes><a href=nf></noframes><iframe><img src=if></iframe>
            <noscript><img src=fallback.png></noscript>
            <style>/* url(commented.png) */ p { background: url(styled.png) }</style>
            """
        let found = html(page)
        #expect(found.requisites == ["real.png", "after.png", "fallback.png", "styled.png"])
        #expect(found.links.isEmpty)
    }

    @Test(
        "Unterminated input keeps what came before",
        arguments: [
            "<a href=ok><a href=\"unterminated",
            "<a href=ok><a href=unterminated",
            "<a href=ok><!-- <a href=x>",
            "<a href=ok><script><a href=x>",
            "<a href=ok><style>a{background:url(",
            "<a href=ok><a",
            "<a href=ok><",
            "<a href=ok></",
            "<a href=ok><!",
            "<a href=ok><!DOCTYPE",
            "<a href=ok><a href='x' /",
        ])
    func unterminated(page: String) {
        #expect(html(page).links == ["ok"])
    }
}

@Suite("CSS URLs")
struct CSSScannerTests {
    @Test("url() forms")
    func urlForms() {
        let sheet = """
            a { background: url(a.png) } b { background: url( "b.png" ) } c { background: URL('c.png') }
            d { background: url(  d.png  ) } e { background: url() } f { background: url("") }
            """
        #expect(css(sheet) == ["a.png", "b.png", "c.png", "d.png"])
    }

    @Test("@import with a string or url(), flagged as imports")
    func imports() {
        let sheet = "@import \"e.css\"; @import url(f.css) screen; @IMPORT url( 'g.css' ); @import /* note */ 'h.css'; x { content: \"not-a-url.png\" }"
        #expect(
            CSSScanner.references(in: Array(sheet.utf8)) == [
                .init(url: "e.css", isImport: true), .init(url: "f.css", isImport: true), .init(url: "g.css", isImport: true),
                .init(url: "h.css", isImport: true),
            ])
        #expect(CSSScanner.references(in: Array("p { background: url(p.png) }".utf8)) == [.init(url: "p.png", isImport: false)])
    }

    @Test("Comments hide URLs")
    func comments() {
        #expect(css("/* url(no.png) @import 'no.css'; */ a { background: url(yes.png) } /* unterminated url(no2.png)") == ["yes.png"])
        #expect(css("a { background: url(/*not-a-comment*/x.png) }") == ["/*not-a-comment*/x.png"])
    }

    @Test("Escapes in strings and urls")
    func escapes() {
        #expect(
            css(#"a { background: url(a\ b.png) } b { background: url("x\26 y.png") } c { background: url(a\).png) }"#) == ["a b.png", "x&y.png", "a).png"])
        #expect(css("a { background: url(\"q\\\"uote.png\") } b { background: url('line\\\ncontinued.png') }") == ["q\"uote.png", "linecontinued.png"])
        #expect(css(#"\75 rl(escaped-name.png) u\72l("escaped-fn.png")"#) == ["escaped-name.png", "escaped-fn.png"])
    }

    @Test("image-set(), src() and data: URLs")
    func imageSet() {
        let sheet = """
            a { background: image-set("h.png" 1x, 'h2.png' 2x) } b { background: -webkit-image-set(url(j.png) 1x, "j2.png" 2x) }
            c { background: image-set(linear-gradient(red, blue) 1x, "k.png" 2x) } @font-face { src: url(data:font/woff2;base64,AAAA) format("woff2") }
            d { background: src("s.png") }
            """
        #expect(css(sheet) == ["h.png", "h2.png", "j.png", "j2.png", "k.png", "data:font/woff2;base64,AAAA", "s.png"])
    }

    @Test("Bad URLs, bad strings and look-alikes report nothing")
    func badTokens() {
        #expect(css(#"a { background: url(a"b.png) } b { background: url(x y.png) } c { background: url(ok.png) }"#) == ["ok.png"])
        #expect(css("a { content: \"broken\n; background: url(ok2.png) }") == ["ok2.png"])
        #expect(css("a { width: 1url(x.png) } #url(y.png) b { x: -url(z.png) }") == [])
        #expect(css("url(unterminated.png") == ["unterminated.png"])
        #expect(css("@import 'unterminated.css") == ["unterminated.css"])
    }

    @Test("Duplicates are dropped, order kept")
    func duplicates() {
        #expect(css("a{background:url(x.png)} b{background:url(y.png)} c{background:url('x.png')}") == ["x.png", "y.png"])
    }
}

@Suite("Sitemaps")
struct SitemapTests {
    @Test("A urlset lists pages")
    func urlset() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
              <!-- <url><loc>http://example.com/commented</loc></url> -->
              <url><loc>
                http://example.com/a?x=1&amp;y=2
              </loc><lastmod>2024-01-01</lastmod></url>
              <url><loc><![CDATA[http://example.com/b?x=1&y=2]]></loc>
                <image:image><image:loc>http://example.com/photo.jpg</image:loc></image:image></url>
              <url><loc>http://example.com/&#x63;&#100;</loc></url>
              <url><loc>http://example.com/a?x=1&amp;y=2</loc></url>
            </urlset>
            """
        let found = LinkExtractor.sitemap(Array(xml.utf8))
        #expect(found.pages == ["http://example.com/a?x=1&y=2", "http://example.com/b?x=1&y=2", "http://example.com/cd"])
        #expect(found.sitemaps.isEmpty)
    }

    @Test("A sitemap index lists sitemaps; prefixes are ignored")
    func index() {
        let xml = """
            <sm:sitemapindex xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">
              <sm:sitemap><sm:loc>https://example.com/sitemap-1.xml</sm:loc></sm:sitemap>
              <sitemap><loc>https://example.com/sitemap-2.xml.gz</loc><lastmod>2024-01-01</lastmod></sitemap>
            </sm:sitemapindex>
            """
        let found = LinkExtractor.sitemap(Array(xml.utf8))
        #expect(found.sitemaps == ["https://example.com/sitemap-1.xml", "https://example.com/sitemap-2.xml.gz"])
        #expect(found.pages.isEmpty)
    }

    @Test("Malformed sitemaps do not fail")
    func malformed() {
        #expect(LinkExtractor.sitemap(Array("<urlset><url><loc>http://x/a</loc><url><loc>http://x/b".utf8)).pages == ["http://x/a"])
        #expect(LinkExtractor.sitemap(Array("<loc>http://x/orphan</loc><url><loc/></url>".utf8)) == ([], []))
        #expect(LinkExtractor.sitemap(Array("<urlset><url><loc>http://x/&bogus;&</loc>".utf8)).pages == ["http://x/&bogus;&"])
    }
}

@Suite("robots.txt")
struct RobotsRulesTests {
    @Test("The crawler's own group wins over *; groups for the same agent merge")
    func groups() {
        let text = """
            User-agent: *
            Disallow: /

            User-agent: Packager
            Disallow: /private

            User-agent: other
            User-agent: PACKAGER
            Disallow: /secret
            """
        let rules = RobotsRules(parsing: text, userAgent: "packager/1.0 (+https://example.com/bot)")
        #expect(rules.allows("/public"))
        #expect(!rules.allows("/private/x"))
        #expect(!rules.allows("/secret"))
        let others = RobotsRules(parsing: text, userAgent: "somebot")
        #expect(!others.allows("/public"))
    }

    @Test("No matching group and no * group allows everything; rules before any user-agent are ignored")
    func noGroup() {
        let rules = RobotsRules(parsing: "Disallow: /\nUser-agent: other\nDisallow: /", userAgent: "packager")
        #expect(rules.allows("/anything"))
    }

    @Test("A user-agent line after rules starts a new group; unknown lines do not")
    func groupBoundaries() {
        let text = "User-agent: a\nCrawl-delay: 5\nUser-agent: packager\nDisallow: /x\nUser-agent: b\nDisallow: /y\n"
        let rules = RobotsRules(parsing: text, userAgent: "packager")
        #expect(!rules.allows("/x"))
        #expect(rules.allows("/y"))
    }

    @Test(
        "Wildcards and end anchors",
        arguments: [
            ("/*.pdf$", "/files/a.pdf", false),
            ("/*.pdf$", "/files/a.pdf?x", true),
            ("/*.pdf", "/files/a.pdf?x", false),
            ("/private*/", "/private-stuff/x", false),
            ("/private*/", "/private-stuff", true),
            ("/a*b*c", "/axxbyyc", false),
            ("/a*b*c", "/axxcyyb", true),
            ("/exact$", "/exact", false),
            ("/exact$", "/exact/", true),
            ("*", "/", false),
            ("/$", "/", false),
            ("/$", "/x", true),
            ("/a$b", "/a$b/c", false),
            ("/*?q=", "/search?q=x", false),
        ])
    func patterns(pattern: String, path: String, allowed: Bool) {
        #expect(RobotsRules(parsing: "User-agent: *\nDisallow: \(pattern)", userAgent: "packager").allows(path) == allowed)
    }

    @Test("The longest match wins; an allow wins a tie")
    func precedence() {
        let rules = RobotsRules(
            parsing: "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\nAllow: /tie\nDisallow: /tie\nAllow: /*.css$\nDisallow: /assets/",
            userAgent: "x")
        #expect(!rules.allows("/a"))
        #expect(rules.allows("/a/b"))
        #expect(!rules.allows("/a/b/c"))
        #expect(rules.allows("/tie"))
        #expect(rules.allows("/b"))
        #expect(!rules.allows("/assets/x.js"))
        // "/assets/" (8 octets) beats "/*.css$" (7).
        #expect(!rules.allows("/assets/s.css"))
    }

    @Test("Empty disallow allows all; /robots.txt is always allowed")
    func special() {
        #expect(RobotsRules(parsing: "User-agent: *\nDisallow:", userAgent: "x").allows("/anything"))
        let all = RobotsRules(parsing: "User-agent: *\nDisallow: /", userAgent: "x")
        #expect(all.allows("/robots.txt"))
        #expect(!all.allows("/robots.txt.bak"))
        #expect(!all.allows(""))
    }

    @Test("Comments, CR LF, CR, BOM, case and junk lines are tolerated")
    func tolerance() {
        let text = "\u{FEFF}# robots\r\nUSER-AGENT : * # everyone\r\nthis line is junk\rDISALLOW:/tmp # temp\r\n\r\n  Allow :  /tmp/ok  \n"
        let rules = RobotsRules(parsing: text, userAgent: "x")
        #expect(!rules.allows("/tmp/x"))
        #expect(rules.allows("/tmp/ok/x"))
        #expect(rules.allows("/other"))
    }

    @Test("Percent-encoding is compared in normalized form")
    func percentEncoding() {
        let rules = RobotsRules(parsing: "User-agent: *\nDisallow: /%7Euser\nDisallow: /caf\u{E9}\nDisallow: /a%2fb\nDisallow: /x%3Ay", userAgent: "x")
        #expect(!rules.allows("/~user/page"))
        #expect(!rules.allows("/%7euser"))
        #expect(!rules.allows("/caf%C3%A9"))
        #expect(!rules.allows("/caf%c3%a9/menu"))
        #expect(rules.allows("/a/b"))
        #expect(!rules.allows("/a%2Fb"))
        #expect(!rules.allows("/x%3ay"))
        #expect(rules.allows("/x:y"))
    }

    @Test("Sitemap lines are collected from anywhere")
    func sitemaps() {
        let text = "Sitemap: https://example.com/s1.xml\nUser-agent: *\nDisallow: /x\nsitemap:https://example.com/s2.xml\nSitemap: https://example.com/s1.xml"
        let rules = RobotsRules(parsing: text, userAgent: "x")
        #expect(rules.sitemaps == ["https://example.com/s1.xml", "https://example.com/s2.xml"])
        #expect(!rules.allows("/x"))
    }
}

@Suite("Parser robustness")
struct ParserRobustnessTests {
    /// xorshift64*: deterministic, so a failure reproduces.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 0x2545_F491_4F6C_DD1D
        }
    }

    /// Bytes that steer the parsers into their interesting states, mixed with arbitrary ones.
    static let syntax = Array("<>/=\"'&#;!-?[]{}()*$:\\ \n\r\t\0 xXaAsurlimpotyec@,.%9".utf8)
    static let fragments = [
        "<script>", "</script>", "<style>", "</style>", "<!--", "-->", "<![CDATA[", "url(", "@import", "<loc>", "</loc>", "<url>",
        "User-agent: *\n", "Disallow: ", "&amp;", "&#x", "srcset=", "<img ", "<a href=", "/*", "*/", "<textarea>", "<title>",
    ].map { Array($0.utf8) }

    static func randomInput(_ random: inout Generator) -> [UInt8] {
        var bytes: [UInt8] = []
        let length = Int(random.next() % 160)
        while bytes.count < length {
            let r = random.next()
            switch r % 8 {
            case 0: bytes.append(UInt8(truncatingIfNeeded: r >> 8))
            case 1: bytes += fragments[Int((r >> 8) % UInt64(fragments.count))]
            default: bytes.append(syntax[Int((r >> 8) % UInt64(syntax.count))])
            }
        }
        return bytes
    }

    @Test("Random input never crashes any parser")
    func random() {
        var random = Generator(state: 0x9E37_79B9_7F4A_7C15)
        var total = 0
        for _ in 0..<3000 {
            let bytes = Self.randomInput(&random)
            var tokenizer = HTMLTokenizer(bytes, emittingTextOf: ["style", "title", "textarea", "script", "plaintext"])
            while tokenizer.next() != nil { total += 1 }
            let links = LinkExtractor.html(bytes)
            total += links.requisites.count + links.links.count
            total += LinkExtractor.css(bytes).count
            let sitemap = LinkExtractor.sitemap(bytes)
            total += sitemap.pages.count + sitemap.sitemaps.count
            let text = String(decoding: bytes, as: UTF8.self)
            let rules = RobotsRules(parsing: text, userAgent: "packager")
            total += rules.allows(text) ? 1 : 0
            total += LinkExtractor.srcsetURLs(text).count
            total += LinkExtractor.refreshURL(text) == nil ? 0 : 1
        }
        #expect(total > 0)
    }

    @Test("Pathological input stays fast")
    func pathological() {
        let attributes = (0..<20_000).map { "a\($0)=1 a\($0)=2" }.joined(separator: " ")
        let inputs = [
            "<x " + attributes + ">",
            String(repeating: "<!--", count: 20_000),
            String(repeating: "<a href=&", count: 20_000),
            "<script><!--" + String(repeating: "<script>", count: 20_000),
            "<style>" + String(repeating: "</styl", count: 20_000),
            String(repeating: "url(", count: 20_000),
            String(repeating: "/*", count: 20_000),
            String(repeating: "<url><loc>", count: 20_000) + String(repeating: "</nope>", count: 20_000),
        ]
        for input in inputs {
            let bytes = Array(input.utf8)
            _ = LinkExtractor.html(bytes)
            _ = LinkExtractor.css(bytes)
            _ = LinkExtractor.sitemap(bytes)
        }
        var tokenizer = HTMLTokenizer(Array(inputs[0].utf8))
        if case .startTag(_, let attributes, _)? = tokenizer.next() {
            #expect(attributes.count == 20_000)
            #expect(attributes.allSatisfy { $0.value == "1" })
        } else {
            Issue.record("expected a start tag")
        }
        let robots = RobotsRules(parsing: "User-agent: *\nDisallow: /" + String(repeating: "*a", count: 500) + "$", userAgent: "x")
        #expect(robots.allows("/" + String(repeating: "a", count: 2000) + "b"))
    }
}
