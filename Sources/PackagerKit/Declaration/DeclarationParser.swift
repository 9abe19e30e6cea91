// One file, over 600 lines, on purpose: it is the declaration's grammar, one section after another as DECLARATION.md
// lists them, each a few typed readers over the same node helpers (`fail`, `duration`, `size`, did-you-mean); split
// by section, a reader would go back and forth between files to follow one key's path.
import Foundation
import OfflineBundle
import Yams

/// Reads a declaration from YAML, with errors that name the file, line and column.
///
/// Every key is checked: an unknown one is an error that suggests the nearest
/// known key, a value of the wrong shape says what was expected. `${NAME}` in
/// header values and request bodies is replaced from the environment, and such
/// values are marked secret so that nothing writes them anywhere.
public struct DeclarationParser: Sendable {
    /// The environment `${NAME}` is looked up in.
    public var environment: [String: String]

    /// Creates a parser that reads variables from `environment`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// Reads and parses the declaration file at `path`; relative paths in it resolve against its folder.
    public func parse(contentsOf path: String) throws -> Declaration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PackagerError(.io, "cannot read the declaration", subject: path)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw PackagerError(.invalidInput, "\(path): the declaration is not UTF-8 text")
        }
        let folder = (URL(fileURLWithPath: path).standardizedFileURL.path as NSString).deletingLastPathComponent
        return try parse(text, file: path, baseDirectory: folder)
    }

    /// Parses declaration text; `file` names it in errors.
    public func parse(_ text: String, file: String = "packager.yml", baseDirectory: String = FileManager.default.currentDirectoryPath) throws
        -> Declaration
    {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw Self.syntaxError(error, file: file, text: text)
        }
        guard let root else { throw PackagerError(.invalidInput, "\(file): the declaration is empty; it needs at least 'seeds' or 'urls'") }
        var reader = DeclarationReader(file: file, environment: environment, baseDirectory: baseDirectory)
        var declaration = try reader.declaration(root)
        declaration.baseDirectory = baseDirectory
        declaration.warnings = reader.notes.warnings
        for path in declaration.tls.caFiles {
            if let problem = TLSSettings.problem(withCAFile: declaration.resolve(path)) {
                throw reader.fail(reader.itemNodes[path], "tls.ca-file '\(path)': \(problem)")
            }
        }
        let tls = declaration.tls
        if let certificate = tls.clientCertificate, let key = tls.clientKey,
            let problem = TLSSettings.problem(withClientCertificate: declaration.resolve(certificate), key: declaration.resolve(key))
        {
            throw reader.fail(reader.itemNodes["tls.client-cert"], "tls.client-cert: \(problem)")
        }
        return declaration
    }

    /// Whether a header of this name carries a credential when it is given (`Authorization`, `Cookie`, `X-Api-Key`,
    /// `Private-Token`, `X-Client-Secret`, …): its value is a secret even when the declaration writes it out, and the
    /// parser warns that it should come from the environment.
    public static func credentialLike(_ name: String) -> Bool {
        let name = name.lowercased()
        if RequestQualifiers.credentialHeaders.contains(name) { return true }
        if ["-key", "_key", "-token", "_token", "-secret", "_secret"].contains(where: { name.hasSuffix($0) }) { return true }
        return ["token", "secret", "password", "passwd", "api-key", "apikey", "credential", "signature"].contains { name.contains($0) }
    }

    /// Yams's message, reduced to `file:line:column: problem`.
    static func syntaxError(_ error: YamlError, file: String, text: String) -> PackagerError {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
            return PackagerError(.invalidInput, "\(file):\(mark.line):\(mark.column): invalid YAML: \(detail)", cause: error)
        case .duplicatedKeysInMapping(let duplicates, let context):
            // Yams marks the first time the (alphabetically) first of them is given; the line to fix is the next one.
            let first = context.mark
            if let key = duplicates.sorted().first, let again = repeatedKeyLine(in: text, key: key, firstLine: first.line, column: first.column) {
                let others = duplicates.sorted().dropFirst().map { "'\($0)'" }
                let alsoRepeated = others.isEmpty ? "" : " (\(others.joined(separator: ", ")) too)"
                return PackagerError(
                    .invalidInput,
                    "\(file):\(again):\(first.column): '\(key)' is given again\(alsoRepeated): line \(first.line) gives it already, in the same mapping; "
                        + "give each key once",
                    cause: error)
            }
            let keys = duplicates.sorted().map { "'\($0)'" }.joined(separator: ", ")
            return PackagerError(
                .invalidInput, "\(file):\(first.line):\(first.column): \(keys) given more than once in the mapping this key belongs to",
                cause: error)
        default:
            return PackagerError(.invalidInput, "\(file): invalid YAML: \(error)", cause: error)
        }
    }
}

