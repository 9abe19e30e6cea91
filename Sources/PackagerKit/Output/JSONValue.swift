import Foundation

/// A JSON value, Sendable: the DevTools protocol's messages, and what the HAR and WACZ exports write
/// (``writeSortingKeys(to:)``).
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// A value of what `JSONSerialization` gives.
    init(_ any: Any?) {
        switch any {
        case let value as String: self = .string(value)
        // Booleans may come as numbers (0 and 1); ``bool`` reads both.
        case let value as NSNumber: self = .number(value.doubleValue)
        case let value as Bool: self = .bool(value)
        case let value as [Any]: self = .array(value.map { JSONValue($0) })
        case let value as [String: Any]: self = .object(value.mapValues { JSONValue($0) })
        default: self = .null
        }
    }

    /// What `JSONSerialization` takes.
    var any: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let value): return value
        case .number(let value): return value
        case .string(let value): return value
        case .array(let values): return values.map(\.any)
        case .object(let members): return members.mapValues(\.any)
        }
    }

    subscript(key: String) -> JSONValue {
        if case .object(let members) = self { return members[key] ?? .null }
        return .null
    }

    var string: String? { if case .string(let value) = self { value } else { nil } }
    var int: Int? { if case .number(let value) = self, value.isFinite, abs(value) < 1e15 { Int(value) } else { nil } }
    var bool: Bool? {
        switch self {
        case .bool(let value): value
        case .number(let value): value != 0
        default: nil
        }
    }
    var array: [JSONValue] { if case .array(let values) = self { values } else { [] } }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByDictionaryLiteral,
    ExpressibleByArrayLiteral
{
    init(stringLiteral value: String) { self = .string(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue {
    /// Appends the value as `JSONSerialization` writes it with `.sortedKeys` and `.withoutEscapingSlashes`, without
    /// its bridging to Foundation's classes (which took four fifths of a HAR export): `"`, `\` and the bytes below 0x20
    /// escaped (`\b`, `\t`, `\n`, `\f`, `\r`, the others `\u00xx`), everything else raw; whole numbers as integers; an
    /// object's keys in Foundation's order for keys made of letters and `_` (a HAR's): case-insensitive, lowercase
    /// first on a tie.
    func writeSortingKeys(to out: inout [UInt8]) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let value): out += (value ? "true" : "false").utf8
        case .number(let value):
            if value.rounded() == value, abs(value) < 1e15 { out += String(Int(value)).utf8 } else { out += "\(value)".utf8 }
        case .string(let value): Self.writeString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (i, value) in values.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                value.writeSortingKeys(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted(by: Self.keyPrecedes).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.writeSortingKeys(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Whether key `a` sorts before `b` as `JSONSerialization`'s `.sortedKeys` sorts keys of letters and `_`.
    static func keyPrecedes(_ a: String, _ b: String) -> Bool {
        func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c + 0x20 : c }
        if !a.utf8.lazy.map(lower).elementsEqual(b.utf8.lazy.map(lower)) {
            return a.utf8.lazy.map(lower).lexicographicallyPrecedes(b.utf8.lazy.map(lower))
        }
        return b.utf8.lexicographicallyPrecedes(a.utf8)
    }

    /// `text` as a JSON string: `"`, `\` and the bytes below 0x20 escaped, everything else raw.
    static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), byte]
            case 0x08: out += "\\b".utf8
            case 0x09: out += "\\t".utf8
            case 0x0A: out += "\\n".utf8
            case 0x0C: out += "\\f".utf8
            case 0x0D: out += "\\r".utf8
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += "\\u00".utf8
                out += [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
