/// What a page links to; URLs are raw attribute values (trimmed of ASCII whitespace), unresolved.
struct ExtractedLinks: Sendable, Equatable {
    /// The first `<base href>`; nil when there is none or it is empty.
    var baseHref: String?
    /// Needed to render the page: images, scripts, style sheets, icons, media, frames, CSS references.
    var requisites: [String] = []
    /// Navigation: `a href`, `area href`, the target of a `<meta http-equiv=refresh>`.
    var links: [String] = []
}

/// Finds the URLs in HTML pages, style sheets and sitemaps.
///
/// HTML goes through `HTMLTokenizer`, so links in comments, scripts, `<textarea>` and other raw
/// text are not reported, and attribute values are entity-decoded exactly as a browser sees them.
/// CSS (style sheets, `<style>` elements, `style` attributes) goes through `CSSScanner`. Lists keep
/// document order and drop empty values and repeats; resolving, scheme filtering and scope are
/// the caller's job.
enum LinkExtractor {
    /// The links and requisites of an HTML page.
    ///
    /// - Parameter filtered: whether the tokenizer makes tokens and strings only of the tags and attributes the
    ///   collector reads (false: of all of them, which finds the same links more slowly; tests compare the two).
    static func html(_ bytes: [UInt8], filtered: Bool = true) -> ExtractedLinks {
        var collector = Collector()
        // Sets grown from empty rehash their strings at each doubling; a real page names about one link per 200 bytes.
        collector.seenLinks.reserveCapacity(min(bytes.count / 200, 4096))
        var tokenizer = HTMLTokenizer(
            bytes, emittingTextOf: ["style"], attributeNames: filtered ? linkAttributes : nil, tags: filtered ? linkTags : nil)
        while let token = tokenizer.next() {
            switch token {
            case .startTag(let name, let attributes, _):
                collector.startTag(name, attributes)
            case .rawText("style", let text):
                collector.css(Array(text.utf8))
            case .rawText, .endTag:
                break
            }
        }
        return collector.result
    }

    /// The URLs a style sheet refers to, `@import` targets included, in order, without empty values and repeats.
    static func css(_ bytes: [UInt8]) -> [String] {
        var seen = Set<String>()
        var urls: [String] = []
        for url in CSSScanner.urls(in: bytes) {
            let trimmed = trimmed(url)
            if !trimmed.isEmpty && seen.insert(trimmed).inserted { urls.append(trimmed) }
        }
        return urls
    }

    /// The `<loc>` values of a sitemap (`<urlset><url><loc>`) or a sitemap index (`<sitemapindex><sitemap><loc>`).
    ///
    /// Only a `<loc>` whose parent is `<url>` or `<sitemap>` counts, so extension elements such as
    /// `<image:loc>` are skipped. Namespace prefixes are ignored, the text is entity-decoded (CDATA
    /// sections included as written) and trimmed. The scan tolerates malformed XML.
    static func sitemap(_ bytes: [UInt8]) -> (pages: [String], sitemaps: [String]) {
        var scanner = SitemapScanner(bytes)
        return scanner.scan()
    }

    // MARK: - HTML

    /// The attributes ``Collector`` reads; the tokenizer makes strings of these only.
    static let linkAttributes: Set<[UInt8]> = Set(
        ["href", "src", "srcset", "xlink:href", "poster", "data", "type", "background", "rel", "imagesrcset", "http-equiv", "content", "style"].map {
            Array($0.utf8)
        })

    /// The start tags ``Collector`` reads (the cases of its `switch`), and the attribute it reads on any tag.
    static let linkTags = HTMLTokenizer.TagFilter(
        names: Set(
            [
                "a", "area", "base", "img", "source", "image", "script", "audio", "track", "embed", "iframe", "frame", "video", "object",
                "input", "body", "table", "td", "th", "link", "meta",
            ].map { Array($0.utf8) }),
        anyTagAttributes: [Array("style".utf8)])

