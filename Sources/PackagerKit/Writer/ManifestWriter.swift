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
        var object = JSONBytes.Object()
        out.raw("{")
        if let body = entry.body {
            out.field("body", in: &object)
            out.object([
                ("compression", .string(body.compression.description)), ("size", .integer(body.size)), ("storedSize", .integer(body.storedSize)),
            ])
        }
        out.field("cacheControl", entry.cacheControl, in: &object)
        out.field("charset", entry.charset, in: &object)
        out.field("contentEncoding", entry.contentEncoding, in: &object)
        out.field("date", entry.date, in: &object)
        out.field("etag", entry.etag, in: &object)
        out.field("expires", entry.expires, in: &object)
        out.field("fetchedAt", entry.fetchedAt, in: &object)
        out.field("headers", pairs: entry.headers, in: &object)
        out.field("key", entry.key, in: &object)
        out.field("kind", entry.kind.description, in: &object)
        out.field("lastModified", entry.lastModified, in: &object)
        out.field("mediaType", entry.mediaType, in: &object)
        out.field("method", entry.method, in: &object)
        out.field("redirectTo", entry.redirectTo, in: &object)
        if let request = entry.request {
            out.field("request", in: &object)
            write(request, to: &out)
        }
        out.field("source", entry.source, in: &object)
        out.field("stableSha256", entry.stableSha256, in: &object)
        out.field("status", in: &object)
        out.integer(entry.status)
        out.field("synthesized", entry.synthesized, in: &object)
        out.field("volatile", entry.volatile, in: &object)
        out.raw("}")
    }

    /// A declared request, fields in byte order of their names.
    private static func write(_ request: ManifestRequest, to out: inout JSONBytes) {
        var object = JSONBytes.Object()
        out.raw("{")
        out.field("body", request.body, in: &object)
        out.field("bodyBase64", request.bodyBase64, in: &object)
        if request.bodySecret == true {
            out.field("bodySecret", in: &object)
            out.raw("true")
        }
        out.field("headers", pairs: request.headers, in: &object)
        out.field("method", request.method, in: &object)
        out.field("paginate", request.paginate, in: &object)
        out.field("vary", request.vary, in: &object)
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

    /// Where a one-line object being written is: whether a field was written yet.
    struct Object {
        var empty = true
    }

    /// A field's name in `object` (after a comma unless it is the first); its value comes next.
    mutating func field(_ name: StaticString, in object: inout Object) {
        raw(object.empty ? "\"" : ", \"")
        object.empty = false
        raw(name)
        raw("\": ")
    }

    /// A string field, left out when nil.
    mutating func field(_ name: StaticString, _ value: String?, in object: inout Object) {
        guard let value else { return }
        field(name, in: &object)
        string(value)
    }

    /// An array of strings, left out when nil.
    mutating func field(_ name: StaticString, _ values: [String]?, in object: inout Object) {
        guard let values else { return }
        field(name, in: &object)
        stringArray(values)
    }

    /// An array of pairs (header fields), each an array of two strings.
    mutating func field(_ name: StaticString, pairs: [[String]], in object: inout Object) {
        field(name, in: &object)
        raw("[")
        for (i, pair) in pairs.enumerated() {
            if i > 0 { raw(", ") }
            stringArray(pair)
        }
        raw("]")
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
