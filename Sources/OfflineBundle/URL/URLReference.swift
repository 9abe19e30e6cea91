/// URL references resolved on bytes, the one resolver of the package: links found in pages, `Location` values, a
/// page's `<base href>`.
package enum URLReference {
    /// `raw` resolved against `base` as an absolute http(s) URL without its fragment, or nil.
    ///
    /// On bytes (RFC 3986 §5.2, with the WHATWG rules browsers apply to `href` in http(s) documents): leading and
    /// trailing spaces and controls are trimmed and tabs and line breaks dropped; `\` counts as `/` before the
    /// query; a reference with its scheme and no `//` is relative when the scheme is the base's; the fragment is
    /// dropped. Dot segments, percent-encoding and case are left to the request-key canonicalizer every result goes
    /// through. Foundation's `URL` took a quarter of a real crawl's CPU here (NSString bridging per link). The crawl,
    /// verify, robots.txt and the loader's recorded redirects all resolve with it, so they cannot disagree.
    package static func resolve(_ raw: String, against base: String) -> String? {
        var raw = raw
        var base = base
        let bytes = raw.withUTF8 { reference in base.withUTF8 { resolve(reference, against: $0) } }
        return bytes.map { String(decoding: requestTarget($0), as: UTF8.self) }
    }

    /// A resolved URL as it is requested: its dot segments removed (RFC 3986 §5.2.4) and the bytes that may not stand
    /// in a request line (spaces, quotes, `<>^`{|}`, controls, non-ASCII) percent-encoded; everything else as written.
    package static func requestTarget(_ url: [UInt8]) -> [UInt8] {
        guard let schemeEnd = url.firstIndex(of: UInt8(ascii: ":")) else { return url }
        var pathStart = schemeEnd + 3
        while pathStart < url.count, url[pathStart] != UInt8(ascii: "/"), url[pathStart] != UInt8(ascii: "?") { pathStart += 1 }
        let queryStart = url[pathStart...].firstIndex(of: UInt8(ascii: "?")) ?? url.count
        var out = Array(url[..<pathStart])
        // Dot segments: split on slashes, drop `.`, let `..` drop the segment before it.
        let path = url[pathStart..<queryStart]
        if path.contains(where: { $0 == UInt8(ascii: ".") }) {
            var kept = [ArraySlice<UInt8>]()
            let segments = path.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            for (i, segment) in segments.enumerated() {
                let last = i == segments.count - 1
                if segment.elementsEqual([UInt8(ascii: ".")]) {
                    if last { kept.append([]) }
                } else if segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                    if !kept.isEmpty { kept.removeLast() }
                    if last { kept.append([]) }
                } else {
                    kept.append(segment)
                }
            }
            for segment in kept {
                out.append(UInt8(ascii: "/"))
                out += segment
            }
            if kept.isEmpty { out.append(UInt8(ascii: "/")) }
        } else {
            out += path
        }
        out += url[queryStart...]
        // Percent-encode what may not stand raw, after the authority.
        guard out[pathStart...].contains(where: { !Self.mayStandInTarget($0) }) else { return out }
        var encoded = Array(out[..<pathStart])
        let hex = Array("0123456789ABCDEF".utf8)
        for c in out[pathStart...] {
            if Self.mayStandInTarget(c) {
                encoded.append(c)
            } else {
                encoded += [UInt8(ascii: "%"), hex[Int(c >> 4)], hex[Int(c & 15)]]
            }
        }
        return encoded
    }

    @inline(__always) private static func mayStandInTarget(_ c: UInt8) -> Bool {
        c >= 0x21 && c <= 0x7E && c != UInt8(ascii: "\"") && c != UInt8(ascii: "<") && c != UInt8(ascii: ">") && c != UInt8(ascii: "\\")
            && c != UInt8(ascii: "^") && c != UInt8(ascii: "`") && c != UInt8(ascii: "{") && c != UInt8(ascii: "|") && c != UInt8(ascii: "}")
    }

    package static func resolve(_ input: UnsafeBufferPointer<UInt8>, against base: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let slash = UInt8(ascii: "/")
        let backslash = UInt8(ascii: "\\")
        var start = 0
        var end = input.count
        while start < end, input[start] <= 0x20 { start += 1 }
        while end > start, input[end - 1] <= 0x20 { end -= 1 }
        // Nothing, or nothing but a fragment: the page itself, which is already known.
        guard start < end, input[start] != UInt8(ascii: "#") else { return nil }
        var reference = [UInt8]()
        reference.reserveCapacity(end - start)
        for i in start..<end {
            let c = input[i]
            if c == 0x09 || c == 0x0A || c == 0x0D { continue }
            if c == UInt8(ascii: "#") { break }
            reference.append(c)
        }
        guard let parts = BaseParts(base) else { return nil }

        // Backslashes are slashes, up to the query (WHATWG, special schemes).
        let queryStart = reference.firstIndex(of: UInt8(ascii: "?")) ?? reference.count
        for i in 0..<queryStart where reference[i] == backslash { reference[i] = slash }

        var rest = reference[...]
        if let colon = schemeLength(reference) {
            let scheme = reference[..<colon].map { $0 | 0x20 }
            guard scheme.elementsEqual("http".utf8) || scheme.elementsEqual("https".utf8) else { return nil }
            let afterColon = reference[(colon + 1)...]
            if afterColon.starts(with: [slash, slash]) { return scheme + [UInt8(ascii: ":")] + afterColon }
            if !scheme.elementsEqual(base[parts.scheme].map { $0 | 0x20 }) {
                // `https:example.com/x` from an http page: WHATWG reads the authority after any slashes.
                return scheme + Array("://".utf8) + afterColon.drop { $0 == slash }
            }
            rest = afterColon
        }
        if rest.starts(with: [slash, slash]) { return Array(base[parts.scheme]) + [UInt8(ascii: ":")] + rest }
        var out = Array(base[..<parts.pathStart])
        if rest.first == slash {
            out += rest
        } else if rest.first == UInt8(ascii: "?") {
            out += parts.path.isEmpty ? [slash] : Array(base[parts.path])
            out += rest
        } else if rest.isEmpty {
            out += base[parts.pathStart..<parts.queryEnd]
            if out.count == parts.pathStart { out.append(slash) }
        } else {
            // Merge: the base's path up to its last slash, then the reference.
            let path = base[parts.path]
            if let last = path.lastIndex(of: slash) { out += base[parts.path.lowerBound...last] } else { out.append(slash) }
            out += rest
        }
        return out
    }

    /// The length of a reference's scheme (the bytes before its `:`), or nil when it has none.
    private static func schemeLength(_ bytes: [UInt8]) -> Int? {
        guard let first = bytes.first, (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z") else { return nil }
        for (i, c) in bytes.enumerated().dropFirst() {
            if c == UInt8(ascii: ":") { return i }
            let letter = (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z")
            let other = (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
            if !(letter || other) { return nil }
        }
        return nil
    }

    /// Where the scheme, the path and the query of an absolute http(s) base URL lie.
    private struct BaseParts {
        var scheme: Range<Int>
        /// Where the path starts (the end of the authority).
        var pathStart: Int
        var path: Range<Int>
        /// Where the query ends (the fragment, or the end).
        var queryEnd: Int

        init?(_ base: UnsafeBufferPointer<UInt8>) {
            guard let colon = base.firstIndex(of: UInt8(ascii: ":")), colon + 2 < base.count, base[colon + 1] == UInt8(ascii: "/"),
                base[colon + 2] == UInt8(ascii: "/")
            else { return nil }
            let scheme = base[..<colon].map { $0 | 0x20 }
            guard scheme.elementsEqual("http".utf8) || scheme.elementsEqual("https".utf8) else { return nil }
            self.scheme = 0..<colon
            var i = colon + 3
            while i < base.count, base[i] != UInt8(ascii: "/"), base[i] != UInt8(ascii: "?"), base[i] != UInt8(ascii: "#") { i += 1 }
            guard i > colon + 3 else { return nil }
            pathStart = i
            while i < base.count, base[i] != UInt8(ascii: "?"), base[i] != UInt8(ascii: "#") { i += 1 }
            path = pathStart..<i
            while i < base.count, base[i] != UInt8(ascii: "#") { i += 1 }
            queryEnd = i
        }
    }
}