extension DeclarationParser {
    /// The line (1-based) where a block mapping's `key`, first given at `firstLine`:`column`, is given again: the next
    /// line of the same mapping (indented to `column`) that starts with the key, plain or quoted, and a colon. Nil when
    /// there is none before the mapping ends (a flow mapping, `{a: 1, a: 2}`, is on one line).
    static func repeatedKeyLine(in text: String, key: String, firstLine: Int, column: Int) -> Int? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard firstLine >= 1, column >= 1, firstLine <= lines.count else { return nil }
        // A key inside a flow mapping (`{x: 1, x: 2}`) is not at the start of its line: its mapping's keys are not found
        // by column.
        let before = lines[firstLine - 1].prefix(column - 1)
        guard before.allSatisfy({ $0 == " " || $0 == "-" }) else { return nil }
        let spellings = [key, "\"\(key)\"", "'\(key)'"]
        for number in (firstLine + 1)..<(lines.count + 1) {
            let line = Substring(lines[number - 1])
            let indent = line.prefix { $0 == " " }.count
            let rest = line.dropFirst(indent)
            if rest.isEmpty || rest.hasPrefix("#") { continue }
            // Less indented: the mapping has ended.
            if indent < column - 1 { return nil }
            guard indent == column - 1 else { continue }
            for spelling in spellings where rest.hasPrefix(spelling) {
                if rest.dropFirst(spelling.count).drop(while: { $0 == " " }).hasPrefix(":") { return number }
            }
        }
        return nil
    }
}

/// Walks the YAML nodes, checking each key and value.
extension DeclarationParser {
    static let sizeUnits: [(suffix: String, factor: Double)] = [
        ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824), ("tib", 1_099_511_627_776), ("kb", 1e3), ("mb", 1e6), ("gb", 1e9),
        ("tb", 1e12), ("k", 1024), ("m", 1_048_576), ("g", 1_073_741_824), ("t", 1_099_511_627_776), ("b", 1),
    ]

    /// A size as a declaration writes it (`500MB`, `2GiB`, `64M`, `4096`: KB, MB, GB and TB are decimal; KiB, K, M,
    /// G and T binary), in bytes; nil for anything else, or less than one byte. Command-line options take the same.
    public static func byteSize(_ text: String) -> Int64? {
        guard let bytes = quantity(text, units: sizeUnits), bytes >= 1, bytes < 9e18 else { return nil }
        return Int64(bytes)
    }

    /// A number, scaled by the first unit suffix it ends with (units are lowercase; longer suffixes first).
    static func quantity(_ raw: String, units: [(suffix: String, factor: Double)]) -> Double? {
        let text = raw.trimmingCharacters(in: .whitespaces).lowercased()
        if let plain = Double(text) { return plain.isFinite ? plain : nil }
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            guard let value = Double(text.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)) else { continue }
            let scaled = value * factor
            return scaled.isFinite ? scaled : nil
        }
        return nil
    }
}

/// What a reading found worth saying without failing it.
final class DeclarationNotes {
    var warnings: [String] = []
}

/// Reads one declaration's YAML nodes (its requests: DeclarationParser+Requests.swift).
struct DeclarationReader {
    let file: String
    let environment: [String: String]
    /// The declaration's folder: a request's `body-file` is read from it.
    let baseDirectory: String
    /// Where each `tls.ca-file` item was written, for errors found once the folder is known.
    var itemNodes: [String: Node] = [:]
    /// Warnings, gathered by the functions that read each part.
    let notes = DeclarationNotes()

    /// `file:line:column` of `node`, as messages start.
    func location(of node: Node) -> String? { node.mark.map { "\(file):\($0.line):\($0.column)" } }

    func fail(_ node: Node?, _ message: String) -> PackagerError {
        if let at = node.flatMap(location(of:)) { return PackagerError(.invalidInput, "\(at): \(message)") }
        return PackagerError(.invalidInput, "\(file): \(message)")
    }

