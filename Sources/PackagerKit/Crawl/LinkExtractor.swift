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
    static func html(_ bytes: [UInt8]) -> ExtractedLinks {
        var collector = Collector()
        var tokenizer = HTMLTokenizer(bytes, emittingTextOf: ["style"])
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

    /// The `rel` keywords whose `<link>` target is a requisite.
    private static let requisiteRels: Set<String> = [
        "stylesheet", "icon", "apple-touch-icon", "apple-touch-icon-precomposed", "mask-icon", "preload", "modulepreload", "prefetch", "manifest",
    ]

    /// Collects URLs in document order, without repeats.
    private struct Collector {
        var result = ExtractedLinks()
        var seenRequisites = Set<String>()
        var seenLinks = Set<String>()
        var sawBase = false

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

    /// The URLs of a `srcset` value, following the standard's "parse a srcset attribute" algorithm.
    ///
    /// A candidate is a run of non-whitespace (trailing commas removed) and optional descriptors up to
    /// the next comma outside parentheses; a comma inside a URL is part of it. Candidates whose
    /// descriptors are invalid (say "2q", or both `w` and `x`) are dropped, as browsers drop them.
    static func srcsetURLs(_ value: String) -> [String] {
        let b = Array(value.utf8)
        let n = b.count
        var i = 0
        var urls: [String] = []
        while true {
            while i < n && (isSpace(b[i]) || b[i] == UInt8(ascii: ",")) { i += 1 }
            guard i < n else { return urls }
            let urlStart = i
            while i < n && !isSpace(b[i]) { i += 1 }
            var urlEnd = i
            var descriptors: [[UInt8]] = []
            if b[urlEnd - 1] == UInt8(ascii: ",") {
                // A URL ending in commas has no descriptors; the commas end the candidate.
                while urlEnd > urlStart && b[urlEnd - 1] == UInt8(ascii: ",") { urlEnd -= 1 }
            } else {
                descriptors = srcsetDescriptors(b, at: &i)
            }
            if urlEnd > urlStart && validDescriptors(descriptors) { urls.append(String(decoding: b[urlStart..<urlEnd], as: UTF8.self)) }
        }
    }

    /// The states of the srcset descriptor tokenizer.
    private enum DescriptorState { case inDescriptor, inParentheses, afterDescriptor }

    /// The descriptor tokenizer of the srcset algorithm; `i` ends past the candidate's comma (or at the end).
    private static func srcsetDescriptors(_ b: [UInt8], at i: inout Int) -> [[UInt8]] {
        let n = b.count
        var descriptors: [[UInt8]] = []
        var current: [UInt8] = []
        var state = DescriptorState.inDescriptor
        while i < n && isSpace(b[i]) { i += 1 }
        while true {
            guard i < n else {
                if !current.isEmpty { descriptors.append(current) }
                return descriptors
            }
            let c = b[i]
            switch state {
            case .inDescriptor:
                if isSpace(c) {
                    if !current.isEmpty { descriptors.append(current) }
                    current = []
                    state = .afterDescriptor
                } else if c == UInt8(ascii: ",") {
                    i += 1
                    if !current.isEmpty { descriptors.append(current) }
                    return descriptors
                } else {
                    if c == UInt8(ascii: "(") { state = .inParentheses }
                    current.append(c)
                }
            case .inParentheses:
                if c == UInt8(ascii: ")") { state = .inDescriptor }
                current.append(c)
            case .afterDescriptor:
                if !isSpace(c) {
                    state = .inDescriptor
                    continue  // reconsume
                }
            }
            i += 1
        }
    }

    /// The descriptor checks of the srcset algorithm: at most one of `Nw` and `Nx`, `Nh` only with `Nw`.
    private static func validDescriptors(_ descriptors: [[UInt8]]) -> Bool {
        var width = false
        var density = false
        var height = false
        for descriptor in descriptors {
            let number = descriptor.dropLast()
            switch descriptor.last {
            case UInt8(ascii: "w"):
                guard !width, !density, isPositiveInteger(number) else { return false }
                width = true
            case UInt8(ascii: "x"):
                guard !width, !density, !height, isNonNegativeFloat(number) else { return false }
                density = true
            case UInt8(ascii: "h"):
                guard !height, !density, isPositiveInteger(number) else { return false }
                height = true
            default:
                return false
            }
        }
        return !height || width
    }

    private static func isPositiveInteger(_ s: ArraySlice<UInt8>) -> Bool {
        !s.isEmpty && s.allSatisfy(isDigit) && s.contains { $0 != UInt8(ascii: "0") }
    }

    /// A valid floating-point number (`-`? digits? (`.` digits)? exponent?) that is not below zero.
    private static func isNonNegativeFloat(_ s: ArraySlice<UInt8>) -> Bool {
        var i = s.startIndex
        let negative = i < s.endIndex && s[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let integerStart = i
        while i < s.endIndex && isDigit(s[i]) { i += 1 }
        var mantissaDigits = s[integerStart..<i]
        if i < s.endIndex && s[i] == UInt8(ascii: ".") {
            i += 1
            let fractionStart = i
            while i < s.endIndex && isDigit(s[i]) { i += 1 }
            guard i > fractionStart else { return false }
            mantissaDigits = s[integerStart..<i]
        }
        guard mantissaDigits.contains(where: isDigit) else { return false }
        if i < s.endIndex && (s[i] == UInt8(ascii: "e") || s[i] == UInt8(ascii: "E")) {
            i += 1
            if i < s.endIndex && (s[i] == UInt8(ascii: "-") || s[i] == UInt8(ascii: "+")) { i += 1 }
            let exponentStart = i
            while i < s.endIndex && isDigit(s[i]) { i += 1 }
            guard i > exponentStart else { return false }
        }
        guard i == s.endIndex else { return false }
        // "-0" is zero, which is allowed; any other negative number is not.
        return !negative || !mantissaDigits.contains { isDigit($0) && $0 != UInt8(ascii: "0") }
    }

    /// The URL of a `<meta http-equiv=refresh>` content value ("5; url=/next"), following the
    /// standard's shared declarative refresh steps; nil when it only reloads the page or is malformed.
    static func refreshURL(_ content: String) -> String? {
        let b = Array(content.utf8)
        let n = b.count
        var i = 0
        func skipSpaces() { while i < n && isSpace(b[i]) { i += 1 } }
        skipSpaces()
        let timeStart = i
        while i < n && isDigit(b[i]) { i += 1 }
        if i == timeStart && !(i < n && b[i] == UInt8(ascii: ".")) { return nil }
        while i < n && (isDigit(b[i]) || b[i] == UInt8(ascii: ".")) { i += 1 }
        if i < n {
            guard b[i] == UInt8(ascii: ";") || b[i] == UInt8(ascii: ",") || isSpace(b[i]) else { return nil }
            skipSpaces()
            if i < n && (b[i] == UInt8(ascii: ";") || b[i] == UInt8(ascii: ",")) { i += 1 }
            skipSpaces()
        }
        guard i < n else { return nil }
        // Without a complete "url =" prefix the whole remainder is the URL.
        let remainder = i
        func url() -> String? {
            // Skip quotes: an opening quote ends the URL at its match.
            var start = i
            var end = n
            if start < n && (b[start] == UInt8(ascii: "'") || b[start] == UInt8(ascii: "\"")) {
                let quote = b[start]
                start += 1
                end = b[start...].firstIndex(of: quote) ?? n
            }
            let value = trimmed(String(decoding: b[start..<end], as: UTF8.self))
            return value.isEmpty ? nil : value
        }
        func whole() -> String? {
            let value = trimmed(String(decoding: b[remainder...], as: UTF8.self))
            return value.isEmpty ? nil : value
        }
        guard b[i] | 0x20 == UInt8(ascii: "u") else { return url() }
        i += 1
        guard i < n, b[i] | 0x20 == UInt8(ascii: "r") else { return whole() }
        i += 1
        guard i < n, b[i] | 0x20 == UInt8(ascii: "l") else { return whole() }
        i += 1
        skipSpaces()
        guard i < n, b[i] == UInt8(ascii: "=") else { return whole() }
        i += 1
        skipSpaces()
        return url()
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

    private static func asciiLowercased(_ value: String) -> String {
        String(decoding: value.utf8.map(HTMLTokenizer.lowered), as: UTF8.self)
    }

    private static func splitOnWhitespace(_ value: String) -> [String] {
        value.utf8.split(whereSeparator: isSpace).map { String(decoding: $0, as: UTF8.self) }
    }

    @inline(__always) static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0C || b == 0x0D }
    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}

extension LinkExtractor {
    /// A forgiving pass over sitemap XML that collects `<loc>` text by parent element.
    private struct SitemapScanner {
        private let bytes: [UInt8]
        private var i = 0
        /// Local names of the open elements.
        private var open: [String] = []
        private var pages: [String] = []
        private var sitemaps: [String] = []
        private var seen = Set<String>()
        /// The text of the `<loc>` being read and the name of its parent.
        private var loc: (text: [UInt8], parent: String)?

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func scan() -> (pages: [String], sitemaps: [String]) {
            let n = bytes.count
            while i < n {
                if bytes[i] != UInt8(ascii: "<") {
                    text()
                } else if hasPrefix("<!--") {
                    skip(past: "-->")
                } else if hasPrefix("<![CDATA[") {
                    let start = i + 9
                    let end = find("]]>", from: start) ?? n
                    if loc != nil { loc!.text.append(contentsOf: bytes[start..<end]) }
                    i = min(end + 3, n)
                } else if hasPrefix("<?") {
                    skip(past: "?>")
                } else if hasPrefix("<!") {
                    skip(past: ">")
                } else if hasPrefix("</") {
                    i += 2
                    let name = tagName()
                    skip(past: ">")
                    endTag(name)
                } else {
                    i += 1
                    startTag()
                }
            }
            return (pages, sitemaps)
        }

        /// Text up to the next '<'; kept (entity-decoded) only inside a `<loc>`.
        private mutating func text() {
            let n = bytes.count
            guard loc != nil else {
                while i < n && bytes[i] != UInt8(ascii: "<") { i += 1 }
                return
            }
            while i < n && bytes[i] != UInt8(ascii: "<") {
                if bytes[i] == UInt8(ascii: "&") {
                    entity()
                } else {
                    loc!.text.append(bytes[i])
                    i += 1
                }
            }
        }

        /// An XML entity reference at `i`; anything unknown stays as written.
        private mutating func entity() {
            let n = bytes.count
            var k = i + 1
            while k < n && k - i <= 10 && bytes[k] != UInt8(ascii: ";") && bytes[k] != UInt8(ascii: "<") { k += 1 }
            guard k < n, bytes[k] == UInt8(ascii: ";") else {
                loc!.text.append(UInt8(ascii: "&"))
                i += 1
                return
            }
            let name = bytes[(i + 1)..<k]
            var scalar: UInt32?
            switch String(decoding: name, as: UTF8.self) {
            case "amp": scalar = 0x26
            case "lt": scalar = 0x3C
            case "gt": scalar = 0x3E
            case "quot": scalar = 0x22
            case "apos": scalar = 0x27
            default:
                if name.first == UInt8(ascii: "#") {
                    let hex = name.dropFirst().first.map { $0 | 0x20 == UInt8(ascii: "x") } ?? false
                    let digits = name.dropFirst(hex ? 2 : 1)
                    if !digits.isEmpty, digits.count <= 8 {
                        var value: UInt32 = 0
                        var valid = true
                        for d in digits {
                            guard let v = hex ? HTMLTokenizer.hexValue(d) : HTMLTokenizer.decimalValue(d) else {
                                valid = false
                                break
                            }
                            value = value * (hex ? 16 : 10) + UInt32(v)
                        }
                        if valid && Unicode.Scalar(value) != nil { scalar = value }
                    }
                }
            }
            guard let scalar else {
                loc!.text.append(UInt8(ascii: "&"))
                i += 1
                return
            }
            HTMLTokenizer.appendUTF8(scalar, to: &loc!.text)
            i = k + 1
        }

        /// A start tag whose '<' is consumed: its name, then attributes (quotes respected) up to '>'.
        private mutating func startTag() {
            let name = tagName()
            let n = bytes.count
            var quote: UInt8?
            var selfClosing = false
            while i < n {
                let c = bytes[i]
                i += 1
                if let q = quote {
                    if c == q { quote = nil }
                } else if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                    quote = c
                } else if c == UInt8(ascii: ">") {
                    selfClosing = i >= 2 && bytes[i - 2] == UInt8(ascii: "/")
                    break
                }
            }
            guard !name.isEmpty, !selfClosing else { return }
            if name == "loc", let parent = open.last, loc == nil, parent == "url" || parent == "sitemap" {
                loc = ([], parent)
            }
            open.append(name)
        }

        private mutating func endTag(_ name: String) {
            if name == "loc", let found = loc {
                loc = nil
                let value = LinkExtractor.trimmed(String(decoding: found.text, as: UTF8.self))
                if !value.isEmpty && seen.insert(value).inserted {
                    if found.parent == "url" { pages.append(value) } else { sitemaps.append(value) }
                }
            }
            // Close the nearest open element of that name; looking only a few levels down keeps broken input linear.
            if let depth = open.suffix(16).lastIndex(of: name) { open.removeSubrange(depth...) }
        }

        /// The local name (after any namespace prefix) of the tag at `i`.
        private mutating func tagName() -> String {
            let n = bytes.count
            let start = i
            while i < n {
                let c = bytes[i]
                if c == UInt8(ascii: ">") || c == UInt8(ascii: "/") || LinkExtractor.isSpace(c) { break }
                i += 1
            }
            var name = bytes[start..<i]
            if let colon = name.lastIndex(of: UInt8(ascii: ":")) { name = name[(colon + 1)...] }
            return String(decoding: name, as: UTF8.self)
        }

        private func hasPrefix(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard i + count <= bytes.count else { return false }
            let start = literal.utf8Start
            for k in 0..<count where bytes[i + k] != start[k] { return false }
            return true
        }

        /// Moves past the next occurrence of `literal`, or to the end.
        private mutating func skip(past literal: StaticString) {
            i = find(literal, from: i).map { $0 + literal.utf8CodeUnitCount } ?? bytes.count
        }

        /// Where `literal` next occurs from `position` on.
        private func find(_ literal: StaticString, from position: Int) -> Int? {
            let count = literal.utf8CodeUnitCount
            let start = literal.utf8Start
            var k = position
            outer: while k + count <= bytes.count {
                for m in 0..<count where bytes[k + m] != start[m] {
                    k += 1
                    continue outer
                }
                return k
            }
            return nil
        }
    }
}
