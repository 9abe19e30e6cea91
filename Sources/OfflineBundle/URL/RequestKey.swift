/// Turns URLs into the canonical request keys that a bundle's index is keyed by.
///
/// Two URLs that a server treats as the same resource give the same key:
/// - the scheme and host are lowercased, and user information is dropped;
/// - the default port (80 for http, 443 for https) is dropped;
/// - an empty path becomes `/`, and `.` and `..` segments are resolved;
/// - percent-escapes of unreserved characters are decoded, other escapes use
///   uppercase hex, and bytes that may not appear raw are escaped;
/// - query parameters that match a drop pattern are removed (and, under a
///   `match … ignore-params` rule, the parameters it names), the others are
///   sorted (by their bytes, stable), and an empty query disappears; with
///   ``formQuery``, a `+` in the query is a space (`%20`), as the form encoding
///   says, and parameters are sorted by name only, so the order of a repeated
///   parameter's values (`_col=type&_col=name`) is kept;
/// - the fragment is dropped.
///
/// The rules are specified in docs/FORMAT.md so that writers in other
/// languages produce the same keys.
public struct RequestKeyCanonicalizer: Sendable {
    /// Query parameter name patterns to drop, where `*` matches any run of characters (ASCII case-insensitive).
    public let dropQueryParameters: [String]
    private let patterns: [[UInt8]]

    /// Creates a canonicalizer that drops query parameters matching `dropQueryParameters`.
    /// Whether queries are read as forms (docs/FORMAT.md §5.1 rule 11, header flag bit 1): `+` is `%20`, and
    /// parameters are ordered by name, the values of one name in their order.
    public let formQuery: Bool

    /// The `match PATTERN ignore-params NAME…` rules (docs/FORMAT.md §4.6): the names are dropped from the queries of
    /// URLs whose query-less key matches the pattern.
    package let ignoredParameters: [BundleRules.ParameterMatch]

    public init(dropQueryParameters: [String] = [], formQuery: Bool = false) {
        self.init(dropQueryParameters: dropQueryParameters, ignoredParameters: [], formQuery: formQuery)
    }

    /// Creates the canonicalizer a bundle with `rules` keys its entries by: `drop-query` and `match … ignore-params`.
    public init(rules: BundleRules, formQuery: Bool = false) {
        self.init(dropQueryParameters: rules.dropQueryParameters, ignoredParameters: rules.parameterMatches, formQuery: formQuery)
    }

    package init(dropQueryParameters: [String], ignoredParameters: [BundleRules.ParameterMatch], formQuery: Bool) {
        self.dropQueryParameters = dropQueryParameters
        self.patterns = dropQueryParameters.map { Array($0.lowercased().utf8) }
        self.ignoredParameters = ignoredParameters
        self.formQuery = formQuery
    }

    /// Whether `key` (canonical under ``formQuery``) needs the form-query reading to be found: its query has a
    /// space, or its parameters are in another order than the byte order a reader without it would put them in.
    package func needsFormQuery(_ key: String) -> Bool {
        guard let mark = key.firstIndex(of: "?") else { return false }
        if key[mark...].contains("%20") { return true }
        return RequestKeyCanonicalizer(dropQueryParameters: dropQueryParameters, ignoredParameters: ignoredParameters, formQuery: false)
            .canonicalize(key) != key
    }