    static let topKeys = [
        "output", "seeds", "urls", "sitemaps", "scope", "robots", "user-agent", "headers", "concurrency", "timeouts", "retries",
        "substitutions", "block", "drop-query-parameters", "ignore-query", "content-encoding", "max-errors", "tls", "browser", "requests",
        "match",
    ]

    mutating func declaration(_ root: Node) throws -> Declaration {
        var d = Declaration()
        for (keyNode, value) in try mapping(root, in: "the declaration", keys: Self.topKeys) {
            switch keyNode.string ?? "" {
            case "output": d.output = try string(value, "output")
            case "seeds": d.seeds = try urlList(value, "seeds")
            case "urls": d.urls = try urlList(value, "urls")
            case "sitemaps": d.sitemaps = try urlList(value, "sitemaps")
            case "scope": d.scope = try scope(value)
            case "robots": d.respectRobots = try bool(value, "robots")
            case "user-agent": d.userAgent = try string(value, "user-agent")
            case "headers": d.headers = try headers(value)
            case "concurrency": d.concurrency = try concurrency(value)
            case "timeouts": d.timeouts = try timeouts(value)
            case "retries": d.retries = try retries(value)
            case "substitutions": d.substitutions = try substitutions(value)
            case "block": d.block = try stringList(value, "block")
            case "drop-query-parameters": d.dropQueryParameters = try stringList(value, "drop-query-parameters")
            case "ignore-query":
                switch value.scalar?.string {
                case "auto": d.ignoreQuery = .auto
                case "none": d.ignoreQuery = .none
                default: d.ignoreQuery = .patterns(try stringList(value, "ignore-query ('auto', 'none', or URL patterns)"))
                }
            case "content-encoding":
                let text = try string(value, "content-encoding")
                guard let policy = Declaration.ContentEncodingPolicy(rawValue: text) else {
                    throw fail(value, "content-encoding must be 'decoded' or 'encoded', not '\(text)'")
                }
                d.contentEncoding = policy
            case "max-errors": d.maxErrors = try integer(value, "max-errors", minimum: 0)
            case "tls": d.tls = try tls(value)
            case "browser": d.browser = try browser(value)
            case "requests":
                guard case .sequence(let items) = value else { throw fail(value, "requests must be a list of requests") }
                d.requests = try items.map(request)
            case "match":
                for item in try items(
                    value, "match", expected: "rules ({url: PATTERN, json-body: canonical, ignore: [POINTER]}, graphql, form-body or ignore-params)")
                {
                    d.match.append(try bodyMatch(item, url: nil))
                }
            default: break
            }
        }
        if d.seeds.isEmpty && d.urls.isEmpty && d.sitemaps.isEmpty && d.requests.isEmpty {
            throw fail(root, "nothing to fetch: give at least one of 'seeds', 'urls', 'sitemaps' or 'requests'")
        }
        let rules = d.bundleRules
        try checkDistinct(d.requests, rules: rules)
        warnUnreadBodies(d.requests, rules: rules)
        return d
    }

    func scope(_ node: Node) throws -> Declaration.Scope {
        var s = Declaration.Scope()
        let keys = ["hosts", "include", "exclude", "max-depth", "max-resources", "max-bytes", "max-body", "requisites-from-any-host", "no-parent"]
        for (key, value) in try mapping(node, in: "scope", keys: keys) {
            switch key.string ?? "" {
            case "hosts": s.hosts = try hosts(value)
            case "include": s.include = try stringList(value, "scope.include")
            case "exclude": s.exclude = try stringList(value, "scope.exclude")
            case "max-depth": s.maxDepth = try integer(value, "scope.max-depth", minimum: 0)
            case "max-resources": s.maxResources = try integer(value, "scope.max-resources", minimum: 1)
            case "max-bytes": s.maxBytes = try size(value, "scope.max-bytes")
            case "max-body": s.maxBody = try size(value, "scope.max-body")
            case "requisites-from-any-host": s.requisitesFromAnyHost = try bool(value, "scope.requisites-from-any-host")
            case "no-parent": s.noParent = try bool(value, "scope.no-parent")
            default: break
            }
        }
        return s
    }

    /// Origin patterns: `https://host[:port]`, `host`, `host:port` or `*.example.com`, lowercased.
    func hosts(_ node: Node) throws -> [String] {
        try originPatterns(node, "scope.hosts").map { $0.lowercased() }
    }

