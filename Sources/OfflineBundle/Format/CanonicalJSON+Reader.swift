extension CanonicalJSON {
    /// Reads a document's bytes into nodes, written in place into memory sized for the most a document can have.
    struct Reader {
        let base: UnsafeMutablePointer<Document.Node>
        let capacity: Int
        var count = 0
        /// Whether a string holds a byte past 0x7F (the document must then be checked as UTF-8).
        var highBytes = false

        init(base: UnsafeMutablePointer<Document.Node>, capacity: Int) {
            self.base = base
            self.capacity = capacity
        }

        @inline(__always) mutating func append(_ node: Document.Node) {
            precondition(count < capacity, "a JSON document outgrew its node bound")
            (base + count).initialize(to: node)
            count += 1
        }

        func skipSpace(_ p: UnsafeBufferPointer<UInt8>, _ i: inout Int) {
            while i < p.count, p[i] == 0x20 || p[i] == 0x09 || p[i] == 0x0A || p[i] == 0x0D { i += 1 }
        }

        mutating func value(_ p: UnsafeBufferPointer<UInt8>, _ i: inout Int, depth: Int) -> Bool {
            guard depth < CanonicalJSON.maxDepth, i < p.count else { return false }
            let byte = p[i]
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let isObject = byte == UInt8(ascii: "{")
                let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                let me = count
                append(Document.Node(kind: isObject ? .object : .array, start: Int32(i), end: 0))
                i += 1
                skipSpace(p, &i)
                var count: Int32 = 0
                if i < p.count, p[i] == close {
                    i += 1
                } else {
                    while true {
                        skipSpace(p, &i)
                        if isObject {
                            guard i < p.count, p[i] == UInt8(ascii: "\""), string(p, &i) else { return false }
                            skipSpace(p, &i)
                            guard i < p.count, p[i] == UInt8(ascii: ":") else { return false }
                            i += 1
                            skipSpace(p, &i)
                        }
                        guard value(p, &i, depth: depth + 1) else { return false }
                        count += 1
                        skipSpace(p, &i)
                        guard i < p.count else { return false }
                        if p[i] == UInt8(ascii: ",") {
                            i += 1
                            continue
                        }
                        guard p[i] == close else { return false }
                        i += 1
                        break
                    }
                }
                base[me].end = Int32(i)
                base[me].size = Int32(self.count - me)
                base[me].count = count
                return true
            case UInt8(ascii: "\""):
                return string(p, &i)
            case UInt8(ascii: "t"): return literal(p, &i, "true")
            case UInt8(ascii: "f"): return literal(p, &i, "false")
            case UInt8(ascii: "n"): return literal(p, &i, "null")
            default: return number(p, &i)
            }
        }

        mutating func literal(_ p: UnsafeBufferPointer<UInt8>, _ i: inout Int, _ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard i + count <= p.count else { return false }
            let matches = word.withUTF8Buffer { $0.elementsEqual(UnsafeBufferPointer(rebasing: p[i..<(i + count)])) }
            guard matches else { return false }
            append(Document.Node(kind: .scalar, start: Int32(i), end: Int32(i + count)))
            i += count
            return true
        }

        /// RFC 8259's number grammar, kept as written.
        mutating func number(_ p: UnsafeBufferPointer<UInt8>, _ i: inout Int) -> Bool {
            let start = i
            func digits(_ i: inout Int) -> Int {
                let from = i
                while i < p.count, p[i] >= 0x30, p[i] <= 0x39 { i += 1 }
                return i - from
            }
            if i < p.count, p[i] == UInt8(ascii: "-") { i += 1 }
            guard i < p.count else { return false }
            if p[i] == UInt8(ascii: "0") {
                i += 1
            } else {
                guard digits(&i) > 0 else { return false }
            }
            if i < p.count, p[i] == UInt8(ascii: ".") {
                i += 1
                guard digits(&i) > 0 else { return false }
            }
            if i < p.count, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
                i += 1
                if i < p.count, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
                guard digits(&i) > 0 else { return false }
            }
            append(Document.Node(kind: .scalar, start: Int32(start), end: Int32(i)))
            return true
        }

        /// A string at `i` (its opening quote), its escapes checked: no raw control byte, only JSON's escapes, a
        /// `\u` high surrogate followed by a `\u` low one, no lone low surrogate.
        mutating func string(_ p: UnsafeBufferPointer<UInt8>, _ i: inout Int) -> Bool {
            i += 1
            let start = i
            var escaped = false
            let base = p.baseAddress!
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while i < p.count {
                // Eight bytes at a time, up to the first that ends the string, escapes or is refused: in each byte of
                // `stops`, the high bit says the byte is a quote, a backslash or below 0x20 (the lowest one flagged
                // is exact; a borrow may flag bytes above it).
                while i + 8 <= p.count {
                    let x = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                    if x & highs != 0 { highBytes = true }
                    let quote = x ^ 0x2222_2222_2222_2222
                    let backslash = x ^ 0x5C5C_5C5C_5C5C_5C5C
                    let stops = ((quote &- ones) & ~quote | (backslash &- ones) & ~backslash | (x &- 0x2020_2020_2020_2020) & ~x) & highs
                    if stops != 0 {
                        i += stops.trailingZeroBitCount >> 3
                        break
                    }
                    i += 8
                }
                guard i < p.count else { return false }
                let byte = p[i]
                if byte == UInt8(ascii: "\"") {
                    append(Document.Node(kind: .string, escaped: escaped, start: Int32(start), end: Int32(i)))
                    i += 1
                    return true
                }
                if byte < 0x20 { return false }
                if byte >= 0x80 { highBytes = true }
                i += 1
                guard byte == UInt8(ascii: "\\") else { continue }
                escaped = true
                guard i < p.count else { return false }
                let escape = p[i]
                i += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                    UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard let unit = Self.hex4(p, at: i) else { return false }
                    i += 4
                    if (0xD800...0xDBFF).contains(unit) {
                        guard i + 1 < p.count, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u"), let low = Self.hex4(p, at: i + 2),
                            (0xDC00...0xDFFF).contains(low)
                        else { return false }
                        i += 6
                    } else if (0xDC00...0xDFFF).contains(unit) {
                        return false
                    }
                default:
                    return false
                }
            }
            return false
        }

        static func hex4(_ p: UnsafeBufferPointer<UInt8>, at i: Int) -> UInt16? {
            guard i + 4 <= p.count else { return nil }
            var value: UInt16 = 0
            for k in i..<(i + 4) {
                guard let digit = CanonicalForm.hexValue(p[k]) else { return nil }
                value = value << 4 | UInt16(digit)
            }
            return value
        }
    }
}
