import OfflineBundle

/// Serializes a ``Manifest`` as `manifest.json`: keys sorted, optional fields omitted, slashes not escaped,
/// the top level indented and each entry on one line (docs/FORMAT.md §6, which gives the exact bytes).
///
/// Foundation's `JSONEncoder` took a sixth of the time of packing 100,000 small files; this writes the
/// same JSON values straight into one byte buffer. Any JSON reader (and `Manifest`'s `Decodable`) reads it.
enum ManifestWriter {
    static func encode(_ manifest: Manifest) -> [UInt8] {
        var out = JSONBytes()
        out.reserve(256 + manifest.entries.count * 640)
        head(createdAt: manifest.createdAt, to: &out)
        for (i, entry) in manifest.entries.enumerated() { line(entry, first: i == 0, to: &out) }
        tail(manifest, hasEntries: !manifest.entries.isEmpty, to: &out)
        return out.bytes
    }

    /// The manifest up to its first entry. ``head(createdAt:to:)``, then ``line(_:first:to:)`` for each entry in
    /// key order, then ``tail(_:hasEntries:to:)`` give the bytes ``encode(_:)`` gives, in pieces.
    static func head(createdAt: String?, to out: inout JSONBytes) {
        out.raw("{\n")
        if let createdAt {
            out.raw("  \"createdAt\": ")
            out.string(createdAt)
            out.raw(",\n")
        }
        out.raw("  \"entries\": [")
    }

    /// One entry's line.
    static func line(_ entry: ManifestEntry, first: Bool, to out: inout JSONBytes) {
        out.raw(first ? "\n    " : ",\n    ")
        write(entry, to: &out)
    }

    /// Everything after the entries; `manifest.entries` is not read.
    static func tail(_ manifest: Manifest, hasEntries: Bool, to out: inout JSONBytes) {
        out.raw(hasEntries ? "\n  ],\n" : "],\n")
        out.raw("  \"format\": ")
        out.string(manifest.format)
        out.raw(",\n  \"formatVersion\": ")
        out.integer(manifest.formatVersion)
        out.raw(",\n  \"generator\": ")
        out.string(manifest.generator)
        let rules = manifest.rules
        out.raw(",\n  \"rules\": {\"block\": ")
        out.stringArray(rules.block)
        out.raw(", \"dropQueryParameters\": ")
        out.stringArray(rules.dropQueryParameters)
        // Only when there are some: a bundle without them has the manifest it had before the rule existed.
        if !rules.ignoreQuery.isEmpty {
            out.raw(", \"ignoreQuery\": ")
            out.stringArray(rules.ignoreQuery)
        }
        if !rules.match.isEmpty {
            out.raw(", \"match\": ")
            out.stringArray(rules.match)
        }
        out.raw(", \"substitutionPrefixes\": ")
        out.stringArray(rules.substitutionPrefixes)
        out.raw(", \"substitutions\": ")
        out.stringArray(rules.substitutions)
        out.raw("}")
        let totals = manifest.totals
        out.raw(",\n  \"totals\": ")
        out.object([
            ("bodies", .integer(UInt64(totals.bodies))), ("bodyBytes", .integer(totals.bodyBytes)), ("entries", .integer(UInt64(totals.entries))),
            ("storedBytes", .integer(totals.storedBytes)),
        ])
        out.raw("\n}\n")
    }

    /// One entry as a single-line object, fields in byte order of their names.
    private static func write(_ entry: ManifestEntry, to out: inout JSONBytes) {
        var first = true
        func field(_ name: StaticString) {
            out.raw(first ? "{\"" : ", \"")
            first = false
            out.raw(name)
            out.raw("\": ")
        }
        func optional(_ name: StaticString, _ value: String?) {
            guard let value else { return }
            field(name)
            out.string(value)
        }
        if let body = entry.body {
            field("body")
            out.object([
                ("compression", .string(body.compression.description)), ("size", .integer(body.size)), ("storedSize", .integer(body.storedSize)),
            ])
        }
        optional("cacheControl", entry.cacheControl)
        optional("charset", entry.charset)
        optional("contentEncoding", entry.contentEncoding)
        optional("date", entry.date)
        optional("etag", entry.etag)
        optional("expires", entry.expires)
        optional("fetchedAt", entry.fetchedAt)
        field("headers")
        out.raw("[")
        for (i, pair) in entry.headers.enumerated() {
            if i > 0 { out.raw(", ") }
            out.stringArray(pair)
        }
        out.raw("]")
        optional("key", entry.key)
        optional("kind", entry.kind.description)
        optional("lastModified", entry.lastModified)
        optional("mediaType", entry.mediaType)
        optional("method", entry.method)
        optional("redirectTo", entry.redirectTo)
        if let request = entry.request {
            field("request")
            write(request, to: &out)
        }
        optional("source", entry.source)
        optional("stableSha256", entry.stableSha256)
        field("status")
        out.integer(entry.status)
        if let synthesized = entry.synthesized {
            field("synthesized")
            out.stringArray(synthesized)
        }
        if let volatile = entry.volatile {
            field("volatile")
            out.stringArray(volatile)
        }
        out.raw("}")
    }

    /// A declared request, fields in byte order of their names.
    private static func write(_ request: ManifestRequest, to out: inout JSONBytes) {
        out.raw("{")
        var first = true
        func field(_ name: StaticString) {
            out.raw(first ? "\"" : ", \"")
            first = false
            out.raw(name)
            out.raw("\": ")
        }
        if let body = request.body {
            field("body")
            out.string(body)
        }
        if let body = request.bodyBase64 {
            field("bodyBase64")
            out.string(body)
        }
        if request.bodySecret == true {
            field("bodySecret")
            out.raw("true")
        }
        field("headers")
        out.raw("[")
        for (i, pair) in request.headers.enumerated() {
            if i > 0 { out.raw(", ") }
            out.stringArray(pair)
        }
        out.raw("]")
        field("method")
        out.string(request.method)
        if let paginate = request.paginate {
            field("paginate")
            out.string(paginate)
        }
        if let vary = request.vary {
            field("vary")
            out.stringArray(vary)
        }
        out.raw("}")
    }
}

/// A growing buffer of UTF-8 JSON text.
struct JSONBytes {
    private(set) var bytes: [UInt8] = []

    mutating func reserve(_ n: Int) { bytes.reserveCapacity(n) }

    /// Empties the buffer, keeping its storage.
    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func integer<T: BinaryInteger>(_ value: T) {
        bytes.append(contentsOf: String(value).utf8)
    }

    enum Value {
        case string(String)
        case integer(UInt64)
    }

    /// A one-line object of fields given in the order they are written (callers list them sorted).
    mutating func object(_ fields: [(StaticString, Value)]) {
        for (i, (name, value)) in fields.enumerated() {
            raw(i == 0 ? "{\"" : ", \"")
            raw(name)
            raw("\": ")
            switch value {
            case .string(let text): string(text)
            case .integer(let number): integer(number)
            }
        }
        raw("}")
    }

    mutating func stringArray(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (i, value) in values.enumerated() {
            if i > 0 { raw(", ") }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A JSON string: quote, backslash and control characters escaped (RFC 8259 §7); everything else as UTF-8.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for (i, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                start = i + 1
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
