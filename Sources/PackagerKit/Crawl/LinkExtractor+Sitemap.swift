extension LinkExtractor {
    /// A forgiving pass over sitemap XML that collects `<loc>` text by parent element.
    struct SitemapScanner {
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