    /// The canonical key for `url`, or nil when it is not an absolute URL with a host.
    public func canonicalize(_ url: String) -> String? {
        var input = url
        return input.withUTF8 { buffer in
            canonicalBytes(UnsafeRawBufferPointer(buffer)).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// The canonical key as UTF-8 bytes, or nil when the input is not an absolute URL with a host.
    package func canonicalBytes(_ url: String) -> [UInt8]? {
        var url = url
        return url.withUTF8 { canonicalBytes(UnsafeRawBufferPointer($0)) }
    }

    package func canonicalBytes(_ s: UnsafeRawBufferPointer) -> [UInt8]? {
        var start = 0
        var end = s.count
        while start < end, s[start] <= 0x20 { start += 1 }
        while end > start, s[end - 1] <= 0x20 { end -= 1 }
        // Scheme.
        var i = start
        guard i < end, isAlpha(s[i]) else { return nil }
        while i < end, s[i] != UInt8(ascii: ":") {
            let c = s[i]
            guard isAlpha(c) || isDigit(c) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") else { return nil }
            i += 1
        }
        guard i < end, i + 2 < end, s[i + 1] == UInt8(ascii: "/"), s[i + 2] == UInt8(ascii: "/") else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(end - start + 8)
        for j in start..<i { out.append(lower(s[j])) }
        let schemeEnd = out.count
        out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "/")])
        let isHTTP = out[0..<schemeEnd].elementsEqual("http".utf8)
        let isHTTPS = out[0..<schemeEnd].elementsEqual("https".utf8)
        // Authority.
        var authStart = i + 3
        var authEnd = authStart
        while authEnd < end, s[authEnd] != UInt8(ascii: "/"), s[authEnd] != UInt8(ascii: "?"), s[authEnd] != UInt8(ascii: "#") {
            authEnd += 1
        }
        // Drop user information: it is a credential, never part of a key.
        var k = authEnd
        while k > authStart {
            k -= 1
            if s[k] == UInt8(ascii: "@") {
                authStart = k + 1
                break
            }
        }
        // Split host and port, minding IPv6 literals.
        var hostEnd = authEnd
        var portStart: Int?
        var p = authEnd
        while p > authStart {
            p -= 1
            let c = s[p]
            if c == UInt8(ascii: ":") {
                hostEnd = p
                portStart = p + 1
                break
            }
            if c == UInt8(ascii: "]") || !isDigit(c) { break }
        }
        guard hostEnd > authStart else { return nil }
        let isBracketed = s[authStart] == UInt8(ascii: "[")
        if isBracketed {
            // An IPv6 literal: hex digits, colons and dots (an embedded IPv4), between brackets.
            guard hostEnd - authStart >= 3, s[hostEnd - 1] == UInt8(ascii: "]") else { return nil }
            for j in (authStart + 1)..<(hostEnd - 1) where !isIPv6Byte(s[j]) { return nil }
        }
        for j in authStart..<hostEnd {
            let c = s[j]
            // Host names are letters, digits, '-', '.', '_' and '~'; anything else (quotes, '%', spaces,
            // non-ASCII, a colon outside an IPv6 literal) is not a host a request can be made to.
            if !isBracketed && !isUnreserved(c) { return nil }
            out.append(lower(c))
        }
        if let portStart {
            var q = portStart
            while q < authEnd, s[q] == UInt8(ascii: "0"), q + 1 < authEnd { q += 1 }
            let port = UnsafeRawBufferPointer(rebasing: s[q..<authEnd])
            // Ports are 1 to 65535: a longer number (or 0) names no server.
            let number = port.count <= 5 ? port.reduce(0, { $0 * 10 + Int($1 - UInt8(ascii: "0")) }) : Int.max
            guard port.isEmpty || (1...65535).contains(number) else { return nil }
            let isDefault =
                port.isEmpty || (isHTTP && port.elementsEqual("80".utf8)) || (isHTTPS && port.elementsEqual("443".utf8))
            if !isDefault {
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: port)
            }
        }
        // Path.
        var pathEnd = authEnd
        while pathEnd < end, s[pathEnd] != UInt8(ascii: "?"), s[pathEnd] != UInt8(ascii: "#") { pathEnd += 1 }
        let pathStart = out.count
        if pathEnd == authEnd {
            out.append(UInt8(ascii: "/"))
        } else {
            appendNormalized(UnsafeRawBufferPointer(rebasing: s[authEnd..<pathEnd]), to: &out, inQuery: false)
            removeDotSegments(&out, from: pathStart)
        }
        // Query.
        if pathEnd < end, s[pathEnd] == UInt8(ascii: "?") {
            var queryEnd = pathEnd + 1
            while queryEnd < end, s[queryEnd] != UInt8(ascii: "#") { queryEnd += 1 }
            // The ignore-params rules whose pattern the query-less key matches add their names to the dropped ones.
            var dropped = patterns
            if !ignoredParameters.isEmpty {
                let lowered = out.map(lower)
                for rule in ignoredParameters where globMatch(rule.pattern[...], lowered[...]) { dropped += rule.names }
            }
            appendQuery(UnsafeRawBufferPointer(rebasing: s[(pathEnd + 1)..<queryEnd]), dropping: dropped, to: &out)
        }
        return out
    }

    private func appendQuery(_ query: UnsafeRawBufferPointer, dropping: [[UInt8]], to out: inout [UInt8]) {
        guard !query.isEmpty else { return }
        var params = [[UInt8]]()
        var startOfParam = 0
        for j in 0...query.count where j == query.count || query[j] == UInt8(ascii: "&") {
            if j > startOfParam {
                let raw = UnsafeRawBufferPointer(rebasing: query[startOfParam..<j])
                var nameEnd = 0
                while nameEnd < raw.count, raw[nameEnd] != UInt8(ascii: "=") { nameEnd += 1 }
                if !Self.isDropped(UnsafeRawBufferPointer(rebasing: raw[0..<nameEnd]), by: dropping) {
                    var param = [UInt8]()
                    param.reserveCapacity(raw.count)
                    appendNormalized(raw, to: &param, inQuery: true)
                    if formQuery, param.contains(UInt8(ascii: "+")) {
                        // A form's space: the same as `%20` (a literal plus is `%2B`, which stays).
                        param = param.flatMap { $0 == UInt8(ascii: "+") ? Array("%20".utf8) : [$0] }
                    }
                    params.append(param)
                }
            }
            startOfParam = j + 1
        }
        guard !params.isEmpty else { return }
        if params.count > 1 && formQuery {
            // Sort by name, comparing bytes; stable, so one name's values keep their order.
            func name(_ param: [UInt8]) -> ArraySlice<UInt8> { param.prefix { $0 != UInt8(ascii: "=") } }
            params = params.enumerated().sorted { a, b in
                let (x, y) = (name(a.element), name(b.element))
                if x == y { return a.offset < b.offset }
                return x.lexicographicallyPrecedes(y)
            }.map(\.element)
        } else if params.count > 1 {
            // Sort by name, then value, comparing bytes; stable for equal parameters.
            params = params.enumerated().sorted { a, b in
                if a.element == b.element { return a.offset < b.offset }
                return a.element.lexicographicallyPrecedes(b.element)
            }.map(\.element)
        }
        out.append(UInt8(ascii: "?"))
        for (n, param) in params.enumerated() {
            if n > 0 { out.append(UInt8(ascii: "&")) }
            out.append(contentsOf: param)
        }
    }

    private static func isDropped(_ name: UnsafeRawBufferPointer, by patterns: [[UInt8]]) -> Bool {
        guard !patterns.isEmpty else { return false }
        // Decode the name so that `utm%5Fsource` matches `utm_*`.
        let decoded = percentDecodedLowercased(name)
        return patterns.contains { globMatch($0[...], decoded[...]) }
    }
}

