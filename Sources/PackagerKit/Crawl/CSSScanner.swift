/// Finds the URLs a style sheet refers to, by tokenizing it the way CSS Syntax Level 3 does.
///
/// Reported, in order: every `url(...)` token (unquoted), the string of a `url("...")` or `src("...")`
/// function, the string after `@import`, and the strings directly inside `image-set()` and
/// `-webkit-image-set()`. Comments, escapes, bad strings and bad URLs are handled as the tokenizer
/// specifies, so nothing inside a comment is reported and `\26 ` style escapes are decoded. The scan
/// is a single linear pass and never fails; the URLs are raw (unresolved, any scheme).
enum CSSScanner {
    /// A URL found in a style sheet.
    struct Reference: Sendable, Equatable {
        var url: String
        /// Whether it is the target of an `@import` rule (a style sheet, not an image or font).
        var isImport: Bool
    }

    /// The URLs in `bytes`, in order, duplicates included.
    static func urls(in bytes: [UInt8]) -> [String] { references(in: bytes).map(\.url) }

    /// The URLs in `bytes` with their kind, in order, duplicates included.
    static func references(in bytes: [UInt8]) -> [Reference] {
        var tokenizer = Tokenizer(bytes)
        var found: [Reference] = []
        // Open blocks, innermost last: the closing byte expected and whether it is an image-set() function.
        var blocks: [(closer: UInt8, isImageSet: Bool)] = []
        var afterImport = false
        // Set after a url( or src( function token whose argument is a string: whether it belongs to an @import.
        var urlFunction: Bool?
        while let token = tokenizer.next() {
            if case .whitespace = token { continue }
            let importing = afterImport
            let inURLFunction = urlFunction
            afterImport = false
            urlFunction = nil
            switch token {
            case .string(let value):
                if let isImport = inURLFunction {
                    found.append(.init(url: String(decoding: value, as: UTF8.self), isImport: isImport))
                } else if importing || blocks.last?.isImageSet == true {
                    found.append(.init(url: String(decoding: value, as: UTF8.self), isImport: importing))
                }
            case .url(let value):
                found.append(.init(url: String(decoding: value, as: UTF8.self), isImport: importing))
            case .function(let kind):
                blocks.append((UInt8(ascii: ")"), kind == .imageSet))
                if kind == .url { urlFunction = importing }
            case .atKeyword(let isImport):
                afterImport = isImport
            case .open(let closer):
                blocks.append((closer, false))
            case .close(let closer):
                // A closer that does not match the innermost block is just a token inside it.
                if blocks.last?.closer == closer { blocks.removeLast() }
            case .whitespace, .other:
                break
            }
        }
        return found
    }

    /// The functions whose arguments can hold URLs.
    enum FunctionKind {
        /// `url(` followed by a string, or `src(`.
        case url
        case imageSet
        case other
    }

    /// A CSS token, reduced to what URL discovery tells apart.
    enum Token {
        case whitespace
        case string([UInt8])
        case url([UInt8])
        case function(FunctionKind)
        case atKeyword(isImport: Bool)
        case open(closer: UInt8)
        case close(UInt8)
        /// Idents, numbers, delimiters, bad strings, bad URLs: nothing that holds a URL.
        case other
    }

    /// The CSS tokenizer, reduced to the tokens above. Input preprocessing (newline and NUL
    /// replacement) is folded into the places that care.
    struct Tokenizer {
        private let bytes: [UInt8]
        private var i = 0
        private var name: [UInt8] = []

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func next() -> Token? {
            let n = bytes.count
            // Comments are not tokens at all.
            while i + 1 < n && bytes[i] == UInt8(ascii: "/") && bytes[i + 1] == UInt8(ascii: "*") {
                var k = i + 2
                while k + 1 < n && !(bytes[k] == UInt8(ascii: "*") && bytes[k + 1] == UInt8(ascii: "/")) { k += 1 }
                i = k + 1 < n ? k + 2 : n
            }
            guard i < n else { return nil }
            let c = bytes[i]
            switch c {
            case 0x20, 0x09, 0x0A, 0x0C, 0x0D:
                while i < n && Self.isWhitespace(bytes[i]) { i += 1 }
                return .whitespace
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                i += 1
                return string(quote: c)
            case UInt8(ascii: "#"):
                i += 1
                if i < n && (Self.isNameByte(bytes[i]) || isValidEscape(at: i)) { consumeName() }
                return .other
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"):
                i += 1
                return .open(closer: c == UInt8(ascii: "(") ? UInt8(ascii: ")") : c + 2)  // '[' + 2 is ']', '{' + 2 is '}'
            case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                i += 1
                return .close(c)
            case UInt8(ascii: "+"), UInt8(ascii: "."):
                if startsNumber(at: i) { return numeric() }
                i += 1
                return .other
            case UInt8(ascii: "-"):
                if startsNumber(at: i) { return numeric() }
                if i + 2 < n && bytes[i + 1] == UInt8(ascii: "-") && bytes[i + 2] == UInt8(ascii: ">") {
                    i += 3  // CDC
                    return .other
                }
                if startsIdent(at: i) { return identLike() }
                i += 1
                return .other
            case UInt8(ascii: "<"):
                // CDO ("<!--") or a delimiter; either way it holds nothing.
                i += i + 3 < n && bytes[i + 1] == UInt8(ascii: "!") && bytes[i + 2] == UInt8(ascii: "-") && bytes[i + 3] == UInt8(ascii: "-") ? 4 : 1
                return .other
            case UInt8(ascii: "@"):
                i += 1
                guard startsIdent(at: i) else { return .other }
                consumeName()
                return .atKeyword(isImport: isName("import"))
            case UInt8(ascii: "\\"):
                if isValidEscape(at: i) { return identLike() }
                i += 1
                return .other
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                return numeric()
            default:
                if Self.isNameStart(c) { return identLike() }
                i += 1
                return .other
            }
        }

