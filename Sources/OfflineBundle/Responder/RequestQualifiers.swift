import Crypto
import Foundation
import HTTPTypes

/// What a stored response was recorded for besides its URL (docs/FORMAT.md §5.4): the method, a digest of the
/// request body, and the request headers the answer depends on. A key with qualifiers is the canonical URL, then
/// ` m=METHOD`, ` b=DIGEST` and ` h=NAME:VALUE` (or ` h=NAME` for a header the request did not carry), in that order,
/// the headers by name; a plain `GET` without a body or such headers has none, and its key is the URL alone.
package struct RequestQualifiers: Sendable, Equatable {
    /// The method, uppercase; `GET` when the key names none.
    package var method = "GET"
    /// The first 32 hexadecimal digits of the request body's SHA-256, lowercase; nil for a request without a body.
    package var bodyDigest: String?
    /// The request headers the answer depends on, by lowercase name in byte order; a nil value for a header the
    /// request did not carry. An `authorization` value is its scheme alone (`bearer`), never the credential.
    package var headers: [Header] = []

    package struct Header: Sendable, Equatable {
        package var name: String
        package var value: String?

        package init(name: String, value: String?) {
            self.name = name
            self.value = value
        }
    }

    package init(method: String = "GET", bodyDigest: String? = nil, headers: [Header] = []) {
        self.method = method.uppercased()
        self.bodyDigest = bodyDigest
        self.headers = headers.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    /// Headers whose value stands for a credential: a key holds the scheme alone (a cookie: nothing but its presence).
    package static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The value a key records for header `name` sent with `value`: a credential's scheme, lowercased (its presence, the
    /// empty value, when it has no scheme: a bare token must not become the key); a cookie's presence; other values as
    /// sent, trimmed.
    package static func keyValue(name: String, value: String) -> String {
        switch name {
        case "authorization", "proxy-authorization":
            let trimmed = trimmedSpaces(value)
            guard let space = trimmed.utf8.firstIndex(of: 0x20) else { return "" }
            let scheme = trimmed.utf8[..<space]
            guard !scheme.isEmpty, scheme.allSatisfy(isTokenByte) else { return "" }
            return String(decoding: scheme.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        case "cookie": return ""
        default: return trimmedSpaces(value)
        }
    }

    /// Whether `name` is an HTTP field name (a token) in lowercase: what a key may name.
    package static func isKeyHeaderName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(isLowercaseTokenByte)
    }

    /// A token character (RFC 9110 §5.6.2).
    static func isTokenByte(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || isDigit(c) || "!#$%&'*+-.^_`|~".utf8.contains(c)
    }

    /// Whether `method` may stand in a key's `m=`: 1 to 32 uppercase letters (GET and HEAD have none).
    package static func isKeyMethod(_ method: String) -> Bool {
        (1...32).contains(method.utf8.count) && method.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A }
    }

    /// The digest a key records for a request body: nil for none or an empty one.
    package static func bodyDigest(of body: Data?) -> String? {
        guard let body, !body.isEmpty else { return nil }
        return hexString(Array(SHA256.hash(data: body)).prefix(16))
    }

    /// `value` without leading and trailing spaces and tabs (without Foundation's character sets: this runs for every
    /// header of every request matched).
    package static func trimmedSpaces(_ value: String) -> String {
        let utf8 = value.utf8
        guard let first = utf8.first, let last = utf8.last else { return value }
        func blank(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
        if !blank(first) && !blank(last) { return value }
        guard let start = utf8.firstIndex(where: { !blank($0) }), let end = utf8.lastIndex(where: { !blank($0) }) else { return "" }
        return String(value[start...end])
    }

    /// `text` with ASCII letters uppercased (itself when it has none in lowercase).
    static func asciiUppercased(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 >= 0x61 && $0 <= 0x7A }) else { return text }
        return String(decoding: text.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
    }

    /// Whether the key names nothing beyond its URL (a plain GET).
    package var isPlain: Bool { method == "GET" && bodyDigest == nil && headers.isEmpty }

    /// The key's suffix: empty for a plain GET, else a space and the qualifiers.
    package var keySuffix: String {
        var suffix = ""
        if method != "GET" { suffix += " m=" + method }
        if let bodyDigest { suffix += " b=" + bodyDigest }
        for header in headers {
            suffix += " h=" + header.name
            if let value = header.value { suffix += ":" + Self.encode(value) }
        }
        return suffix
    }

    /// The key's URL part and its qualifiers (nil when the suffix is malformed).
    package static func split(key: String) -> (url: Substring, qualifiers: RequestQualifiers?) {
        guard let space = key.firstIndex(of: " ") else { return (key[...], RequestQualifiers()) }
        return (key[..<space], parse(key[space...]))
    }

    /// Reads a key's suffix (starting with its space).
    package static func parse(_ suffix: Substring) -> RequestQualifiers? {
        var bytes = Array(suffix.utf8)
        guard isWellFormed(&bytes) else { return nil }
        var qualifiers = RequestQualifiers()
        for item in suffix.split(separator: " ") {
            let value = item.dropFirst(2)
            switch item.prefix(2) {
            case "m=": qualifiers.method = String(value)
            case "b=": qualifiers.bodyDigest = String(value)
            default:
                if let colon = value.firstIndex(of: ":") {
                    qualifiers.headers.append(Header(name: String(value[..<colon]), value: decode(value[value.index(after: colon)...])))
                } else {
                    qualifiers.headers.append(Header(name: String(value), value: nil))
                }
            }
        }
        return qualifiers
    }

    /// Whether `suffix` (from its first space) has the shape §5.4 gives: each item once at most and in order, a method
    /// of uppercase letters that is not GET or HEAD, a digest of 32 lowercase hexadecimal digits, header names of
    /// lowercase token characters in strictly increasing order, values of bytes that may stand raw or `%XX`.
    package static func isWellFormed(_ suffix: inout [UInt8]) -> Bool {
        suffix.withUnsafeBytes { isWellFormed($0) }
    }

    package static func isWellFormed(_ suffix: UnsafeRawBufferPointer) -> Bool {
        guard suffix.count > 3, suffix[0] == 0x20 else { return false }
        var stage = 0  // 1 after m=, 2 after b=, 3 in headers
        var lastName: [UInt8] = []
        var i = 0
        while i < suffix.count {
            guard suffix[i] == 0x20, i + 2 < suffix.count, suffix[i + 2] == UInt8(ascii: "=") else { return false }
            let kind = suffix[i + 1]
            var end = i + 3
            while end < suffix.count, suffix[end] != 0x20 { end += 1 }
            let value = UnsafeRawBufferPointer(rebasing: suffix[(i + 3)..<end])
            guard !value.isEmpty else { return false }
            switch kind {
            case UInt8(ascii: "m"):
                guard stage < 1, value.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }), value.count <= 32 else { return false }
                let method = String(decoding: value, as: UTF8.self)
                guard method != "GET", method != "HEAD" else { return false }
                stage = 1
            case UInt8(ascii: "b"):
                guard stage < 2, value.count == 32, value.allSatisfy({ isDigit($0) || ($0 >= 0x61 && $0 <= 0x66) }) else { return false }
                stage = 2
            case UInt8(ascii: "h"):
                let colon = value.firstIndex(of: UInt8(ascii: ":")) ?? value.count
                let name = Array(value[0..<colon])
                guard !name.isEmpty, name.allSatisfy(isLowercaseTokenByte) else { return false }
                guard stage < 3 || lastName.lexicographicallyPrecedes(name) else { return false }
                if colon < value.count {
                    var j = colon + 1
                    while j < value.count {
                        if value[j] == UInt8(ascii: "%") {
                            guard j + 2 < value.count, isHexDigit(value[j + 1]), isHexDigit(value[j + 2]) else { return false }
                            j += 3
                        } else {
                            guard isRawValueByte(value[j]) else { return false }
                            j += 1
                        }
                    }
                }
                lastName = name
                stage = 3
            default:
                return false
            }
            i = end
        }
        return true
    }

    /// A header value as a key holds it: bytes that may stand raw as they are, every other byte as `%XX`.
    static func encode(_ value: String) -> String {
        var out = ""
        for byte in value.utf8 {
            if isRawValueByte(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    static func decode(_ value: Substring) -> String {
        let bytes = Array(value.utf8)
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let byte = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) {
                out.append(byte)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Letters, digits, and ``!#$%&'*+-.^_`|~`` lowercase: an HTTP token, as a key writes a header name.
    private static func isLowercaseTokenByte(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || isDigit(c) || "!#$%&'*+-.^_`|~".utf8.contains(c)
    }

    /// What a key writes raw in a header value: unreserved bytes and `! $ & ' ( ) * + , ; = : @ / ?`.
    private static func isRawValueByte(_ c: UInt8) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || isDigit(c) || "-._~!$&'()*+,;=:@/?".utf8.contains(c)
    }

    private static func isHexDigit(_ c: UInt8) -> Bool { isDigit(c) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66) }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}

// MARK: - Choosing a variant

extension RequestQualifiers {
    /// A stored response a request may get: its entry, its qualifiers, and what content negotiation compares, read
    /// out once (a ``VariantTable`` keeps them for the life of a mount).
    ///
    /// A class: a request walks the candidates of its URL, and a reference costs one retain where a struct of arrays
    /// and strings cost one per field.
    package final class Candidate: Sendable {
        package let entry: Int
        package let qualifiers: RequestQualifiers
        /// The stored `content-type` essence, lowercased, its major part, and the `content-language` tags, lowercased:
        /// as bytes, which the negotiation scan compares.
        let typeBytes: [UInt8]
        let majorBytes: [UInt8]
        let languageBytes: [[UInt8]]
        let hasLanguage: Bool
        /// The field name of each of the qualifiers' headers.
        let fields: [HTTPField.Name?]
        /// The `b=` digest's 16 bytes.
        let digest: [UInt8]?
        /// Qualifiers it carries (a plain entry none).
        let size: Int
        /// The method, as ``qualifiers`` holds it (read here without copying the qualifiers for each request).
        let method: String
        /// What each of the qualifiers' headers is matched by.
        let kinds: [HeaderKind]
        /// Whether the qualifiers name `authorization` or `proxy-authorization` (a request carrying a credential the
        /// candidate was not recorded with does not get it).
        let namesAuthorization: Bool
        let namesProxyAuthorization: Bool

        enum HeaderKind {
            case accept, acceptLanguage, credential, other
        }

        package init(entry: Int, qualifiers: RequestQualifiers, contentType: String?, contentLanguage: String?) {
            self.entry = entry
            self.qualifiers = qualifiers
            let type = contentType.map(MediaTypes.essence(of:))?.lowercased() ?? ""
            typeBytes = Array(type.utf8)
            majorBytes = Array(type.utf8.prefix { $0 != UInt8(ascii: "/") })
            languageBytes = (contentLanguage ?? "").lowercased().split(separator: ",").map { Array($0.trimmingCharacters(in: .whitespaces).utf8) }
            hasLanguage = contentLanguage != nil
            fields = qualifiers.headers.map { HTTPField.Name($0.name) }
            digest = qualifiers.bodyDigest.map { hex in
                var bytes = [UInt8]()
                var high: UInt8?
                for c in hex.utf8 {
                    let v = c <= 0x39 ? c &- 0x30 : c &- 0x57
                    if let h = high {
                        bytes.append(h << 4 | v)
                        high = nil
                    } else {
                        high = v
                    }
                }
                return bytes
            }
            size = qualifiers.headers.count + (qualifiers.isPlain ? 0 : 1)
            method = qualifiers.method
            kinds = qualifiers.headers.map { header in
                switch header.name {
                case "accept": .accept
                case "accept-language": .acceptLanguage
                case "authorization", "proxy-authorization", "cookie": .credential
                default: .other
                }
            }
            namesAuthorization = qualifiers.headers.contains { $0.name == "authorization" }
            namesProxyAuthorization = qualifiers.headers.contains { $0.name == "proxy-authorization" }
        }
    }

    /// Bytes, not Unicode equivalence: a key holds the bytes a request sent; both absent is a match.
    static func sameBytes(_ sent: String?, _ recorded: String?) -> Bool {
        switch (sent, recorded) {
        case (nil, nil): true
        case (let a?, let b?): a.utf8.elementsEqual(b.utf8)
        default: false
        }
    }

    /// Whether `digest` (a candidate's 16 bytes, nil for no body) is that of `body`'s SHA-256 (nil for none).
    static func same(_ digest: [UInt8]?, _ body: SHA256Digest?) -> Bool {
        guard let digest, let body else { return digest == nil && body == nil }
        return body.withUnsafeBytes { raw in digest.withUnsafeBytes { memcmp(raw.baseAddress!, $0.baseAddress!, 16) == 0 } }
    }

    /// The candidate that answers the request (docs/FORMAT.md §8.4 H19), or nil: the method (HEAD as GET) and the body
    /// digest must be equal; each recorded header must be satisfied (`accept` and `accept-language` by content
    /// negotiation on the stored response, a credential by its scheme, any other by its value, an absent one by its
    /// absence); among several, the best negotiated, then the one recorded with the request's very values, then
    /// the fewest qualifiers, then key order.
    package static func choose(_ candidates: [Candidate], method: String, headers: HTTPFields, body: Data?) -> Int? {
        let upper = asciiUppercased(method)
        let method = upper == "HEAD" ? "GET" : upper
        var requestDigest: SHA256Digest??
        var best: (entry: Int, score: (Double, Int, Int))?
        // Which credentials the request carries, read once (not per candidate).
        var carriesAuthorization = false
        var carriesProxyAuthorization = false
        if !headers.isEmpty {
            for field in headers {
                if field.name == .authorization { carriesAuthorization = true } else if field.name == .proxyAuthorization { carriesProxyAuthorization = true }
            }
        }
        // Each header's value, and the value a key records for it, are read once per request, whatever the
        // candidates (HTTPFields' subscript searches and joins every time): `accept` and `accept-language`, which
        // negotiation reads for every candidate, in locals; others in a list made only when a candidate names one.
        var sent = SentHeaders(headers)
        for candidate in candidates {
            guard candidate.method == method else { continue }
            if requestDigest == nil {
                requestDigest = .some(body.flatMap { $0.isEmpty ? nil : $0.withUnsafeBytes { SHA256.hash(data: $0) } })
            }
            guard same(candidate.digest, requestDigest!) else { continue }
            // A credential the request carries goes only to an answer recorded with one of its scheme (a cookie only
            // where the answer varies on it: browsers send cookies everywhere).
            if (carriesAuthorization && !candidate.namesAuthorization) || (carriesProxyAuthorization && !candidate.namesProxyAuthorization) { continue }
            var weight = 1.0
            var exact = 0
            var acceptable = true
            if !candidate.kinds.isEmpty {
                for (k, header) in candidate.qualifiers.headers.enumerated() where acceptable {
                    let kind = candidate.kinds[k]
                    let (value, keyed) = sent.value(header.name, candidate.fields[k], kind)
                    if keyed == header.value { exact += 1 }
                    switch kind {
                    case .accept:
                        weight *= Double(value.map { Scan.mediaWeight($0, candidate) } ?? 1000) / 1000
                    case .acceptLanguage where candidate.hasLanguage:
                        weight *= Double(value.map { Scan.languageWeight($0, candidate) } ?? 1000) / 1000
                    case .acceptLanguage:
                        // Stored without a language: matched by value, as any other header.
                        acceptable = sameBytes(keyed, header.value)
                    case .credential:
                        // A credential by its scheme (keyValue keeps only that; a cookie by its presence).
                        acceptable = keyed?.lowercased() == header.value?.lowercased()
                    case .other:
                        acceptable = sameBytes(keyed, header.value)
                    }
                    if weight == 0 { acceptable = false }
                }
            }
            guard acceptable else { continue }
            let score = (weight, exact, -candidate.size)
            if best.map({ score > $0.score }) ?? true { best = (candidate.entry, score) }
        }
        return best?.entry
    }

    /// The request's header values as ``choose(_:method:headers:body:)`` reads them: each name's fields joined with
    /// ", " (RFC 9110 §5.3; one field taken as it is), and the value a key records for it (``keyValue(name:value:)``),
    /// each found once.
    struct SentHeaders {
        typealias Value = (value: String?, keyed: String?)
        let headers: HTTPFields
        var accept: Value?
        var acceptLanguage: Value?
        var others: [(name: String, value: Value)] = []

        init(_ headers: HTTPFields) { self.headers = headers }

        mutating func value(_ name: String, _ field: HTTPField.Name?, _ kind: Candidate.HeaderKind) -> Value {
            switch kind {
            case .accept:
                if let known = accept { return known }
                let found = read(name, field)
                accept = found
                return found
            case .acceptLanguage:
                if let known = acceptLanguage { return known }
                let found = read(name, field)
                acceptLanguage = found
                return found
            case .credential, .other:
                if let known = others.first(where: { $0.name == name }) { return known.value }
                let found = read(name, field)
                others.append((name, found))
                return found
            }
        }

        private func read(_ name: String, _ field: HTTPField.Name?) -> Value {
            guard let field, !headers.isEmpty else { return (nil, nil) }
            var value: String?
            for sent in headers where sent.name == field { value = value.map { $0 + ", " + sent.value } ?? sent.value }
            return (value, value.map { RequestQualifiers.keyValue(name: name, value: $0) })
        }
    }

    /// `Accept` and `Accept-Language` read against one candidate straight from the header's bytes, with nothing
    /// allocated: this runs for every candidate of every request matched (the same rules as ``Range``).
    enum Scan {
        @inline(__always) static func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }

        /// The items of `value`: for each, the trimmed range's bytes and the weight its `q` gives (1000 without one).
        static func items(_ value: String, _ body: (UnsafeBufferPointer<UInt8>, Int) -> Void) {
            var value = value
            value.withUTF8 { b in
                var i = 0
                while i < b.count {
                    // The item runs to a comma outside a quoted parameter value (`;charset="a,b"`; a backslash escapes
                    // the byte after it inside quotes, RFC 9110 §5.6.4).
                    var end = i
                    var quoted = false
                    while end < b.count, quoted || b[end] != UInt8(ascii: ",") {
                        if quoted && b[end] == UInt8(ascii: "\\") && end + 1 < b.count {
                            end += 1
                        } else if b[end] == UInt8(ascii: "\"") {
                            quoted.toggle()
                        }
                        end += 1
                    }
                    var rangeEnd = i
                    while rangeEnd < end, b[rangeEnd] != UInt8(ascii: ";") { rangeEnd += 1 }
                    var start = i
                    var stop = rangeEnd
                    while start < stop, b[start] == 0x20 || b[start] == 0x09 { start += 1 }
                    while stop > start, b[stop - 1] == 0x20 || b[stop - 1] == 0x09 { stop -= 1 }
                    if stop > start {
                        body(UnsafeBufferPointer(rebasing: b[start..<stop]), weight(UnsafeBufferPointer(rebasing: b[rangeEnd..<end])))
                    }
                    i = end + 1
                }
            }
        }

        /// The `q` among `;`-separated parameters, by RFC 9110 §12.4.2's grammar; 1000 without one or for a value outside it.
        static func weight(_ parameters: UnsafeBufferPointer<UInt8>) -> Int {
            var i = 0
            while i < parameters.count {
                while i < parameters.count, parameters[i] == UInt8(ascii: ";") || parameters[i] == 0x20 || parameters[i] == 0x09 { i += 1 }
                var end = i
                while end < parameters.count, parameters[end] != UInt8(ascii: ";") { end += 1 }
                if end - i >= 2, lower(parameters[i]) == UInt8(ascii: "q"), parameters[i + 1] == UInt8(ascii: "=") {
                    var stop = end
                    while stop > i + 2, parameters[stop - 1] == 0x20 || parameters[stop - 1] == 0x09 { stop -= 1 }
                    return qvalue(UnsafeBufferPointer(rebasing: parameters[(i + 2)..<stop])) ?? 1000
                }
                i = end
            }
            return 1000
        }

        static func qvalue(_ b: UnsafeBufferPointer<UInt8>) -> Int? {
            guard let first = b.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1"), b.count <= 5 else { return nil }
            if b.count == 1 { return first == UInt8(ascii: "1") ? 1000 : 0 }
            guard b[1] == UInt8(ascii: "."), b.dropFirst(2).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            var thousandths = 0
            var scale = 100
            for c in b.dropFirst(2) {
                thousandths += Int(c - 0x30) * scale
                scale /= 10
            }
            if first == UInt8(ascii: "1") { return thousandths == 0 ? 1000 : nil }
            return thousandths
        }

        static func equal(_ range: UnsafeBufferPointer<UInt8>, _ bytes: [UInt8]) -> Bool {
            range.count == bytes.count && zip(range, bytes).allSatisfy { lower($0) == $1 }
        }

        /// The weight an `Accept` value gives the candidate's type: the most specific matching range decides.
        static func mediaWeight(_ value: String, _ candidate: Candidate) -> Int {
            var best = (specificity: 0, q: 0)
            items(value) { range, q in
                let specificity: Int
                if equal(range, candidate.typeBytes) {
                    specificity = 3
                } else if range.count == candidate.majorBytes.count + 2, range[range.count - 2] == UInt8(ascii: "/"),
                    range[range.count - 1] == UInt8(ascii: "*"),
                    equal(UnsafeBufferPointer(rebasing: range[0..<(range.count - 2)]), candidate.majorBytes), !candidate.majorBytes.isEmpty
                {
                    specificity = 2
                } else if range.count == 3, range[0] == UInt8(ascii: "*"), range[1] == UInt8(ascii: "/"), range[2] == UInt8(ascii: "*") {
                    specificity = 1
                } else {
                    return
                }
                if specificity > best.specificity { best = (specificity, q) }
            }
            return best.specificity == 0 ? 0 : best.q
        }

        /// The weight an `Accept-Language` value gives the candidate's languages: the longest matching range decides.
        static func languageWeight(_ value: String, _ candidate: Candidate) -> Int {
            var best = (length: -1, q: 0)
            items(value) { range, q in
                let any = range.count == 1 && range[0] == UInt8(ascii: "*")
                let matches =
                    any
                    || candidate.languageBytes.contains { tag in
                        if equal(range, tag) { return true }
                        // The tag starts with the range and `-`, or the range with the tag and `-`.
                        let (short, long, shortIsRange) = range.count < tag.count ? (range.count, tag.count, true) : (tag.count, range.count, false)
                        guard short < long else { return false }
                        for j in 0..<short where lower(range[j]) != tag[j] { return false }
                        return (shortIsRange ? tag[short] : lower(range[short])) == UInt8(ascii: "-")
                    }
                guard matches else { return }
                let length = any ? 0 : range.count
                if length > best.length { best = (length, q) }
            }
            return best.length < 0 ? 0 : best.q
        }
    }
}