/// `bytes` with every `%XX` escape decoded (hex digits in either case; a `%` without two hex digits after it kept as
/// it is) and ASCII letters lowercased.
package func percentDecodedLowercased(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    var decoded = [UInt8]()
    decoded.reserveCapacity(bytes.count)
    var j = 0
    while j < bytes.count {
        if bytes[j] == UInt8(ascii: "%"), j + 2 < bytes.count, let hi = hexValue(bytes[j + 1]), let lo = hexValue(bytes[j + 2]) {
            decoded.append(lower(hi << 4 | lo))
            j += 3
        } else {
            decoded.append(lower(bytes[j]))
            j += 1
        }
    }
    return decoded
}

/// Whether `key` has the shape every canonical key has: `http://` or `https://`, a host of letters, digits,
/// `-._~` (or a bracketed IPv6 literal), an optional numeric port, and only printable ASCII that may stand raw
/// in a URL after it.
///
/// A reader checks every key of an index with it, so a hostile bundle cannot carry a key with another scheme
/// (`http+unix://`), a quote or a line break to the code that makes requests or writes reports from keys.
package func isWellFormedKey(_ key: UnsafeRawBufferPointer) -> Bool {
    // Mount checks every key of an index with this, so it works on bytes and bit sets: a byte `c` is in a set when bit
    // `c & 63` of word `c >> 6` is set (bytes from 128 up are in none).
    @inline(__always) func contains(_ low: UInt64, _ high: UInt64, _ c: UInt8) -> Bool {
        c < 64 ? (low >> UInt64(c)) & 1 != 0 : c < 128 ? (high >> UInt64(c &- 64)) & 1 != 0 : false
    }
    // Lowercase letters, digits and `-._~`: a canonical host.
    let hostLow: UInt64 = 0x03FF_6000_0000_0000
    let hostHigh: UInt64 = 0x47FF_FFFE_8000_0000
    // What may stand raw in a canonical key's path and query (§5.1 rule 9), and `%` and `?`.
    let rawLow: UInt64 = 0xAFFF_FFF2_0000_0000
    let rawHigh: UInt64 = 0x47FF_FFFE_87FF_FFFF
    guard key.count >= 8 else { return false }
    let head = UInt64(littleEndian: key.loadUnaligned(as: UInt64.self))
    let authorityStart: Int
    if head == 0x2F2F_3A73_7074_7468 {  // "https://"
        authorityStart = 8
    } else if head & 0x00FF_FFFF_FFFF_FFFF == 0x2F_2F3A_7074_7468 {  // "http://"
        authorityStart = 7
    } else {
        return false
    }
    var i = authorityStart
    guard i < key.count else { return false }
    if key[i] == UInt8(ascii: "[") {
        i += 1
        while i < key.count, isIPv6Byte(key[i]) { i += 1 }
        guard i < key.count, key[i] == UInt8(ascii: "]"), i > authorityStart + 1 else { return false }
        i += 1
    } else {
        while i < key.count, contains(hostLow, hostHigh, key[i]) { i += 1 }
        guard i > authorityStart else { return false }
    }
    if i < key.count, key[i] == UInt8(ascii: ":") {
        i += 1
        let portStart = i
        var port = 0
        while i < key.count, isDigit(key[i]), port <= 65535 {
            port = port * 10 + Int(key[i] - UInt8(ascii: "0"))
            i += 1
        }
        // A port names a server only from 1 to 65535 (a larger one crashes code that builds a socket address).
        guard i > portStart, (1...65535).contains(port), key[portStart] != UInt8(ascii: "0") else { return false }
    }
    guard i < key.count, key[i] == UInt8(ascii: "/") else { return false }
    while i < key.count {
        guard contains(rawLow, rawHigh, key[i]) else { return false }
        i += 1
    }
    return true
}

