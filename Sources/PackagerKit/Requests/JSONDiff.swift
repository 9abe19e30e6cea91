import Foundation

/// The differences between two JSON documents, as JSON pointers and the values on each side: what `packager diff`
/// and `verify` show for an API's answer (`/rows/12/name: "Auckland" -> "Tāmaki Makaurau"`).
enum JSONDiff {
    /// One difference: the pointer, and the value on each side (JSON text), nil where the member is absent.
    struct Difference: Equatable {
        var pointer: String
        var old: String?
        var new: String?

        /// `/rows/12/name: "Auckland" -> "Tāmaki Makaurau"`, values cut at 80 characters.
        var line: String {
            func shown(_ value: String?) -> String {
                guard let value else { return "(absent)" }
                return value.count > 80 ? String(value.prefix(77)) + "..." : value
            }
            return "\(pointer.isEmpty ? "/" : pointer): \(shown(old)) -> \(shown(new))"
        }
    }

    /// The differences between `old` and `new` (parsed JSON), in document order, at most `limit` of them; `total`
    /// counts them all.
    static func differences(_ old: Any, _ new: Any, limit: Int = 20) -> (shown: [Difference], total: Int) {
        var found: [Difference] = []
        var total = 0
        walk(old, new, pointer: "", into: &found, total: &total, limit: limit)
        return (found, total)
    }

    /// Both bodies parsed, or nil when either is not JSON.
    static func parse(_ data: Data) -> Any? { try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) }

    private static func walk(_ old: Any?, _ new: Any?, pointer: String, into found: inout [Difference], total: inout Int, limit: Int) {
        if let a = old as? [String: Any], let b = new as? [String: Any] {
            for name in Set(a.keys).union(b.keys).sorted() {
                walk(a[name], b[name], pointer: pointer + "/" + escape(name), into: &found, total: &total, limit: limit)
            }
            return
        }
        if let a = old as? [Any], let b = new as? [Any] {
            for i in 0..<max(a.count, b.count) {
                walk(i < a.count ? a[i] : nil, i < b.count ? b[i] : nil, pointer: pointer + "/\(i)", into: &found, total: &total, limit: limit)
            }
            return
        }
        let oldText = old.map(text)
        let newText = new.map(text)
        guard oldText != newText else { return }
        total += 1
        if found.count < limit { found.append(Difference(pointer: pointer, old: oldText, new: newText)) }
    }

    /// A pointer step: `~` as `~0`, `/` as `~1` (RFC 6901).
    static func escape(_ name: String) -> String { name.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1") }

    /// A value as compact JSON text, keys sorted.
    static func text(_ value: Any) -> String {
        if value is NSNull { return "null" }
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes]) else {
            return "\(value)"
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A unified diff of two texts by lines, for `packager diff` on a changed text body: the changed lines with up to
/// `context` lines around them, at most `limit` lines in all.
enum TextDiff {
    static func unified(_ old: String, _ new: String, context: Int = 2, limit: Int = 40) -> [String] {
        let a = old.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let b = new.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // The longest common subsequence by dynamic programming, on texts of a bounded size (larger ones: first and
        // last differing lines only).
        guard a.count * b.count <= 4_000_000 else {
            var first = 0
            while first < min(a.count, b.count), a[first] == b[first] { first += 1 }
            return [
                "@@ line \(first + 1) @@", "- " + (first < a.count ? a[first] : ""), "+ " + (first < b.count ? b[first] : ""),
                "… (texts too long to compare line by line)",
            ]
        }
        var lcs = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : max(lcs[i + 1][j], lcs[i][j + 1])
            }
        }
        // The edit script: (" ", line), ("-", line), ("+", line).
        var script: [(String, String)] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] {
                script.append((" ", a[i]))
                i += 1
                j += 1
            } else if i < a.count, j == b.count || lcs[i + 1][j] >= lcs[i][j + 1] {
                // A line replaced reads as diff prints it: the old line, then the new.
                script.append(("-", a[i]))
                i += 1
            } else {
                script.append(("+", b[j]))
                j += 1
            }
        }
        // Lines within `context` of a change.
        let changed = script.indices.filter { script[$0].0 != " " }
        guard !changed.isEmpty else { return [] }
        var keep = Set<Int>()
        for index in changed { for k in max(0, index - context)...min(script.count - 1, index + context) { keep.insert(k) } }
        var out: [String] = []
        var previous = -2
        for index in keep.sorted() {
            if index != previous + 1 { out.append("@@") }
            out.append(script[index].0 + " " + script[index].1)
            previous = index
            if out.count >= limit {
                out.append("… (\(changed.count) changed lines in all)")
                break
            }
        }
        return out
    }
}
