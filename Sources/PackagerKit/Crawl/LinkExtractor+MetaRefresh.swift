/// `<meta http-equiv=refresh>` targets, as the HTML standard reads them.
extension LinkExtractor {
    /// The URL of a `<meta http-equiv=refresh>` content value ("5; url=/next"), following the
    /// standard's shared declarative refresh steps; nil when it only reloads the page or is malformed.
    static func refreshURL(_ content: String) -> String? {
        let b = Array(content.utf8)
        let n = b.count
        var i = 0
        func skipSpaces() { while i < n && isSpace(b[i]) { i += 1 } }
        skipSpaces()
        let timeStart = i
        while i < n && isDigit(b[i]) { i += 1 }
        if i == timeStart && !(i < n && b[i] == UInt8(ascii: ".")) { return nil }
        while i < n && (isDigit(b[i]) || b[i] == UInt8(ascii: ".")) { i += 1 }
        if i < n {
            guard b[i] == UInt8(ascii: ";") || b[i] == UInt8(ascii: ",") || isSpace(b[i]) else { return nil }
            skipSpaces()
            if i < n && (b[i] == UInt8(ascii: ";") || b[i] == UInt8(ascii: ",")) { i += 1 }
            skipSpaces()
        }
        guard i < n else { return nil }
        // Without a complete "url =" prefix the whole remainder is the URL.
        let remainder = i
        func url() -> String? {
            // Skip quotes: an opening quote ends the URL at its match.
            var start = i
            var end = n
            if start < n && (b[start] == UInt8(ascii: "'") || b[start] == UInt8(ascii: "\"")) {
                let quote = b[start]
                start += 1
                end = b[start...].firstIndex(of: quote) ?? n
            }
            let value = trimmed(String(decoding: b[start..<end], as: UTF8.self))
            return value.isEmpty ? nil : value
        }
        func whole() -> String? {
            let value = trimmed(String(decoding: b[remainder...], as: UTF8.self))
            return value.isEmpty ? nil : value
        }
        guard b[i] | 0x20 == UInt8(ascii: "u") else { return url() }
        i += 1
        guard i < n, b[i] | 0x20 == UInt8(ascii: "r") else { return whole() }
        i += 1
        guard i < n, b[i] | 0x20 == UInt8(ascii: "l") else { return whole() }
        i += 1
        skipSpaces()
        guard i < n, b[i] == UInt8(ascii: "=") else { return whole() }
        i += 1
        skipSpaces()
        return url()
    }
}