        // MARK: Token kinds

        private mutating func string(quote: UInt8) -> Token {
            var value: [UInt8] = []
            let n = bytes.count
            while i < n {
                let c = bytes[i]
                if c == quote {
                    i += 1
                    return .string(value)
                }
                if Self.isNewline(c) {
                    // A bad string; the newline is left for the next token.
                    return .other
                }
                if c == UInt8(ascii: "\\") {
                    i += 1
                    guard i < n else { break }
                    if Self.isNewline(bytes[i]) {
                        // An escaped newline continues the string; CR LF counts as one newline.
                        i += bytes[i] == 0x0D && i + 1 < n && bytes[i + 1] == 0x0A ? 2 : 1
                    } else {
                        consumeEscape(into: &value)
                    }
                } else {
                    appendPlain(c, to: &value)
                }
            }
            // End of input ends the string.
            return .string(value)
        }

        private mutating func identLike() -> Token {
            consumeName()
            let n = bytes.count
            guard i < n, bytes[i] == UInt8(ascii: "(") else { return .other }
            i += 1
            if isName("url") {
                while i + 1 < n && Self.isWhitespace(bytes[i]) && Self.isWhitespace(bytes[i + 1]) { i += 1 }
                let quoted =
                    i < n && Self.isQuote(bytes[i]) || (i + 1 < n && Self.isWhitespace(bytes[i]) && Self.isQuote(bytes[i + 1]))
                return quoted ? .function(.url) : url()
            }
            if isName("src") { return .function(.url) }
            if isName("image-set") || isName("-webkit-image-set") { return .function(.imageSet) }
            return .function(.other)
        }

        /// An unquoted `url(` token; `i` is just past the '('.
        private mutating func url() -> Token {
            let n = bytes.count
            var value: [UInt8] = []
            while i < n && Self.isWhitespace(bytes[i]) { i += 1 }
            while i < n {
                let c = bytes[i]
                if c == UInt8(ascii: ")") {
                    i += 1
                    return .url(value)
                }
                if Self.isWhitespace(c) {
                    while i < n && Self.isWhitespace(bytes[i]) { i += 1 }
                    if i >= n { return .url(value) }
                    if bytes[i] == UInt8(ascii: ")") {
                        i += 1
                        return .url(value)
                    }
                    skipBadURLRemnants()
                    return .other
                }
                if Self.isQuote(c) || c == UInt8(ascii: "(") || Self.isNonPrintable(c) {
                    skipBadURLRemnants()
                    return .other
                }
                if c == UInt8(ascii: "\\") {
                    guard isValidEscape(at: i) else {
                        skipBadURLRemnants()
                        return .other
                    }
                    i += 1
                    consumeEscape(into: &value)
                } else {
                    appendPlain(c, to: &value)
                }
            }
            return .url(value)
        }

        /// Appends one byte of a string or URL (NUL as U+FFFD, as CSS Syntax preprocesses it) and moves past it.
        private mutating func appendPlain(_ c: UInt8, to value: inout [UInt8]) {
            if c == 0 {
                value.append(contentsOf: [0xEF, 0xBF, 0xBD])
            } else {
                value.append(c)
            }
            i += 1
        }

