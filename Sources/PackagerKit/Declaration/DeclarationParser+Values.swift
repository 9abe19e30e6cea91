import Foundation
import OfflineBundle
import Yams

/// The values a declaration is made of: mappings with known keys (and a did-you-mean), strings, URLs, booleans,
/// integers, durations and sizes, each refused with its file, line and column.
extension DeclarationReader {
    /// The pairs of a mapping, after checking every key against `keys`.
    func mapping(_ node: Node, in place: String, keys: [String]) throws -> [(Node, Node)] {
        guard case .mapping(let map) = node else { throw fail(node, "\(place) must be a mapping of keys to values") }
        var seen: Set<String> = []
        var pairs: [(Node, Node)] = []
        for (key, value) in map {
            guard let name = key.string else { throw fail(key, "keys in \(place) must be plain names") }
            guard keys.contains(name) else {
                let hint = nearest(name, in: keys).map { "; did you mean '\($0)'?" } ?? "; known keys: \(keys.joined(separator: ", "))"
                throw fail(key, "unknown key '\(name)' in \(place)\(hint)")
            }
            guard seen.insert(name).inserted else { throw fail(key, "'\(name)' is given twice in \(place)") }
            pairs.append((key, value))
        }
        return pairs
    }

    func string(_ node: Node, _ what: String) throws -> String {
        guard case .scalar(let scalar) = node else { throw fail(node, "\(what) must be a single value, not a list or mapping") }
        return scalar.string
    }

    func stringList(_ node: Node, _ what: String) throws -> [String] {
        switch node {
        case .scalar(let scalar): return [scalar.string]
        case .sequence(let items): return try items.map { try string($0, "each item of \(what)") }
        default: throw fail(node, "\(what) must be a list of values")
        }
    }

    func urlList(_ node: Node, _ what: String) throws -> [String] {
        let items = try items(node, what, expected: "URLs")
        return try items.map { item in
            let text = try string(item, "each item of \(what)")
            try checkURL(text, at: item, "\(what) item")
            return text
        }
    }

    func checkURL(_ text: String, at node: Node, _ what: String) throws {
        // A URL holds no spaces or control characters: one that does is most often two items run together (a list
        // item indented one space too far continues the item above), which encoding would turn into a URL that exists nowhere.
        if let blank = text.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
            let named = blank == " " ? "a space" : "the control character U+\(String(format: "%04X", blank.value))"
            throw fail(node, "\(what) '\(text)' holds \(named), which a URL cannot (write a space in a path as %20)")
        }
        guard HTTPRules.isFetchableURL(text) else { throw fail(node, "\(what) '\(text)' is not an absolute http or https URL") }
    }

    func bool(_ node: Node, _ what: String) throws -> Bool {
        guard let value = node.bool else { throw fail(node, "\(what) must be true or false") }
        return value
    }

    func integer(_ node: Node, _ what: String, minimum: Int, maximum: Int? = nil) throws -> Int {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string.replacingOccurrences(of: "_", with: "")) else {
            throw fail(node, "\(what) must be a whole number")
        }
        if let maximum, !(minimum...maximum).contains(value) { throw fail(node, "\(what) must be \(minimum) to \(maximum)") }
        guard value >= minimum else { throw fail(node, "\(what) must be at least \(minimum)") }
        return value
    }

    /// Seconds, from a number or `500ms`, `10s`, `2m`, `1h`.
    func duration(_ node: Node, _ what: String, positive: Bool = false) throws -> Double {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        guard let seconds = quantity(node, units: units), seconds >= 0 else {
            throw fail(node, "\(what) must be a duration such as 10s or 500ms\(Self.not(node))")
        }
        if positive && seconds <= 0 { throw fail(node, "\(what) must be more than zero") }
        // A day bounds every wait: longer is a mistake, and keeps the arithmetic on nanoseconds safe.
        guard seconds <= 86_400 else { throw fail(node, "\(what) must be at most a day (24h)") }
        return seconds
    }

    /// Bytes, from a number or `500KB`, `20MiB`, `1GB` (KB/MB/GB are powers of 1000, KiB/MiB/GiB and K/M/G of 1024).
    func size(_ node: Node, _ what: String) throws -> Int64 {
        guard case .scalar(let scalar) = node, let bytes = DeclarationParser.byteSize(scalar.string) else {
            throw fail(node, "\(what) must be a size such as 500MB or 2GiB\(Self.not(node))")
        }
        return bytes
    }

    /// A scalar's number, scaled by the first unit suffix it ends with (``DeclarationParser/quantity(_:units:)``).
    func quantity(_ node: Node, units: [(suffix: String, factor: Double)]) -> Double? {
        guard case .scalar(let scalar) = node else { return nil }
        return DeclarationParser.quantity(scalar.string, units: units)
    }

    /// `, not 'VALUE'` for a scalar, nothing for a list or mapping.
    static func not(_ node: Node) -> String {
        if case .scalar(let scalar) = node { return ", not '\(scalar.string)'" }
        return ""
    }

    /// The known key closest to `name` by edit distance, when it is close enough to be a typo.
    func nearest(_ name: String, in keys: [String]) -> String? {
        let scored = keys.map { ($0, editDistance(name.lowercased(), $0)) }.min { $0.1 < $1.1 }
        guard let (key, distance) = scored, distance <= max(2, key.count / 3) else { return nil }
        return key
    }

    func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