/// ``isWellFormedKey(_:)`` over a string's UTF-8.
package func isWellFormedKey(_ key: String) -> Bool {
    var key = key
    return key.withUTF8 { isWellFormedKey(UnsafeRawBufferPointer($0)) }
}

@inline(__always) private func isIPv6Byte(_ c: UInt8) -> Bool {
    isDigit(c) || ((c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "f")) || c == UInt8(ascii: ":") || c == UInt8(ascii: ".")
}

/// The origin of an absolute URL or request key (`scheme://host[:port]`, IPv6 brackets kept) and its authority
/// (`host[:port]`), found without parsing a URL; nil when there is no `://`.
package func keyOrigin(_ key: String) -> (origin: Substring, authority: Substring)? {
    // Byte-level: this runs once per entry in verify and per request in the loader.
    let utf8 = key.utf8
    var i = utf8.startIndex
    var authorityStart: String.Index?
    while i < utf8.endIndex {
        if utf8[i] == UInt8(ascii: ":") {
            let slash1 = utf8.index(after: i)
            if slash1 < utf8.endIndex, utf8[slash1] == UInt8(ascii: "/") {
                let slash2 = utf8.index(after: slash1)
                if slash2 < utf8.endIndex, utf8[slash2] == UInt8(ascii: "/") { authorityStart = utf8.index(after: slash2) }
            }
            break
        }
        i = utf8.index(after: i)
    }
    guard let start = authorityStart else { return nil }
    var end = start
    while end < utf8.endIndex, utf8[end] != UInt8(ascii: "/"), utf8[end] != UInt8(ascii: "?"), utf8[end] != UInt8(ascii: "#") { end = utf8.index(after: end) }
    return (key[..<end], key[start..<end])
}

