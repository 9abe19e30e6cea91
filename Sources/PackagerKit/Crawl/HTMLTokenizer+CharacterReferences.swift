import Foundation

// Character references (WHATWG HTML §13.2.5.72-80), kept apart from the tokenizer's states: the table of named
// references URLs use, the Windows-1252 remapping of numeric ones, and the decoder the tokenizer and the sitemap
// scanner share.
extension HTMLTokenizer {

    /// The named references decoded: the ones URLs use. `legacy` ones may appear without their semicolon.
    private static let namedReferences: [(name: [UInt8], scalar: UInt32, legacy: Bool)] = [
        (Array("amp".utf8), 0x26, true), (Array("AMP".utf8), 0x26, true),
        (Array("lt".utf8), 0x3C, true), (Array("LT".utf8), 0x3C, true),
        (Array("gt".utf8), 0x3E, true), (Array("GT".utf8), 0x3E, true),
        (Array("quot".utf8), 0x22, true), (Array("QUOT".utf8), 0x22, true),
        (Array("apos".utf8), 0x27, false),
        (Array("nbsp".utf8), 0xA0, true),
    ]

    /// What numeric references to 0x80...0x9F mean: the Windows-1252 characters, as the standard specifies.
    private static let windows1252: [UInt32: UInt32] = [
        0x80: 0x20AC, 0x82: 0x201A, 0x83: 0x0192, 0x84: 0x201E, 0x85: 0x2026, 0x86: 0x2020, 0x87: 0x2021, 0x88: 0x02C6,
        0x89: 0x2030, 0x8A: 0x0160, 0x8B: 0x2039, 0x8C: 0x0152, 0x8E: 0x017D, 0x91: 0x2018, 0x92: 0x2019, 0x93: 0x201C,
        0x94: 0x201D, 0x95: 0x2022, 0x96: 0x2013, 0x97: 0x2014, 0x98: 0x02DC, 0x99: 0x2122, 0x9A: 0x0161, 0x9B: 0x203A,
        0x9C: 0x0153, 0x9E: 0x017E, 0x9F: 0x0178,
    ]

    static let replacementCharacter: [UInt8] = [0xEF, 0xBF, 0xBD]

    /// The character reference state at `i` (a '&'): appends the decoded character, or the text as written when it is
    /// not a reference, and moves `i` past what it used (always at least the '&').
    static func characterReference(in bytes: [UInt8], at i: inout Int, into out: inout [UInt8], inAttribute: Bool, limit: Int? = nil) {
        let n = limit ?? bytes.count
        let start = i
        i += 1
        guard i < n else {
            out.append(UInt8(ascii: "&"))
            return
        }
        if bytes[i] == UInt8(ascii: "#") {
            var k = i + 1
            var hex = false
            if k < n && (bytes[k] == UInt8(ascii: "x") || bytes[k] == UInt8(ascii: "X")) {
                hex = true
                k += 1
            }
            let digitsStart = k
            var value: UInt32 = 0
            while k < n, let digit = hex ? hexValue(bytes[k]) : decimalValue(bytes[k]) {
                // Saturate: anything past U+10FFFF becomes U+FFFD anyway.
                if value <= 0x10FFFF { value = value * (hex ? 16 : 10) + UInt32(digit) }
                k += 1
            }
            guard k > digitsStart else {
                // No digits: "&#" or "&#x" is text.
                out.append(contentsOf: bytes[start..<digitsStart])
                i = digitsStart
                return
            }
            if k < n && bytes[k] == UInt8(ascii: ";") { k += 1 }
            i = k
            if value == 0 || value > 0x10FFFF || (0xD800...0xDFFF).contains(value) {
                value = 0xFFFD
            } else if let mapped = windows1252[value] {
                value = mapped
            }
            appendUTF8(value, to: &out)
            return
        }
        var k = i
        while k < n && isAlphanumeric(bytes[k]) { k += 1 }
        let run = bytes[i..<k]
        let semicolon = k < n && bytes[k] == UInt8(ascii: ";")
        if semicolon, let match = namedReferences.first(where: { $0.name.elementsEqual(run) }) {
            appendUTF8(match.scalar, to: &out)
            i = k + 1
            return
        }
        if inAttribute {
            // In attributes a reference without its semicolon only counts when it is the whole name and no '=' follows,
            // so query strings like "?a=1&copy=2" survive.
            let equals = k < n && bytes[k] == UInt8(ascii: "=")
            if !equals, let match = namedReferences.first(where: { $0.legacy && $0.name.elementsEqual(run) }) {
                appendUTF8(match.scalar, to: &out)
                i = k
                return
            }
        } else {
            // In text the longest legacy name at the start of the run counts ("&ampx" is "&x").
            var best: (length: Int, scalar: UInt32)?
            for entry in namedReferences where entry.legacy && run.starts(with: entry.name) && entry.name.count > (best?.length ?? 0) {
                best = (entry.name.count, entry.scalar)
            }
            if let best {
                appendUTF8(best.scalar, to: &out)
                i += best.length
                return
            }
        }
        out.append(UInt8(ascii: "&"))
        out.append(contentsOf: run)
        i = k
    }

    static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        let scalar = Unicode.Scalar(scalar) ?? "\u{FFFD}"
        out.append(contentsOf: UTF8.encode(scalar)!)
    }
}
