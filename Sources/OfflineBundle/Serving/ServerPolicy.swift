import Foundation

/// What a server decides beside the bundle's answer, the same for every transport: which Host values it answers
/// (so a web page that rebinds its own name to 127.0.0.1 cannot read what the bundle serves), and where each request
/// is reported (an access log). Reloading the bundles is the loader handle's (``LoaderHandle``), which a reloader
/// swaps.
public struct ServerPolicy: Sendable {
    /// Host names (without port, lowercased) answered besides IP literals, `localhost` and `*.localhost`; others get
    /// 421 Misdirected Request. Nil answers every Host.
    public var allowedHosts: Set<String>?
    /// Told of every request answered, once its status is known; nil reports none.
    public var accessLog: (@Sendable (ServedRequest) -> Void)?

    /// Whether a miss is explained (``MissExplanation``) in the record the access log gets.
    public var explainsMisses: Bool
    /// Whether a miss's 404 carries its explanation in an `X-Offline-Miss` field (for a developer's client: it names
    /// recorded URLs).
    public var sendsMissHeader: Bool

    /// Every Host answered, nothing reported: what a service embedding the middleware behind its own policy wants.
    public static let open = ServerPolicy()

    public init(
        allowedHosts: Set<String>? = nil, accessLog: (@Sendable (ServedRequest) -> Void)? = nil, explainsMisses: Bool = false,
        sendsMissHeader: Bool = false
    ) {
        self.allowedHosts = allowedHosts.map { Set($0.map { $0.lowercased() }) }
        self.accessLog = accessLog
        self.explainsMisses = explainsMisses
        self.sendsMissHeader = sendsMissHeader
    }

    /// Whether a request with this Host (without port, lowercased; nil when it has none) is answered. The same Host
    /// always gets the same verdict, so a server may keep answers by Host.
    public func accepts(host: String?) -> Bool {
        guard let allowedHosts, let host else { return true }
        let isLiteral =
            host.hasPrefix("[")
            || host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
        return isLiteral || host == "localhost" || host.hasSuffix(".localhost") || allowedHosts.contains(host)
    }
}

/// What one request got, for an access log.
public struct ServedRequest: Sendable {
    /// The client's address, when known.
    public var client: String?
    public var method: String
    /// The request target as the client sent it.
    public var target: String
    public var status: Int
    /// The response's Content-Length, when it has one.
    public var contentLength: String?
    /// What answered; nil for a miss, a refused Host or an error.
    public var source: BundleResponse.Source?
    /// The request's protocol as the log writes it (`HTTP/1.1`, `HTTP/1.0`, `HTTP/2.0`).
    public var version = "HTTP/1.1"
    /// Whether the answer came whole from a server's cache of answers (``OfflineBundleChannelServer``'s), not from
    /// the answer step.
    public var fromCache = false
    /// For a miss a server was asked to explain: why, against the nearest recorded request (``MissExplanation``).
    public var miss: MissExplanation?

    public init(client: String? = nil, method: String, target: String, status: Int, contentLength: String? = nil, source: BundleResponse.Source? = nil) {
        self.client = client
        self.method = method
        self.target = target
        self.status = status
        self.contentLength = contentLength
        self.source = source
    }

    /// The request's line in the common log format (`host - - [time] "METHOD target VERSION" status bytes`), ending
    /// with a newline; bytes are the Content-Length (`-` without one), and a last quoted field says what answered: the
    /// bundle's file name, `rules`, `last-seen`, or `-`; an explained miss adds `"miss: …"`. The client's request line
    /// is escaped (quotes, backslashes and control bytes as `\xNN`), so one request is one line.
    public func commonLogLine(at date: Date = Date()) -> String {
        let answered = source.map { "\"\($0.description.unicodeScalars.filter { $0.value >= 0x20 && $0 != "\"" })\"" } ?? "\"-\""
        let request = "\(method) \(target) \(version)".unicodeScalars.map { c -> String in
            c == "\"" || c == "\\" || c.value < 0x20 || c.value == 0x7F ? String(format: "\\x%02x", c.value) : String(c)
        }.joined()
        // An explained miss adds a last quoted field (visible ASCII: it quotes the client's values).
        let explained = miss.map { " \"miss: \($0.fieldValue.replacingOccurrences(of: "\"", with: "\\x22"))\"" } ?? ""
        return "\(client ?? "-") - - [\(Self.commonLogTime(date))] \"\(request)\" \(status) \(contentLength ?? "-") \(answered)\(explained)\n"
    }

    /// The request as one line of JSON, ending with a newline: `time` (RFC 3339, UTC), `client`, `method`, `target`,
    /// `version`, `status`, `bytes` (the Content-Length, or null), `source` (as ``commonLogLine(at:)`` says it, or
    /// null) and `cached`, and for an explained miss `miss` (`kind`, `nearest`, `differences`). Every string is escaped
    /// as JSON, so one request is one line whatever the client sent.
    public func jsonLogLine(at date: Date = Date()) -> String {
        let t = HTTPDates.civil(Int(date.timeIntervalSince1970.rounded(.down)))
        let time = String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", t.year, t.month, t.day, t.hour, t.minute, t.second)
        var fields: [(String, String)] = [
            ("time", Self.jsonString(time)), ("client", client.map(Self.jsonString) ?? "null"), ("method", Self.jsonString(method)),
            ("target", Self.jsonString(target)), ("version", Self.jsonString(version)), ("status", String(status)),
            ("bytes", contentLength.flatMap { UInt64($0) }.map(String.init) ?? "null"),
            ("source", source.map { Self.jsonString($0.description) } ?? "null"), ("cached", fromCache ? "true" : "false"),
        ]
        if let miss {
            let differences: String = "[" + miss.differences.map(Self.jsonString).joined(separator: ",") + "]"
            let nearest: String = miss.nearest.map(Self.jsonString) ?? "null"
            fields.append(("miss", "{\"kind\":\(Self.jsonString(miss.kind.rawValue)),\"nearest\":\(nearest),\"differences\":\(differences)}"))
        }
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}\n"
    }

    /// `text` as a JSON string, quotes included: quotes, backslashes and control characters escaped.
    package static func jsonString(_ text: String) -> String {
        // Most text needs no escaping: no copy scalar by scalar for it.
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            return "\"" + text + "\""
        }
        var out = "\""
        for c in text.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where c.value < 0x20 || c.value == 0x7F: out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(c)
            }
        }
        return out + "\""
    }

    /// `23/Nov/2026:13:02:01 +0000`, the common log format's time, in UTC.
    static func commonLogTime(_ date: Date) -> String {
        let t = HTTPDates.civil(Int(date.timeIntervalSince1970.rounded(.down)))
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return "\(two(t.day))/\(months[t.month - 1])/\(t.year):\(two(t.hour)):\(two(t.minute)):\(two(t.second)) +0000"
    }
}
