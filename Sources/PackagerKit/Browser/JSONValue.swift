import Foundation

/// A JSON value, Sendable, for the DevTools protocol's messages.
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
