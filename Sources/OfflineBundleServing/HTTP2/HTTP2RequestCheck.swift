import NIOHPACK

/// Whether a request's header block is well formed (RFC 9113 §8.1–§8.3): what a stream error of type PROTOCOL_ERROR
/// answers when it is not. Names lowercase tokens; the request's pseudo-fields (`:method`, `:scheme`, `:path`,
/// `:authority`) once each and before the others, `:path` not empty; no field of HTTP/1.1's connection (§8.2.2), TE
/// only `trailers`; values without NUL, CR or LF, nor space or tab at either end, and the pseudo-fields' without any
/// control character or space; a Host field, when there is one beside `:authority`, the same as it (§8.3.1). A trailer
/// block has no pseudo-field.
/// A CONNECT request (with `:authority`, without `:scheme` and `:path`) is well formed; the bundle answers it as any
/// method it has no answer for.
enum HTTP2RequestCheck {
    /// The request's Content-Length when its block is well formed (nil when it has none); `.malformed` when it is not.
    enum Verdict: Equatable {
        case wellFormed(contentLength: Int?)
        case malformed
    }

    static func request(_ fields: HPACKHeaders) -> Verdict {
        var method: String?
        var scheme = false
        var schemeValue = ""
        var path = false
        var authority: String?
        var host: String?
        var regular = false
        var contentLength: Int?
        for (name, value, _) in fields {
            guard validValue(value) else { return .malformed }
            if name.utf8.first == UInt8(ascii: ":") {
                // Pseudo-fields come first, once each (§8.3), their values visible characters.
                guard !regular, visible(value) else { return .malformed }
                switch name {
                case ":method":
                    guard method == nil, !value.isEmpty else { return .malformed }
                    method = value
                case ":scheme":
                    guard !scheme, !value.isEmpty else { return .malformed }
                    scheme = true
                    schemeValue = value
                case ":path":
                    guard !path, !value.isEmpty else { return .malformed }
                    path = true
                case ":authority":
                    guard authority == nil else { return .malformed }
                    authority = value
                default: return .malformed
                }
                continue
            }
            regular = true
            guard validName(name) else { return .malformed }
            if HTTP2Head.connectionFields.contains(name) { return .malformed }
            switch name {
            case "te": guard value == "trailers" else { return .malformed }
            case "host":
                guard host == nil || host == value else { return .malformed }
                host = value
            case "content-length":
                guard let length = Int(value), length >= 0, contentLength == nil || contentLength == length else { return .malformed }
                contentLength = length
            default: break
            }
        }
        guard let method else { return .malformed }
        if let authority, let host, !sameAuthority(authority, host, scheme: schemeValue) { return .malformed }
        if method == "CONNECT" {
            guard authority != nil, !scheme, !path else { return .malformed }
        } else {
            guard scheme, path else { return .malformed }
        }
        return .wellFormed(contentLength: contentLength)
    }

    /// Whether a trailer block is well formed: no pseudo-field, and the rest as in a request.
    static func trailers(_ fields: HPACKHeaders) -> Bool {
        for (name, value, _) in fields {
            guard validName(name), validValue(value), !HTTP2Head.connectionFields.contains(name) else { return false }
        }
        return true
    }

    /// A token of lowercase letters (RFC 9110 §5.1, RFC 9113 §8.2.1).
    static func validName(_ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): continue
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
                UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
                UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
                continue
            default: return false
            }
        }
        return true
    }

    /// Whether two authorities name the same host and port: in any case, a port the scheme takes by default the same as
    /// none (RFC 3986 §6.2.2.1, §6.2.3).
    static func sameAuthority(_ a: String, _ b: String, scheme: String) -> Bool {
        func normal(_ authority: String) -> String {
            let lower = authority.lowercased()
            let port = scheme == "https" ? ":443" : scheme == "http" ? ":80" : nil
            if let port, lower.hasSuffix(port) { return String(lower.dropLast(port.count)) }
            return lower
        }
        return normal(a) == normal(b)
    }

    /// No control character, space or DEL: what a method, scheme, path or authority may hold (RFC 9110 §5.6.2, RFC 3986).
    static func visible(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in !bytes.contains { $0 <= 0x20 || $0 == 0x7f } }
    }

    /// No NUL, CR or LF, and no space or tab at either end (RFC 9113 §8.2.1).
    static func validValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            guard let first = bytes.first, let last = bytes.last else { return true }
            if first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 { return false }
            for byte in bytes where byte <= 0x0d && (byte == 0 || byte == 0x0a || byte == 0x0d) { return false }
            return true
        }
    }
}
