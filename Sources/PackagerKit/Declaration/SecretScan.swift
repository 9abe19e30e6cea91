import Foundation
import OfflineBundle

/// Values from the environment (``Declaration/secrets``), searched for in every form a URL or a header value can carry
/// them, so that none reaches a request key, a stored header or a report.
///
/// A hostile or careless origin can hand a token back in a redirect or a link, and a key is the URL decoded
/// (RFC 3986 §6.2.2.2): so a text is searched as written, percent-decoded once and twice (an escape of an escape),
/// with `+` read as a space or not (a secret with a space, such as a whole `Bearer …` value, in a query), all compared
/// ASCII-case-insensitively.
package struct SecretScan: Sendable {
    /// The secrets, lowercased (ASCII), as bytes; empty ones left out.
    private let secrets: [[UInt8]]

    package init(_ secrets: [String]) {
        self.secrets = secrets.filter { !$0.isEmpty }.map { Array($0.utf8).map(Self.lower) }
    }

    package var isEmpty: Bool { secrets.isEmpty }

    /// The longest secret, in bytes: a body searched in pieces carries this many bytes less one from a piece to the next.
    package var longest: Int { secrets.map(\.count).max() ?? 0 }

    /// Whether `bytes` hold a secret as it is, letters in any case (a response body, or a piece of one).
    package func found(inBytes bytes: some Collection<UInt8>) -> Bool {
        guard !secrets.isEmpty else { return false }
        let lowered = bytes.map(Self.lower)
        return secrets.contains { Self.contains(lowered, $0) }
    }

    /// Whether `text` carries a secret in any of the forms above.
    package func found(in text: String) -> Bool {
        guard !secrets.isEmpty else { return false }
        return forms(of: text).contains { form in secrets.contains { Self.contains(form, $0) } }
    }

    /// `text` with every secret it carries written `[secret]` (in its decoded form when that is where one was found),
    /// for a report that must name a URL without its secret.
    package func redacted(_ text: String) -> String {
        guard found(in: text) else { return text }
        let redacted = redactedOnce(text)
        // Two secrets in two forms (one raw with a `+`, one with a space) could leave one in the form chosen: then
        // nothing of the text is shown.
        return found(in: redacted) ? "[a URL that carries a secret]" : redacted
    }

    private func redactedOnce(_ text: String) -> String {
        for form in forms(of: text).reversed() where secrets.contains(where: { Self.contains(form, $0) }) {
            var out = [UInt8]()
            var i = 0
            while i < form.count {
                if let secret = secrets.first(where: { i + $0.count <= form.count && form[i..<(i + $0.count)].elementsEqual($0) }) {
                    out += Array("[secret]".utf8)
                    i += secret.count
                } else {
                    out.append(form[i])
                    i += 1
                }
            }
            return String(decoding: out, as: UTF8.self)
        }
        return "[secret]"
    }

    /// The lowercased forms of `text` searched: as written and decoded once and twice, then the same with `+` read as
    /// a space first (as a form-encoded query means it).
    private func forms(of text: String) -> [[UInt8]] {
        let written = Array(text.utf8).map(Self.lower)
        var starts = [written]
        if written.contains(UInt8(ascii: "+")) { starts.append(written.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }) }
        var forms = [[UInt8]]()
        for start in starts {
            var current = start
            forms.append(current)
            for _ in 0..<2 {
                let decoded = Self.percentDecoded(current)
                if decoded == current { break }
                forms.append(decoded)
                current = decoded
            }
        }
        return forms
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    /// `%XX` escapes decoded and letters lowercased (the request keys' own decoding).
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { percentDecodedLowercased($0) }
    }

    private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool { haystack.containsBytes(needle) }
}
