/// The canonical form of a JSON request body (docs/FORMAT.md §5.5), so that a client that sends the same document
/// with its members in another order, or with other whitespace, is matched as the recorded request was: members
/// sorted by the bytes of their names, no insignificant whitespace, numbers as written, strings escaped only where
/// JSON requires. Members and elements an ignore pointer names are left out (a request id, a timestamp).
package enum CanonicalJSON {
    /// A JSON value as parsed: strings and names unescaped to UTF-8, numbers and literals as written.
    indirect enum Value {
        case object([(name: [UInt8], value: Value)])
        case array([Value])
        case string([UInt8])
        case scalar(ArraySlice<UInt8>)
    }

    /// Deeper documents are not canonicalized (matched by their bytes): the parse is recursive.
    static let maxDepth = 256

    /// The canonical bytes of `bytes`, one JSON value (RFC 8259) with optional whitespace around it, without what
    /// `ignoring` names; nil when it is not exactly one JSON value, has a name twice in one object, holds a lone
    /// surrogate escape, or nests deeper than 256.
    ///
    /// - Parameter ignoring: JSON pointers (RFC 6901) as their reference tokens, unescaped; a `*` token stands for
    ///   any one member or element.
    package static func canonical(_ bytes: [UInt8], ignoring: [[String]] = []) -> [UInt8]? {
        var parser = Parser(bytes: bytes)
        guard var value = parser.document() else { return nil }
        for pointer in ignoring { value = removing(pointer[...], from: value) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        write(value, to: &out)
        return out
    }

    /// A pointer's reference tokens (`/a/b~1c` → `["a", "b/c"]`); nil when it is not a JSON pointer. The empty pointer
    /// (the whole document) has no tokens.
    package static func tokens(ofPointer pointer: String) -> [String]? {
        if pointer.isEmpty { return [] }
        guard pointer.hasPrefix("/") else { return nil }
        var tokens: [String] = []
        for raw in pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            // `~` is escaped as `~0`, `/` as `~1`; any other `~` is an error.
            var token = ""
            var index = raw.startIndex
            while index < raw.endIndex {
                let c = raw[index]
                if c == "~" {
                    let next = raw.index(after: index)
                    guard next < raw.endIndex, raw[next] == "0" || raw[next] == "1" else { return nil }
                    token.append(raw[next] == "0" ? "~" : "/")
                    index = raw.index(after: next)
                } else {
                    token.append(c)
                    index = raw.index(after: index)
                }
            }
            tokens.append(token)
        }
        return tokens
    }

    /// Where two JSON documents differ, in document order (members by name): each place's JSON pointer and the
    /// canonical text of the value on either side (nil where that side has none). Nil when either is not one JSON
    /// value. At most `limit` places are listed.
    package static func differences(_ mine: [UInt8], _ recorded: [UInt8], limit: Int = 50) -> [(pointer: String, mine: String?, recorded: String?)]? {
        var a = Parser(bytes: mine)
        var b = Parser(bytes: recorded)
        guard let x = a.document(), let y = b.document() else { return nil }
        var found: [(pointer: String, mine: String?, recorded: String?)] = []
        difference(x, y, at: "", into: &found, limit: limit)
        return found
    }

    static func difference(_ x: Value?, _ y: Value?, at pointer: String, into found: inout [(pointer: String, mine: String?, recorded: String?)], limit: Int) {
        guard found.count < limit else { return }
        func text(_ value: Value?) -> String? {
            guard let value else { return nil }
            var out: [UInt8] = []
            write(value, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        switch (x, y) {
        case (.object(let m)?, .object(let n)?):
            let names = Set(m.map(\.name)).union(n.map(\.name)).sorted { $0.lexicographicallyPrecedes($1) }
            for name in names {
                let token = String(decoding: name, as: UTF8.self).replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
                difference(m.first { $0.name == name }?.value, n.first { $0.name == name }?.value, at: pointer + "/" + token, into: &found, limit: limit)
            }
        case (.array(let m)?, .array(let n)?):
            for i in 0..<max(m.count, n.count) {
                difference(i < m.count ? m[i] : nil, i < n.count ? n[i] : nil, at: pointer + "/" + String(i), into: &found, limit: limit)
            }
        default:
            let (mine, recorded) = (text(x), text(y))
            if mine != recorded { found.append((pointer, mine, recorded)) }
        }
    }

    static func removing(_ pointer: ArraySlice<String>, from value: Value) -> Value {
        guard let token = pointer.first else { return value }
        let rest = pointer.dropFirst()
        let name = Array(token.utf8)
        switch value {
        case .object(let members):
            var kept: [(name: [UInt8], value: Value)] = []
            for member in members {
                guard token == "*" || member.name == name else {
                    kept.append(member)
                    continue
                }
                // The last token names what is left out; an earlier one, where to look further.
                if !rest.isEmpty { kept.append((member.name, removing(rest, from: member.value))) }
            }
            return .object(kept)
        case .array(let elements):
            var kept: [Value] = []
            for (i, element) in elements.enumerated() {
                guard token == "*" || token == String(i) else {
                    kept.append(element)
                    continue
                }
                if !rest.isEmpty { kept.append(removing(rest, from: element)) }
            }
            return .array(kept)
        default:
            return value
        }
    }

    static func write(_ value: Value, to out: inout [UInt8]) {
        switch value {
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, member) in members.sorted(by: { $0.name.lexicographicallyPrecedes($1.name) }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.name, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .string(let bytes):
            writeString(bytes, to: &out)
        case .scalar(let bytes):
            out.append(contentsOf: bytes)
        }
    }

    /// `"` + the bytes, with `"` and `\` escaped, LF, CR and TAB as `\n`, `\r`, `\t`, other bytes below 0x20 as
    /// `\u00xx` (lowercase hex), everything else raw (§6.1's STRING).
    static func writeString(_ bytes: [UInt8], to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case ..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    struct Parser {
        let bytes: [UInt8]
        var i = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func document() -> Value? {
            skipSpace()
            guard let value = value(depth: 0) else { return nil }
            skipSpace()
            return i == bytes.count ? value : nil
        }

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        mutating func value(depth: Int) -> Value? {
            guard depth < CanonicalJSON.maxDepth, i < bytes.count else { return nil }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                i += 1
                var members: [(name: [UInt8], value: Value)] = []
                var names = Set<[UInt8]>()
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
                    i += 1
                    return .object([])
                }
                while true {
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\""), let name = string() else { return nil }
                    // A name twice: which one counts is up to the server, so the document has no one canonical form.
                    guard names.insert(name).inserted else { return nil }
                    skipSpace()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
                    i += 1
                    skipSpace()
                    guard let member = value(depth: depth + 1) else { return nil }
                    members.append((name, member))
                    skipSpace()
                    guard i < bytes.count else { return nil }
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard bytes[i] == UInt8(ascii: "}") else { return nil }
                    i += 1
                    return .object(members)
                }
            case UInt8(ascii: "["):
                i += 1
                var elements: [Value] = []
                skipSpace()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
                    i += 1
                    return .array([])
                }
                while true {
                    skipSpace()
                    guard let element = value(depth: depth + 1) else { return nil }
                    elements.append(element)
                    skipSpace()
                    guard i < bytes.count else { return nil }
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard bytes[i] == UInt8(ascii: "]") else { return nil }
                    i += 1
                    return .array(elements)
                }
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        mutating func literal(_ word: StaticString) -> Value? {
            let count = word.utf8CodeUnitCount
            guard i + count <= bytes.count else { return nil }
            let matches = word.withUTF8Buffer { Array($0) == Array(bytes[i..<(i + count)]) }
            guard matches else { return nil }
            i += count
            return .scalar(bytes[(i - count)..<i])
        }

        /// RFC 8259's number grammar, kept as written.
        mutating func number() -> Value? {
            let start = i
            func digits() -> Int {
                let from = i
                while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
                return i - from
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count else { return nil }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
            } else {
                guard digits() > 0 else { return nil }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard digits() > 0 else { return nil }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                guard digits() > 0 else { return nil }
            }
            return .scalar(bytes[start..<i])
        }

        /// A string at `i` (its opening quote), unescaped to UTF-8; nil when malformed (a raw control byte, a bad
        /// escape, a lone surrogate, bytes that are not UTF-8).
        mutating func string() -> [UInt8]? {
            i += 1
            var out: [UInt8] = []
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                switch byte {
                case UInt8(ascii: "\""):
                    // Validated once whole: the raw bytes between escapes must be UTF-8.
                    guard String(validating: out, as: UTF8.self) != nil else { return nil }
                    return out
                case UInt8(ascii: "\\"):
                    guard i < bytes.count else { return nil }
                    let escape = bytes[i]
                    i += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        guard let unit = hex4() else { return nil }
                        var scalar = UInt32(unit)
                        if (0xD800...0xDBFF).contains(unit) {
                            guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { return nil }
                            i += 2
                            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                            scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(unit) {
                            return nil
                        }
                        guard let character = Unicode.Scalar(scalar) else { return nil }
                        out.append(contentsOf: Array(String(Character(character)).utf8))
                    default: return nil
                    }
                case ..<0x20:
                    return nil
                default:
                    out.append(byte)
                }
            }
            return nil
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
    }
}
