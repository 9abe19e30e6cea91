import Foundation

/// Where a recording carries credentials outside the headers named for them: query parameters, stored URLs and
/// request bodies (``HARImporter/isSecretParameter(_:)`` names them).
extension HARImporter {
    /// The parameters of `url`'s query that are secrets, decoded and lowercased, each once, in order.
    static func secretParameters(inURL url: String) -> [String] {
        guard let query = query(of: url) else { return [] }
        var names: [String] = []
        for parameter in parameters(in: Array(("?" + query).utf8)) where isSecretParameter(parameter.name) && !names.contains(parameter.name) {
            names.append(parameter.name)
        }
        return names
    }

    /// The first secret parameter of any URL in `text` (a `Link`, `Location` or `Refresh` value): each `?` or `&`
    /// followed by a name and `=` starts one. Nil for none.
    static func secretParameter(inText text: String) -> String? {
        parameters(in: Array(text.utf8)).first { isSecretParameter($0.name) }?.name
    }

    /// `url` with the value of each secret parameter of its query written `[secret]`, for a report.
    static func redactingSecretParameters(_ url: String) -> String {
        guard let query = query(of: url) else { return url }
        let bytes = Array(query.utf8)
        let secret = parameters(in: Array(("?" + query).utf8)).filter { isSecretParameter($0.name) }
        guard !secret.isEmpty else { return url }
        var out = [UInt8]()
        var i = 0
        for parameter in secret {
            // Offsets in `?` + query: one past those in the query.
            let start = parameter.valueStart - 1
            out += bytes[i..<start] + Array("[secret]".utf8)
            i = parameter.valueEnd - 1
        }
        out += bytes[i...]
        let prefix = url[..<url.utf8.index(after: url.utf8.firstIndex(of: UInt8(ascii: "?"))!)]
        let fragment = url.utf8.firstIndex(of: UInt8(ascii: "#")).map { String(url[$0...]) } ?? ""
        return String(prefix) + String(decoding: out, as: UTF8.self) + fragment
    }

    /// A request body's first field that is a secret (``isSecretParameter(_:)``), lowercased: the names of a form
    /// (`a=1&password=…`), the keys of JSON (`"client_secret": …`, at any depth) and multipart's `name="…"`. Nil for
    /// none. Read as bytes in one pass each, whatever the stated type: a body is at most 1 MiB, and a name found where
    /// none is meant only keeps a body out of the manifest.
    static func secretField(inBody body: Data) -> String? {
        let bytes = [UInt8](body)
        var names = [String]()
        // Form fields: each `&`-separated part with an `=`.
        var start = 0
        for i in 0...bytes.count where i == bytes.count || bytes[i] == UInt8(ascii: "&") {
            if let equals = bytes[start..<i].firstIndex(of: UInt8(ascii: "=")) { names.append(formDecoded(bytes[start..<equals])) }
            start = i + 1
        }
        names += jsonKeys(in: bytes)
        names += multipartNames(in: bytes)
        return names.first(where: isSecretParameter).map { $0.lowercased() }
    }

    /// The query of `url` (after its first `?`, before any `#`), nil when it has none.
    private static func query(of url: String) -> Substring? {
        // By bytes: a Character scan of every URL of a large recording cost more than reading it.
        let beforeFragment = url[..<(url.utf8.firstIndex(of: UInt8(ascii: "#")) ?? url.endIndex)]
        guard let mark = beforeFragment.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return beforeFragment[beforeFragment.utf8.index(after: mark)...]
    }

    /// Every `name=value` that follows a `?` or `&` in `bytes`: the name decoded and lowercased, and where its value
    /// starts and ends (at the next `&`, `#`, or a byte no URL holds raw).
    private static let endsName: Set<UInt8> = Set("=&?#;,<>\"' \t".utf8)
    private static let endsValue: Set<UInt8> = Set("&#<>\"' \t,;".utf8)

    private static func parameters(in bytes: [UInt8]) -> [(name: String, valueStart: Int, valueEnd: Int)] {
        // Most URLs have no query: nothing to look for.
        guard bytes.contains(UInt8(ascii: "?")) || bytes.contains(UInt8(ascii: "&")) else { return [] }
        var found: [(String, Int, Int)] = []
        var i = 0
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "?") || bytes[i] == UInt8(ascii: "&") else {
                i += 1
                continue
            }
            var end = i + 1
            while end < bytes.count && !endsName.contains(bytes[end]) { end += 1 }
            guard end < bytes.count, bytes[end] == UInt8(ascii: "="), end > i + 1 else {
                i += 1
                continue
            }
            var valueEnd = end + 1
            while valueEnd < bytes.count && !endsValue.contains(bytes[valueEnd]) { valueEnd += 1 }
            found.append((formDecoded(bytes[(i + 1)..<end]).lowercased(), end + 1, valueEnd))
            i = valueEnd
        }
        return found
    }

    /// A form-encoded name decoded: `+` is a space, `%XX` a byte (an escape that is not one is kept as written).
    private static func formDecoded(_ bytes: ArraySlice<UInt8>) -> String {
        let text = String(decoding: bytes.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }, as: UTF8.self)
        return text.removingPercentEncoding ?? text
    }

    /// The strings of JSON text that a `:` follows (its object keys), unescaped as far as names need (`\"`, `\\`).
    private static func jsonKeys(in bytes: [UInt8]) -> [String] {
        var keys = [String]()
        var i = 0
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "\"") else {
                i += 1
                continue
            }
            var text = [UInt8]()
            var j = i + 1
            while j < bytes.count && bytes[j] != UInt8(ascii: "\"") {
                if bytes[j] == UInt8(ascii: "\\") && j + 1 < bytes.count { j += 1 }
                text.append(bytes[j])
                j += 1
            }
            var k = j + 1
            while k < bytes.count && [0x20, 0x09, 0x0A, 0x0D].contains(bytes[k]) { k += 1 }
            if k < bytes.count && bytes[k] == UInt8(ascii: ":") { keys.append(String(decoding: text, as: UTF8.self)) }
            i = j + 1
        }
        return keys
    }

    /// The `name="…"` values of multipart parts' `Content-Disposition`.
    private static func multipartNames(in bytes: [UInt8]) -> [String] {
        let mark = Array("name=\"".utf8)
        var names = [String]()
        var i = 0
        while i + mark.count <= bytes.count {
            guard bytes[i..<(i + mark.count)].elementsEqual(mark) else {
                i += 1
                continue
            }
            let start = i + mark.count
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\"")) ?? bytes.count
            names.append(String(decoding: bytes[start..<end], as: UTF8.self))
            i = end
        }
        return names
    }
}