/// Matches `text` against `pattern` where `*` matches any run of bytes.
package func globMatch(_ pattern: ArraySlice<UInt8>, _ text: ArraySlice<UInt8>) -> Bool {
    var p = pattern.startIndex
    var t = text.startIndex
    var star: Int?
    var mark = t
    while t < text.endIndex {
        if p < pattern.endIndex, pattern[p] == UInt8(ascii: "*") {
            star = p
            p += 1
            mark = t
        } else if p < pattern.endIndex, pattern[p] == text[t] {
            p += 1
            t += 1
        } else if let s = star {
            p = s + 1
            mark += 1
            t = mark
        } else {
            return false
        }
    }
    while p < pattern.endIndex, pattern[p] == UInt8(ascii: "*") { p += 1 }
    return p == pattern.endIndex
}

@inline(__always) private func isAlpha(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
@inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
@inline(__always) private func lower(_ c: UInt8) -> UInt8 { c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c }
@inline(__always) private func isUnreserved(_ c: UInt8) -> Bool {
    isAlpha(c) || isDigit(c) || c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "~")
}

/// Bytes that may stand raw in a path or query; everything else is percent-escaped.
@inline(__always) private func mayStandRaw(_ c: UInt8, inQuery: Bool) -> Bool {
    if isUnreserved(c) { return true }
    switch c {
    case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
        UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"),
        UInt8(ascii: "@"), UInt8(ascii: "/"):
        return true
    case UInt8(ascii: "?"): return inQuery
    default: return false
    }
}

private let upperHex: [UInt8] = Array("0123456789ABCDEF".utf8)

private func appendNormalized(_ raw: UnsafeRawBufferPointer, to out: inout [UInt8], inQuery: Bool) {
    var j = 0
    while j < raw.count {
        let c = raw[j]
        if c == UInt8(ascii: "%"), j + 2 < raw.count, let hi = hexValue(raw[j + 1]), let lo = hexValue(raw[j + 2]) {
            let decoded = hi << 4 | lo
            if isUnreserved(decoded) {
                out.append(decoded)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(upperHex[Int(hi)])
                out.append(upperHex[Int(lo)])
            }
            j += 3
        } else if mayStandRaw(c, inQuery: inQuery) {
            out.append(c)
            j += 1
        } else {
            out.append(UInt8(ascii: "%"))
            out.append(upperHex[Int(c >> 4)])
            out.append(upperHex[Int(c & 0xF)])
            j += 1
        }
    }
}

/// RFC 3986 section 5.2.4, in place over `out[from...]`, which starts with `/`.
private func removeDotSegments(_ out: inout [UInt8], from start: Int) {
    // Fast path: no dot segment at all.
    var hasDot = false
    var j = start
    while j < out.count {
        if out[j] == UInt8(ascii: "."), out[j - 1] == UInt8(ascii: "/") {
            hasDot = true
            break
        }
        j += 1
    }
    guard hasDot else { return }
    let path = Array(out[start...])
    var segments = [ArraySlice<UInt8>]()
    var trailingSlash = false
    for segment in path.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
        trailingSlash = false
        if segment.elementsEqual(".".utf8) {
            trailingSlash = true
        } else if segment.elementsEqual("..".utf8) {
            if !segments.isEmpty { segments.removeLast() }
            trailingSlash = true
        } else {
            segments.append(segment)
        }
    }
    out.removeSubrange(start...)
    for segment in segments {
        out.append(UInt8(ascii: "/"))
        out.append(contentsOf: segment)
    }
    if trailingSlash || segments.isEmpty { out.append(UInt8(ascii: "/")) }
}