    /// The `rel` keywords whose `<link>` target is a requisite.
    private static let requisiteRels: Set<String> = [
        "stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon", "preload", "modulepreload", "prefetch", "manifest",
        // An OpenSearch description: the browser reads it to offer the site's search (wget2 -p fetches it too).
        "search",
    ]

    /// Collects URLs in document order, without repeats.
    private struct Collector {
        var result = ExtractedLinks()
        var seenRequisites = Set<String>()
        var seenLinks = Set<String>()
        var sawBase = false

        /// Keep the cases in step with ``LinkExtractor/linkTags``: the tokenizer reports no other tag (unless it has a
        /// `style` attribute).
        mutating func startTag(_ name: String, _ attributes: [HTMLToken.Attribute]) {
            func value(_ attribute: String) -> String? { attributes.first { $0.name == attribute }?.value }
            switch name {
            case "a", "area":
                link(value("href"))
            case "base":
                // Only the first <base> with an href counts, even when that href is empty.
                if !sawBase, let href = value("href") {
                    sawBase = true
                    let href = trimmed(href)
                    result.baseHref = href.isEmpty ? nil : href
                }
            case "img", "source":
                requisite(value("src"))
                srcset(value("srcset"))
            case "image":
                // <image> is <img> in HTML; inside SVG it references its picture with href.
                requisite(value("src") ?? value("href") ?? value("xlink:href"))
            case "script", "audio", "track", "embed", "iframe", "frame":
                requisite(value("src"))
            case "video":
                requisite(value("src"))
                requisite(value("poster"))
            case "object":
                requisite(value("data"))
            case "input":
                if let type = value("type"), asciiLowercased(type) == "image" { requisite(value("src")) }
            case "body", "table", "td", "th":
                requisite(value("background"))
            case "link":
                let rels = Set(splitOnWhitespace(asciiLowercased(value("rel") ?? "")))
                if !rels.isDisjoint(with: LinkExtractor.requisiteRels) {
                    requisite(value("href"))
                    // A preloaded responsive image names its candidates in imagesrcset.
                    if rels.contains("preload") { srcset(value("imagesrcset")) }
                }
            case "meta":
                if let equiv = value("http-equiv"), asciiLowercased(equiv) == "refresh", let content = value("content") {
                    link(LinkExtractor.refreshURL(content))
                }
            default:
                break
            }
            if let style = value("style") { css(Array(style.utf8)) }
        }

        mutating func css(_ bytes: [UInt8]) {
            for url in CSSScanner.urls(in: bytes) { requisite(url) }
        }

        mutating func srcset(_ value: String?) {
            guard let value else { return }
            for url in LinkExtractor.srcsetURLs(value) { requisite(url) }
        }

        mutating func requisite(_ value: String?) {
            guard let value else { return }
            let url = trimmed(value)
            if !url.isEmpty && seenRequisites.insert(url).inserted { result.requisites.append(url) }
        }

        mutating func link(_ value: String?) {
            guard let value else { return }
            let url = trimmed(value)
            if !url.isEmpty && seenLinks.insert(url).inserted { result.links.append(url) }
        }
    }

    // MARK: - Helpers

    /// The value without leading and trailing ASCII whitespace (tab, LF, FF, CR, space).
    static func trimmed(_ value: String) -> String {
        let utf8 = value.utf8
        guard let first = utf8.firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = utf8.lastIndex { !isSpace($0) }!
        if first == utf8.startIndex && utf8.index(after: last) == utf8.endIndex { return value }
        return String(value[first...last])
    }

    static func asciiLowercased(_ value: String) -> String {
        String(decoding: value.utf8.map(HTMLTokenizer.lowered), as: UTF8.self)
    }

    static func splitOnWhitespace(_ value: String) -> [String] {
        value.utf8.split(whereSeparator: isSpace).map { String(decoding: $0, as: UTF8.self) }
    }

    @inline(__always) static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0C || b == 0x0D }
    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}