    /// `Name: value`, or `Name: {value: …, origins: [https://host, *.example.com]}` to say where it goes.
    func headers(_ node: Node) throws -> [Declaration.Header] {
        guard case .mapping(let map) = node else { throw fail(node, "headers must be a mapping of header names to values") }
        var result: [Declaration.Header] = []
        for (key, value) in map {
            let name = try string(key, "a header name")
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                throw fail(key, "'\(name)' is not a valid header name")
            }
            if result.contains(where: { $0.name.lowercased() == name.lowercased() }) { throw fail(key, "header '\(name)' is given twice") }
            var valueNode = value
            var origins: [String] = []
            if case .mapping = value {
                var given: Node?
                for (field, content) in try mapping(value, in: "header '\(name)'", keys: ["value", "origins"]) {
                    if field.string == "value" { given = content }
                    if field.string == "origins" { origins = try originPatterns(content, "header '\(name)' origins") }
                }
                guard let given else { throw fail(value, "header '\(name)' needs a 'value'") }
                valueNode = given
            }
            let (expanded, parts) = try expand(try string(valueNode, "header '\(name)'"), at: valueNode)
            guard !expanded.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw fail(valueNode, "the value of header '\(name)' contains a line break")
            }
            // A credential written out is in every copy of the file: still never stored, but said.
            let literalCredential = parts.isEmpty && !expanded.isEmpty && DeclarationParser.credentialLike(name)
            if literalCredential {
                let at = location(of: valueNode) ?? file
                notes.warnings.append(
                    "\(at): header '\(name)' is a credential written into the declaration: write it as ${NAME} and set NAME in the environment "
                        + "(its value is kept out of the bundle all the same)")
            }
            result.append(.init(name: name, value: expanded, secret: !parts.isEmpty || literalCredential, secretParts: parts, origins: origins))
        }
        return result
    }

    /// The items of a value that may be written as one scalar or as a list; `expected` names them for the error.
    func items(_ node: Node, _ what: String, expected: String) throws -> [Node] {
        switch node {
        case .sequence(let list): return Array(list)
        case .scalar: return [node]
        default: throw fail(node, "\(what) must be a list of \(expected)")
        }
    }

    /// Origin patterns (`https://host[:port]`, `host`, `host:port`, `*.example.com`), checked.
    func originPatterns(_ node: Node, _ what: String) throws -> [String] {
        let items = try items(node, what, expected: "origins or host names")
        guard !items.isEmpty else { throw fail(node, "\(what) is empty; leave it out to mean the declaration's own origins") }
        return try items.map { item in
            let text = try string(item, "each item of \(what)")
            if case .failure(let error) = OriginPattern.parse(text) {
                throw fail(item, "\(what) item '\(text)' is not an origin or host name: \(error.reason)")
            }
            return text
        }
    }

    /// Replaces `${NAME}` from the environment, and returns the values put in. In a header, `$$` is a literal dollar sign
    /// and any other `$` an error; in a request body (`inBody`), `$${` is a literal `${` and any other `$` is itself
    /// (bodies hold `$` often: GraphQL variables, prices).
    func expand(_ text: String, at node: Node, inBody: Bool = false) throws -> (String, parts: [String]) {
        guard text.contains(inBody ? "${" : "$") else { return (text, []) }
        let literal = inBody ? "${" : "$"
        var output = ""
        var parts: [String] = []
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            output += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            if after.hasPrefix(literal) {
                output += literal
                rest = after.dropFirst(literal.count)
            } else if after.hasPrefix("{"), let close = after.firstIndex(of: "}") {
                let value = try variable(after, closedAt: close, at: node, inBody: inBody)
                output += value
                parts.append(value)
                rest = after[after.index(after: close)...]
            } else if inBody && !after.hasPrefix("{") {
                output += "$"
                rest = after
            } else {
                throw fail(
                    node, inBody ? "'${' in the body is not closed by '}' (write $${ for a literal ${)" : "a '$' must start '${NAME}' or be doubled as '$$'")
            }
        }
        output += rest
        return (output, parts)
    }

    /// The environment's value for the `{NAME}` that `after` begins with (its `}` at `close`), in a header or a body.
    private func variable(_ after: Substring, closedAt close: Substring.Index, at node: Node, inBody: Bool) throws -> String {
        let name = String(after[after.index(after: after.startIndex)..<close])
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            throw fail(
                node,
                inBody
                    ? "'${\(name)}' in the body is not a valid environment variable reference (write $${ for a literal ${)"
                    : "'${\(name)}' is not a valid environment variable reference")
        }
        guard let value = environment[name] else {
            throw fail(node, "environment variable \(name) is not set (it is used in \(inBody ? "a request body" : "a header"))")
        }
        return value
    }

    /// `tls: {ca-file: PATH or [PATHS], insecure: false, client-cert: PATH, client-key: PATH, client-cert-origins: […]}`;
    /// each CA file must hold at least one PEM certificate; a client certificate comes with its key.
    mutating func tls(_ node: Node) throws -> Declaration.TLS {
        var t = Declaration.TLS()
        let keys = ["ca-file", "insecure", "client-cert", "client-key", "client-cert-origins"]
        for (key, value) in try mapping(node, in: "tls", keys: keys) {
            switch key.string ?? "" {
            case "ca-file":
                for item in try items(value, "tls.ca-file", expected: "PEM files") {
                    let path = try string(item, "each item of tls.ca-file")
                    t.caFiles.append(path)
                    itemNodes[path] = item
                }
            case "insecure": t.insecure = try bool(value, "tls.insecure")
            case "client-cert":
                t.clientCertificate = try string(value, "tls.client-cert")
                itemNodes["tls.client-cert"] = value
            case "client-key": t.clientKey = try string(value, "tls.client-key")
            case "client-cert-origins": t.clientCertificateOrigins = try originPatterns(value, "tls.client-cert-origins")
            default: break
            }
        }
        guard (t.clientCertificate == nil) == (t.clientKey == nil) else {
            throw fail(node, "tls.client-cert and tls.client-key go together: a certificate is presented with its private key")
        }
        if t.clientCertificate == nil && !t.clientCertificateOrigins.isEmpty {
            throw fail(node, "tls.client-cert-origins needs tls.client-cert and tls.client-key")
        }
        return t
    }

    func browser(_ node: Node) throws -> Declaration.Browser {
        var b = Declaration.Browser()
        if case .scalar = node {
            b.enabled = try bool(node, "browser")
            return b
        }
        for (key, value) in try mapping(node, in: "browser", keys: ["enabled", "tabs", "page-timeout", "pages", "generic-behaviors", "behaviors"]) {
            switch key.string ?? "" {
            case "enabled": b.enabled = try bool(value, "browser.enabled")
            case "tabs": b.tabs = try integer(value, "browser.tabs", minimum: 1)
            case "page-timeout":
                let seconds = try integer(value, "browser.page-timeout", minimum: 1)
                b.pageTimeout = Double(seconds)
            case "pages":
                let text = try string(value, "browser.pages")
                guard text == "all" || text == "by-scripts" else { throw fail(value, "browser.pages must be 'all' or 'by-scripts', not '\(text)'") }
                b.everyPage = text == "all"
            case "generic-behaviors": b.genericBehaviors = try bool(value, "browser.generic-behaviors")
            case "behaviors":
                guard case .sequence(let items) = value else { throw fail(value, "browser.behaviors must be a list of steps") }
                b.behaviors = try items.map(behavior)
            default: break
            }
        }
        return b
    }

    /// One item of `browser.behaviors`: one action (`click`, `type` with `text`, `wait`, `script`), and `pages`.
    func behavior(_ node: Node) throws -> Declaration.Behavior {
        let place = "an item of browser.behaviors"
        let pairs = try mapping(node, in: place, keys: ["pages", "click", "type", "text", "wait", "script"])
        var values: [String: Node] = [:]
        for (key, value) in pairs { values[key.string ?? ""] = value }
        let actions = ["click", "type", "wait", "script"].filter { values[$0] != nil }
        guard actions.count == 1 else {
            throw fail(node, "\(place) takes one action, click, type, wait or script, not \(actions.isEmpty ? "none" : actions.joined(separator: " and "))")
        }
        if values["text"] != nil && actions[0] != "type" { throw fail(values["text"], "text goes with type: the text typed into its elements") }
        let pages = try values["pages"].map { try string($0, "browser.behaviors pages") }
        let action: Declaration.Behavior.Action
        switch actions[0] {
        case "click": action = .click(selector: try selector(values["click"]!, "click"))
        case "type":
            guard let text = values["text"] else { throw fail(node, "type needs text: what is typed into the elements it selects") }
            action = .type(selector: try selector(values["type"]!, "type"), text: try string(text, "browser.behaviors text"))
        case "wait":
            let milliseconds = try integer(values["wait"]!, "browser.behaviors wait (milliseconds)", minimum: 0)
            guard milliseconds <= 10_000 else { throw fail(values["wait"], "browser.behaviors wait is at most 10000 milliseconds") }
            action = .wait(milliseconds: milliseconds)
        default:
            let script = try string(values["script"]!, "browser.behaviors script")
            guard !script.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw fail(values["script"], "browser.behaviors script is empty") }
            action = .script(script)
        }
        return Declaration.Behavior(pages: pages, action: action)
    }

    /// A CSS selector: not empty. (Whether it parses is the browser's to say; one that does not selects nothing.)
    func selector(_ node: Node, _ what: String) throws -> String {
        let text = try string(node, "browser.behaviors \(what)")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw fail(node, "browser.behaviors \(what) needs a CSS selector") }
        return text
    }

    func concurrency(_ node: Node) throws -> Declaration.Concurrency {
        var c = Declaration.Concurrency()
        if case .scalar = node {
            c.total = try integer(node, "concurrency", minimum: 1, maximum: Declaration.maxConcurrency)
            c.perHost = c.total
            return c
        }
        var perHostGiven = false
        for (key, value) in try mapping(node, in: "concurrency", keys: ["total", "per-host"]) {
            if key.string == "total" { c.total = try integer(value, "concurrency.total", minimum: 1, maximum: Declaration.maxConcurrency) }
            if key.string == "per-host" {
                c.perHost = try integer(value, "concurrency.per-host", minimum: 1, maximum: Declaration.maxConcurrency)
                perHostGiven = true
            }
        }
        if !perHostGiven { c.perHost = c.total }
        return c
    }

    func timeouts(_ node: Node) throws -> Declaration.Timeouts {
        var t = Declaration.Timeouts()
        for (key, value) in try mapping(node, in: "timeouts", keys: ["connect", "request"]) {
            if key.string == "connect" { t.connect = try duration(value, "timeouts.connect", positive: true) }
            if key.string == "request" { t.request = try duration(value, "timeouts.request", positive: true) }
        }
        return t
    }

    func retries(_ node: Node) throws -> Declaration.Retries {
        var r = Declaration.Retries()
        if case .scalar = node {
            r.attempts = try integer(node, "retries", minimum: 0)
            return r
        }
        for (key, value) in try mapping(node, in: "retries", keys: ["attempts", "backoff", "max-backoff"]) {
            switch key.string ?? "" {
            case "attempts": r.attempts = try integer(value, "retries.attempts", minimum: 0)
            case "backoff": r.backoff = try duration(value, "retries.backoff")
            case "max-backoff": r.maxBackoff = try duration(value, "retries.max-backoff")
            default: break
            }
        }
        return r
    }

    func substitutions(_ node: Node) throws -> [Declaration.Substitution] {
        // The key with every item commented out (as the starter has it): none.
        if case .scalar(let scalar) = node, ["", "~", "null"].contains(scalar.string) { return [] }
        guard case .sequence(let items) = node else {
            throw fail(node, "substitutions must be a list of {url, file} or {prefix, folder} mappings")
        }
        var result: [Declaration.Substitution] = []
        for item in items {
            var fields: [String: (String, Node)] = [:]
            for (key, value) in try mapping(item, in: "a substitution", keys: ["url", "file", "prefix", "folder"]) {
                fields[key.string ?? ""] = (try string(value, "substitution \(key.string ?? "")"), value)
            }
            let line = item.mark?.line
            switch (fields["url"], fields["file"], fields["prefix"], fields["folder"]) {
            case (let url?, let file?, nil, nil):
                try checkURL(url.0, at: url.1, "substitution url")
                result.append(.init(.url(url.0, file: file.0), line: line, location: location(of: file.1)))
            case (nil, nil, let prefix?, let folder?):
                try checkURL(prefix.0, at: prefix.1, "substitution prefix")
                result.append(.init(.prefix(prefix.0, folder: folder.0), line: line, location: location(of: folder.1)))
            default:
                throw fail(item, "a substitution needs either 'url' and 'file', or 'prefix' and 'folder'")
            }
        }
        return result
    }

    // MARK: - Shapes

}
