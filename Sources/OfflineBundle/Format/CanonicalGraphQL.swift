/// The canonical form of a GraphQL request body (docs/FORMAT.md §5.5), so that a client that sends the same operation
/// formatted otherwise, with comments, commas or its variables in another order, is matched as the recorded request
/// was.
///
/// The body is the JSON document GraphQL servers take over HTTP (`{"query": …, "operationName": …, "variables": …}`,
/// or an array of them for a batch). Its `query` is read by GraphQL's lexical grammar and written again as its tokens:
/// no comments, commas or line breaks, one space only between two tokens that would otherwise run together (two names,
/// a name and a number), every string (block strings too) as its value in JSON's escaping. The rest is canonical JSON
/// (§5.5), with a null `operationName`, `variables` or `extensions`, and empty `variables`, left out: servers read
/// them as absent. The tokens keep their order: the order of fields is the order of the answer's members, so it is
/// part of the request.
package enum CanonicalGraphQL {
    /// The canonical bytes of a GraphQL request body, without what `ignoring` names (JSON pointers as their tokens:
    /// `/variables/requestId`); nil when it is not a JSON object (or array of objects) whose `query` is a string
    /// GraphQL's grammar reads (then the body is matched by its bytes).
    package static func canonical(_ bytes: [UInt8], ignoring: [[String]] = []) -> [UInt8]? {
        canonical(bytes, ignoringTokens: ignoring.map { $0.map { Array($0.utf8) } })
    }

    /// ``canonical(_:ignoring:)`` with the pointers' tokens as bytes (a rule makes them once).
    package static func canonical(_ bytes: [UInt8], ignoringTokens: [[[UInt8]]]) -> [UInt8]? {
        guard var document = CanonicalJSON.Document(bytes) else { return nil }
        switch document.nodes[0].kind {
        case .object:
            guard operation(0, in: &document) else { return nil }
        case .array where document.nodes[0].count > 0:
            for item in document.children(of: 0) {
                guard document.nodes[item].kind == .object, operation(item, in: &document) else { return nil }
            }
        default:
            return nil
        }
        for pointer in ignoringTokens { document.remove(pointer[...], at: 0) }
        return document.canonical()
    }

    /// Makes one operation object canonical: its `query` replaced by its canonical text, its absent-as-null members
    /// left out. False when it has no `query` string or the query does not read as GraphQL.
    static func operation(_ object: Int, in document: inout CanonicalJSON.Document) -> Bool {
        var sawQuery = false
        for name in document.members(of: object) {
            let value = name + 1
            let kind = document.nodes[value].kind
            if document.value(of: name, is: Array("query".utf8)) {
                guard kind == .string, let text = self.document(document.unescaped(value)) else { return false }
                document.replacements.append(text)
                document.nodes[value].kind = .replaced
                document.nodes[value].start = Int32(document.replacements.count - 1)
                sawQuery = true
            } else if kind == .scalar, document.text(of: value) == "null",
                ["operationName", "variables", "extensions"].contains(where: { document.value(of: name, is: Array($0.utf8)) })
            {
                document.nodes[name].removed = true
            } else if kind == .object, document.nodes[value].count == 0, document.value(of: name, is: Array("variables".utf8)) {
                document.nodes[name].removed = true
            }
        }
        return sawQuery
    }

    /// The canonical text of a GraphQL document: its tokens, as above; nil when it does not read by GraphQL's lexical
    /// grammar (a character no token starts with, a string left open, a bad escape), its brackets do not pair, or it
    /// has no token.
    package static func document(_ text: [UInt8]) -> [UInt8]? {
        // The most the text can take: each byte of a string written as `\u00xx` (six), a space between two words.
        let bound = 6 * text.count + 16
        var open: [UInt8] = []
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            var out = CanonicalJSON.Output(base: buffer.baseAddress!, capacity: bound)
            valid = text.withUnsafeBufferPointer { bytes -> Bool in
                var lexer = Lexer(bytes: bytes)
                var lastWasWord = false
                var tokens = 0
                while let token = lexer.next() {
                    switch token {
                    case .invalid:
                        return false
                    case .punctuator(let byte):
                        switch byte {
                        case UInt8(ascii: "{"), UInt8(ascii: "("), UInt8(ascii: "["): open.append(byte)
                        case UInt8(ascii: "}"): guard open.popLast() == UInt8(ascii: "{") else { return false }
                        case UInt8(ascii: ")"): guard open.popLast() == UInt8(ascii: "(") else { return false }
                        case UInt8(ascii: "]"): guard open.popLast() == UInt8(ascii: "[") else { return false }
                        default: break
                        }
                        out.put(byte)
                        lastWasWord = false
                    case .spread:
                        for _ in 0..<3 { out.put(UInt8(ascii: ".")) }
                        lastWasWord = false
                    case .word(let range):
                        // Two names or numbers in a row need a space between them; nothing else does.
                        if lastWasWord { out.put(UInt8(ascii: " ")) }
                        out.put(UnsafeBufferPointer(rebasing: bytes[range]))
                        lastWasWord = true
                    case .rawString(let range):
                        CanonicalJSON.writeString(UnsafeBufferPointer(rebasing: bytes[range]), to: &out)
                        lastWasWord = false
                    case .string(let value):
                        CanonicalJSON.writeString(value, to: &out)
                        lastWasWord = false
                    }
                    tokens += 1
                }
                return tokens > 0 && open.isEmpty
            }
            count = out.count
        }
        return valid ? out : nil
    }

    enum Token {
        case punctuator(UInt8)
        case spread
        /// A name, or a number as written.
        case word(Range<Int>)
        /// A string without escapes: its value is these bytes (UTF-8, checked).
        case rawString(Range<Int>)
        /// A string's value, UTF-8.
        case string([UInt8])
        case invalid
    }

    /// GraphQL's lexical grammar (the October 2021 specification, §2.1), over UTF-8 bytes in place.
    struct Lexer {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            // A byte order mark is ignored.
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { i = 3 }
        }

        /// The next token, nil at the end.
        mutating func next() -> Token? {
            skipIgnored()
            guard i < bytes.count else { return nil }
            let byte = bytes[i]
            switch byte {
            case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: ":"),
                UInt8(ascii: "="), UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"), UInt8(ascii: "|"),
                UInt8(ascii: "}"):
                i += 1
                return .punctuator(byte)
            case UInt8(ascii: "."):
                guard i + 2 < bytes.count, bytes[i + 1] == byte, bytes[i + 2] == byte else { return .invalid }
                i += 3
                return .spread
            case UInt8(ascii: "\""):
                if i + 2 < bytes.count, bytes[i + 1] == byte, bytes[i + 2] == byte { return blockString() }
                return string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return number()
            default:
                guard isNameStart(byte) else { return .invalid }
                let start = i
                while i < bytes.count, isNameStart(bytes[i]) || isDigit(bytes[i]) { i += 1 }
                return .word(start..<i)
            }
        }

        /// White space, line terminators, commas and comments.
        mutating func skipIgnored() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: ","):
                    i += 1
                case UInt8(ascii: "#"):
                    while i < bytes.count, bytes[i] != 0x0A, bytes[i] != 0x0D { i += 1 }
                default:
                    return
                }
            }
        }

        func isNameStart(_ byte: UInt8) -> Bool {
            (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") || byte == UInt8(ascii: "_")
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        /// IntValue or FloatValue, as written; neither may be followed by a name start, a digit or a `.`.
        mutating func number() -> Token {
            let start = i
            if bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { return .invalid }
            // No leading zero before other digits.
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
                if i < bytes.count, isDigit(bytes[i]) { return .invalid }
            } else {
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                let digits = i
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
                guard i > digits else { return .invalid }
            }
            if i < bytes.count, bytes[i] | 0x20 == UInt8(ascii: "e") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                let digits = i
                while i < bytes.count, isDigit(bytes[i]) { i += 1 }
                guard i > digits else { return .invalid }
            }
            if i < bytes.count, isNameStart(bytes[i]) || bytes[i] == UInt8(ascii: ".") { return .invalid }
            return .word(start..<i)
        }

        /// A `"…"` string's value: escapes `\" \\ \/ \b \f \n \r \t`, `\uXXXX` (surrogate pairs joined) and `\u{…}`;
        /// no line terminator inside.
        mutating func string() -> Token {
            i += 1
            // Most strings have no escape: their value is their bytes, read in place.
            let start = i
            var high = false
            while i < bytes.count {
                let byte = bytes[i]
                if byte == UInt8(ascii: "\"") {
                    let range = start..<i
                    i += 1
                    guard !high || String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) != nil else { return .invalid }
                    return .rawString(range)
                }
                if byte == 0x0A || byte == 0x0D { return .invalid }
                if byte == UInt8(ascii: "\\") { break }
                if byte >= 0x80 { high = true }
                i += 1
            }
            guard i < bytes.count else { return .invalid }
            var out = Array(bytes[start..<i])
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(validating: out, as: UTF8.self) == nil ? .invalid : .string(out)
                case 0x0A, 0x0D:
                    return .invalid
                case UInt8(ascii: "\\"):
                    guard i < bytes.count else { return .invalid }
                    let escape = bytes[i]
                    i += 1
                    if let byte = CanonicalJSON.unescapedByte(escape) {
                        out.append(byte)
                    } else if escape == UInt8(ascii: "u"), let scalar = unicodeEscape() {
                        out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    } else {
                        return .invalid
                    }
                default:
                    out.append(byte)
                }
            }
            return .invalid
        }

        /// After `\u`: four hex digits (a high surrogate followed by `\u` and a low one), or `{` hex digits `}`.
        mutating func unicodeEscape() -> Unicode.Scalar? {
            if i < bytes.count, bytes[i] == UInt8(ascii: "{") {
                i += 1
                var value: UInt32 = 0
                var digits = 0
                while i < bytes.count, let digit = CanonicalForm.hexValue(bytes[i]) {
                    value = value << 4 | UInt32(digit)
                    digits += 1
                    i += 1
                    guard digits <= 8 else { return nil }
                }
                guard digits > 0, i < bytes.count, bytes[i] == UInt8(ascii: "}") else { return nil }
                i += 1
                return Unicode.Scalar(value)
            }
            guard let unit = hex4() else { return nil }
            if (0xD800...0xDBFF).contains(unit) {
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { return nil }
                i += 2
                guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                return Unicode.Scalar(0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00))
            }
            return Unicode.Scalar(UInt32(unit))
        }

        mutating func hex4() -> UInt16? {
            guard i + 4 <= bytes.count else { return nil }
            var value: UInt16 = 0
            for byte in bytes[i..<(i + 4)] {
                guard let digit = CanonicalForm.hexValue(byte) else { return nil }
                value = value << 4 | UInt16(digit)
            }
            i += 4
            return value
        }

        /// A `"""…"""` block string's value (§2.9.4's BlockStringValue): `\"""` is `"""`, the common indentation of
        /// the lines after the first is removed, and blank first and last lines are dropped.
        mutating func blockString() -> Token {
            i += 3
            var raw: [UInt8] = []
            while i < bytes.count {
                if bytes[i] == UInt8(ascii: "\""), i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "\""), bytes[i + 2] == UInt8(ascii: "\"") {
                    i += 3
                    guard String(validating: raw, as: UTF8.self) != nil else { return .invalid }
                    return .string(Self.blockStringValue(raw))
                }
                if bytes[i] == UInt8(ascii: "\\"), i + 3 < bytes.count, bytes[(i + 1)...(i + 3)].allSatisfy({ $0 == UInt8(ascii: "\"") }) {
                    raw += [UInt8(ascii: "\""), UInt8(ascii: "\""), UInt8(ascii: "\"")]
                    i += 4
                    continue
                }
                raw.append(bytes[i])
                i += 1
            }
            return .invalid
        }

        static func blockStringValue(_ raw: [UInt8]) -> [UInt8] {
            // Lines end at LF, CR or CR LF.
            var lines: [ArraySlice<UInt8>] = []
            var start = 0
            var j = 0
            while j < raw.count {
                if raw[j] == 0x0A || raw[j] == 0x0D {
                    lines.append(raw[start..<j])
                    if raw[j] == 0x0D, j + 1 < raw.count, raw[j + 1] == 0x0A { j += 1 }
                    start = j + 1
                }
                j += 1
            }
            lines.append(raw[start..<raw.count])
            func indent(_ line: ArraySlice<UInt8>) -> Int { line.prefix { $0 == 0x20 || $0 == 0x09 }.count }
            let common = lines.dropFirst().filter { indent($0) < $0.count }.map(indent).min()
            if let common {
                for k in lines.indices.dropFirst() { lines[k] = lines[k].dropFirst(common) }
            }
            func blank(_ line: ArraySlice<UInt8>) -> Bool { indent(line) == line.count }
            while let first = lines.first, blank(first) { lines.removeFirst() }
            while let last = lines.last, blank(last) { lines.removeLast() }
            return Array(lines.joined(separator: [0x0A]))
        }
    }
}
