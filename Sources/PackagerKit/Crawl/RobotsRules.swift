/// The crawl rules a robots.txt file sets for one crawler, parsed per RFC 9309.
///
/// A group is one or more `user-agent` lines followed by `allow` and `disallow` rules. The crawler
/// obeys every group naming its product token (compared case-insensitively, merged when there are
/// several), or else every `*` group, or else nothing. A path is allowed unless the longest matching
/// rule (counted in octets of the pattern) is a disallow; an allow wins a tie. Patterns support `*`
/// and a trailing `$`. Both patterns and paths are compared in a normalized percent-encoding:
/// escapes of unreserved characters are decoded, other escapes uppercased, and bytes outside
/// printable ASCII encoded. `Sitemap:` lines are collected wherever they appear. Unknown or
/// malformed lines are ignored; CR, LF and CR LF all end lines, and a leading BOM is skipped.
struct RobotsRules: Sendable {
    /// One allow or disallow line, prepared for matching.
    private struct Rule: Sendable {
        /// The pattern split at its wildcards, normalized; `$` removed.
        let pieces: [[UInt8]]
        let anchored: Bool
        /// The pattern's length in octets, as written (normalized), for the longest-match rule.
        let length: Int
        let allow: Bool
    }

    private let rules: [Rule]
    /// The `Sitemap:` URLs, in order, without repeats.
    let sitemaps: [String]
    /// When robots.txt could not be fetched and these rules disallow everything (RFC 9309 §2.3.1.4): why.
    var unavailable: FetchError?

    /// Parses `text` and keeps the rules that apply to `userAgent` (a product token such as
    /// "packager", or a full User-Agent string whose leading token is used).
    init(parsing text: String, userAgent: String) {
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        let token = Self.productToken(Array(userAgent.utf8))

        var groups: [(agents: [[UInt8]], rules: [Rule])] = []
        // Whether the previous meaningful line was a user-agent line: then another one joins the same group.
        var inAgentLines = false
        var sitemaps: [String] = []
        var seenSitemaps = Set<String>()
        var start = 0
        while start < bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != 0x0A && bytes[end] != 0x0D { end += 1 }
            defer { start = end + 1 }
            guard let record = Self.record(bytes[start..<end]) else { continue }
            let (key, value) = record
            switch key {
            case "user-agent", "useragent", "user agent":
                if !inAgentLines || groups.isEmpty { groups.append(([], [])) }
                groups[groups.count - 1].agents.append(Self.productToken(value))
                inAgentLines = true
            case "allow", "disallow", "dissallow", "disalow":
                inAgentLines = false
                // Rules before any user-agent line belong to no group; an empty pattern matches nothing.
                guard !groups.isEmpty, !value.isEmpty else { continue }
                groups[groups.count - 1].rules.append(Self.rule(value, allow: key == "allow"))
            case "sitemap", "site-map":
                let url = String(decoding: value, as: UTF8.self)
                if !value.isEmpty && seenSitemaps.insert(url).inserted { sitemaps.append(url) }
            default:
                break
            }
        }
        self.sitemaps = sitemaps