        private mutating func skipBadURLRemnants() {
            var discarded: [UInt8] = []
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: ")") {
                    i += 1
                    return
                }
                if isValidEscape(at: i) {
                    // An escaped ')' does not end the bad URL.
                    i += 1
                    consumeEscape(into: &discarded)
                    discarded.removeAll(keepingCapacity: true)
                } else {
                    i += 1
                }
            }
        }

        private mutating func numeric() -> Token {
            let n = bytes.count
            if bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            while i < n && Self.isDigit(bytes[i]) { i += 1 }
            if i + 1 < n && bytes[i] == UInt8(ascii: ".") && Self.isDigit(bytes[i + 1]) {
                i += 1
                while i < n && Self.isDigit(bytes[i]) { i += 1 }
            }
            if i + 1 < n && (bytes[i] | 0x20) == UInt8(ascii: "e") {
                let sign = bytes[i + 1] == UInt8(ascii: "+") || bytes[i + 1] == UInt8(ascii: "-")
                if Self.isDigit(bytes[i + 1]) || (sign && i + 2 < n && Self.isDigit(bytes[i + 2])) {
                    i += sign ? 2 : 1
                    while i < n && Self.isDigit(bytes[i]) { i += 1 }
                }
            }
            // A unit makes it a dimension ("1url(" is not a url function); '%' a percentage.
            if startsIdent(at: i) {
                consumeName()
            } else if i < n && bytes[i] == UInt8(ascii: "%") {
                i += 1
            }
            return .other
        }

        // MARK: Pieces

        /// Consumes a name into `name`, decoding escapes.
        private mutating func consumeName() {
            // Moved out and back so the buffer keeps its capacity without aliasing self during escapes.
            var out = name
            name = []
            out.removeAll(keepingCapacity: true)
            while i < bytes.count {
                let c = bytes[i]
                if Self.isNameByte(c) {
                    out.append(c)
                    i += 1
                } else if isValidEscape(at: i) {
                    i += 1
                    consumeEscape(into: &out)
                } else {
                    break
                }
            }
            name = out
        }

        /// Consumes an escape whose '\' is already consumed.
        private mutating func consumeEscape(into out: inout [UInt8]) {
            let n = bytes.count
            guard i < n else {
                HTMLTokenizer.appendUTF8(0xFFFD, to: &out)
                return
            }
            guard HTMLTokenizer.hexValue(bytes[i]) != nil else {
                // Any other character stands for itself; a multi-byte one is copied byte by byte by the caller's loop.
                out.append(bytes[i] == 0 ? 0xEF : bytes[i])
                if bytes[i] == 0 { out.append(contentsOf: [0xBF, 0xBD]) }
                i += 1
                return
            }
            var value: UInt32 = 0
            var digits = 0
            while digits < 6 && i < n, let h = HTMLTokenizer.hexValue(bytes[i]) {
                value = value * 16 + UInt32(h)
                digits += 1
                i += 1
            }
            // One whitespace after a hex escape belongs to it; CR LF counts as one.
            if i < n && Self.isWhitespace(bytes[i]) {
                i += bytes[i] == 0x0D && i + 1 < n && bytes[i + 1] == 0x0A ? 2 : 1
            }
            if value == 0 || value > 0x10FFFF || (0xD800...0xDFFF).contains(value) { value = 0xFFFD }
            HTMLTokenizer.appendUTF8(value, to: &out)
        }

        private func isName(_ expected: StaticString) -> Bool {
            guard name.count == expected.utf8CodeUnitCount else { return false }
            let start = expected.utf8Start
            for k in 0..<name.count where HTMLTokenizer.lowered(name[k]) != start[k] { return false }
            return true
        }

        private func isValidEscape(at j: Int) -> Bool {
            // A '\' at the very end is a valid escape (of U+FFFD); before a newline it is not.
            j < bytes.count && bytes[j] == UInt8(ascii: "\\") && (j + 1 >= bytes.count || !Self.isNewline(bytes[j + 1]))
        }

        private func startsIdent(at j: Int) -> Bool {
            guard j < bytes.count else { return false }
            let c = bytes[j]
            if c == UInt8(ascii: "-") {
                guard j + 1 < bytes.count else { return false }
                let d = bytes[j + 1]
                return Self.isNameStart(d) || d == UInt8(ascii: "-") || isValidEscape(at: j + 1)
            }
            return Self.isNameStart(c) || isValidEscape(at: j)
        }

        private func startsNumber(at j: Int) -> Bool {
            let n = bytes.count
            guard j < n else { return false }
            var k = j
            if bytes[k] == UInt8(ascii: "+") || bytes[k] == UInt8(ascii: "-") { k += 1 }
            guard k < n else { return false }
            if Self.isDigit(bytes[k]) { return true }
            return bytes[k] == UInt8(ascii: ".") && k + 1 < n && Self.isDigit(bytes[k + 1])
        }

        @inline(__always) static func isWhitespace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D }
        @inline(__always) static func isNewline(_ c: UInt8) -> Bool { c == 0x0A || c == 0x0C || c == 0x0D }
        @inline(__always) static func isQuote(_ c: UInt8) -> Bool { c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") }
        @inline(__always) static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        /// Letters, '_' and any non-ASCII byte (a UTF-8 lead or continuation byte stands in for its code point); NUL stands for U+FFFD.
        @inline(__always) static func isNameStart(_ c: UInt8) -> Bool { HTMLTokenizer.isAlpha(c) || c == UInt8(ascii: "_") || c >= 0x80 || c == 0 }
        @inline(__always) static func isNameByte(_ c: UInt8) -> Bool { isNameStart(c) || isDigit(c) || c == UInt8(ascii: "-") }
        @inline(__always) static func isNonPrintable(_ c: UInt8) -> Bool { (c <= 0x08 && c != 0) || c == 0x0B || (0x0E...0x1F).contains(c) || c == 0x7F }
    }
}
