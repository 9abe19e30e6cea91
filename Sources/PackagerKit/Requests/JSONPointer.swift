import Crypto
import Foundation
import OfflineBundle

/// A JSON pointer (RFC 6901), where a `*` step also stands for any one member or element (`/rows/*/updated_at`).
struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    /// The steps, unescaped (`~1` is `/`, `~0` is `~`).
    let steps: [String]
    let description: String

    /// Parses `text`; nil when it is not a pointer: not empty and not starting with `/`, or `~` not followed by 0 or 1.
    init?(_ text: String) {
        guard text.isEmpty || text.hasPrefix("/") else { return nil }
        var steps: [String] = []
        for raw in text.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            var step = ""
            var escaped = false
            for character in raw {
                if escaped {
                    guard character == "0" || character == "1" else { return nil }
                    step.append(character == "0" ? "~" : "/")
                    escaped = false
                } else if character == "~" {
                    escaped = true
                } else {
                    step.append(character)
                }
            }
            guard !escaped else { return nil }
            steps.append(step)
        }
        self.steps = steps
        description = text
    }

    /// Why `text` is not a pointer, for a message.
    static func problem(_ text: String) -> String? {
        if JSONPointer(text) != nil { return nil }
        return text.hasPrefix("/") || text.isEmpty
            ? "'\(text)' is not a JSON pointer: '~' must be followed by 0 or 1"
            : "'\(text)' is not a JSON pointer: it must start with '/' (e.g. /next_url, /rows/*/updated_at)"
    }

    /// The value the pointer names in `value` (a `JSONSerialization` object), with no `*` step; nil when absent.
    func resolve(in value: Any) -> Any? {
        var current: Any = value
        for step in steps {
            if let object = current as? [String: Any], let next = object[step] {
                current = next
            } else if let array = current as? [Any], let index = Int(step), index >= 0, index < array.count {
                current = array[index]
            } else {
                return nil
            }
        }
        return current
    }

    /// `value` without what the pointer names (every match of a `*` step).
    func removing(from value: Any) -> Any { Self.remove(steps[...], from: value) }

    private static func remove(_ steps: ArraySlice<String>, from value: Any) -> Any {
        guard let step = steps.first else { return value }
        let rest = steps.dropFirst()
        if var object = value as? [String: Any] {
            let names = step == "*" ? Array(object.keys) : [step]
            for name in names where object[name] != nil {
                if rest.isEmpty { object[name] = nil } else { object[name] = remove(rest, from: object[name]!) }
            }
            return object
        }
        if var array = value as? [Any] {
            let indices = step == "*" ? Array(array.indices) : (Int(step).map { [$0] } ?? []).filter { array.indices.contains($0) }
            if rest.isEmpty {
                // Removed from the end first, so the indices still point where they did.
                for index in indices.sorted(by: >) { array.remove(at: index) }
            } else {
                for index in indices { array[index] = remove(rest, from: array[index]) }
            }
            return array
        }
        return value
    }
}

/// What stays the same between two answers of an API whose JSON carries fields that change every time.
enum StableJSON {
    /// The SHA-256 (hex) of `body`'s JSON with the `volatile` fields removed, keys sorted, no spaces; nil when the body
    /// is not JSON.
    static func digest(of body: Data, volatile: [String]) -> String? {
        guard let stable = stableData(body, volatile: volatile) else { return nil }
        return hexString(Array(SHA256.hash(data: stable)))
    }

    /// `body`'s JSON without the volatile fields, serialized with sorted keys.
    static func stableData(_ body: Data, volatile: [String]) -> Data? {
        guard var value = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return nil }
        for pointer in volatile.compactMap(JSONPointer.init) { value = pointer.removing(from: value) }
        return try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
    }
}