        let star: [UInt8] = [UInt8(ascii: "*")]
        let named = token.isEmpty ? [] : groups.filter { $0.agents.contains(token) }
        let chosen = named.isEmpty ? groups.filter { $0.agents.contains(star) } : named
        rules = chosen.flatMap(\.rules)
    }

    /// Whether the crawler may fetch `pathAndQuery` (as it appears in the URL, percent-encoded; "" means "/").
    func allows(_ pathAndQuery: String) -> Bool {
        let path = Self.normalized(pathAndQuery.isEmpty ? ArraySlice("/".utf8) : ArraySlice(pathAndQuery.utf8))
        if path == Array("/robots.txt".utf8) || path.starts(with: Array("/robots.txt?".utf8)) { return true }
        var best: (length: Int, allow: Bool)?
        for rule in rules where Self.matches(rule, path) {
            if let current = best, current.length > rule.length || (current.length == rule.length && current.allow) { continue }
            best = (rule.length, rule.allow)
        }
        return best?.allow ?? true
    }

    // MARK: - Parsing

    /// A line's key (lowercased) and value, both trimmed, comment removed; nil for lines without a ':'.
    private static func record(_ line: ArraySlice<UInt8>) -> (String, ArraySlice<UInt8>)? {
        var line = line
        if let hash = line.firstIndex(of: UInt8(ascii: "#")) { line = line[..<hash] }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let key = trimmed(line[..<colon]).map(HTMLTokenizer.lowered)
        return (String(decoding: key, as: UTF8.self), trimmed(line[(colon + 1)...]))
    }

    /// The product token at the start of a user-agent value: letters, '_' and '-' (RFC 9309), lowercased; "*" stays "*".
    private static func productToken<C: Collection<UInt8>>(_ value: C) -> [UInt8] {
        if value.first == UInt8(ascii: "*") { return [UInt8(ascii: "*")] }
        return value.prefix { HTMLTokenizer.isAlpha($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }.map(HTMLTokenizer.lowered)
    }

    private static func rule(_ value: ArraySlice<UInt8>, allow: Bool) -> Rule {
        var pattern = normalized(value)
        let length = pattern.count
        // Only a final '$' anchors; elsewhere it is an ordinary character.
        let anchored = pattern.last == UInt8(ascii: "$")
        if anchored { pattern.removeLast() }
        let pieces = pattern.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map(Array.init)
        return Rule(pieces: pieces, anchored: anchored, length: length, allow: allow)
    }

    // MARK: - Matching

    /// Whether the rule matches the start of `path` (all of it when anchored).
    ///
    /// Each piece after the first is matched at its leftmost possible place, which leaves the most
    /// room for the rest, so the greedy scan finds a match whenever one exists.
    private static func matches(_ rule: Rule, _ path: [UInt8]) -> Bool {
        let pieces = rule.pieces
        guard path.starts(with: pieces[0]) else { return false }
        if pieces.count == 1 { return !rule.anchored || path.count == pieces[0].count }
        var position = pieces[0].count
        for piece in pieces[1..<(pieces.count - 1)] {
            guard let found = find(piece, in: path, from: position) else { return false }
            position = found + piece.count
        }
        let last = pieces[pieces.count - 1]
        if rule.anchored { return path.count - last.count >= position && path[(path.count - last.count)...].elementsEqual(last) }
        return find(last, in: path, from: position) != nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty else { return start <= haystack.count ? start : nil }
        var k = start
        while k + needle.count <= haystack.count {
            if haystack[k] == needle[0] && haystack[k..<(k + needle.count)].elementsEqual(needle) { return k }
            k += 1
        }
        return nil
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// The comparable form of a path or pattern: `%XX` of an unreserved character decoded, other escapes
    /// in uppercase hex, and bytes that cannot stand in a URL (controls, space, non-ASCII) percent-encoded.
    private static func normalized(_ value: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(value.count)
        var i = value.startIndex
        while i < value.endIndex {
            let b = value[i]
            if b == UInt8(ascii: "%"), i + 2 < value.endIndex, let high = HTMLTokenizer.hexValue(value[i + 1]), let low = HTMLTokenizer.hexValue(value[i + 2]) {
                let decoded = high << 4 | low
                if isUnreserved(decoded) {
                    out.append(decoded)
                } else {
                    out.append(contentsOf: [b, hexDigits[Int(high)], hexDigits[Int(low)]])
                }
                i += 3
                continue
            }
            if b <= 0x20 || b >= 0x7F {
                out.append(contentsOf: [UInt8(ascii: "%"), hexDigits[Int(b >> 4)], hexDigits[Int(b & 0xF)]])
            } else {
                out.append(b)
            }
            i += 1
        }
        return out
    }

    private static func isUnreserved(_ b: UInt8) -> Bool {
        HTMLTokenizer.isAlphanumeric(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "~")
    }

    private static func trimmed(_ value: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var value = value
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        return value
    }
}
