import Foundation

/// The declaration's rules that travel in a bundle (format versions 2 and 3), so the runtime can apply them to URLs the
/// build never met.
///
/// - ``dropQueryParameters``: query parameter name patterns removed from every request key (`utm_*`).
/// - ``block``: URL patterns answered with an empty response and never fetched (`*` matches any run of bytes,
///   compared with the canonical key, both ASCII-lowercased).
/// - ``substitutions``: canonical keys that a local file answers.
/// - ``substitutionPrefixes``: canonical URL prefixes that a local folder answers: a URL under one is answered
///   from the bundle or not at all.
/// - ``ignoreQuery``: URL patterns (as `block`'s) where the origin ignores the query for stored files, as static
///   servers do: a GET for `/search.html?q=x` that no entry answers is answered by `/search.html`, unless the bundle
///   records entries for that path with a query that answer otherwise (then the query matters there).
/// - ``match``: how requests are matched for URL patterns. `PATTERN json-body [POINTER…]`, `PATTERN graphql
///   [POINTER…]` and `PATTERN form-body [NAME…]`: the key's body digest is taken over the body's canonical form, so a
///   document sent with its members in another order, or other whitespace, finds the recorded answer.
///   `PATTERN ignore-params NAME…`: the query parameters named (`*` as in `drop-query`) are left out of the keys of
///   URLs whose query-less key matches, as cache-busting parameters (`_`, `t`) should be (docs/FORMAT.md §4.6, §5.5).
public struct BundleRules: Sendable, Equatable, Codable {
    public var dropQueryParameters: [String]
    public var block: [String]
    public var substitutions: [String]
    public var substitutionPrefixes: [String]
    public var ignoreQuery: [String]
    public var match: [String]

    /// Creates a rule set.
    public init(
        dropQueryParameters: [String] = [], block: [String] = [], substitutions: [String] = [], substitutionPrefixes: [String] = [],
        ignoreQuery: [String] = [], match: [String] = []
    ) {
        self.dropQueryParameters = dropQueryParameters
        self.block = block
        self.substitutions = substitutions
        self.substitutionPrefixes = substitutionPrefixes
        self.ignoreQuery = ignoreQuery
        self.match = match
    }

    private enum CodingKeys: String, CodingKey { case dropQueryParameters, block, substitutions, substitutionPrefixes, ignoreQuery, match }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(dropQueryParameters, forKey: .dropQueryParameters)
        try container.encode(block, forKey: .block)
        try container.encode(substitutions, forKey: .substitutions)
        try container.encode(substitutionPrefixes, forKey: .substitutionPrefixes)
        try container.encode(ignoreQuery, forKey: .ignoreQuery)
        // Only when there are some: rules without it encode as they did before it existed.
        if !match.isEmpty { try container.encode(match, forKey: .match) }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        dropQueryParameters = try container.decode([String].self, forKey: .dropQueryParameters)
        block = try container.decode([String].self, forKey: .block)
        substitutions = try container.decode([String].self, forKey: .substitutions)
        substitutionPrefixes = try container.decode([String].self, forKey: .substitutionPrefixes)
        // Written only when there are some (docs/FORMAT.md §6): bundles without it read as before.
        ignoreQuery = try container.decodeIfPresent([String].self, forKey: .ignoreQuery) ?? []
        match = try container.decodeIfPresent([String].self, forKey: .match) ?? []
    }

    /// A `match` rule read: the URL pattern (as `block`'s), the body form, and what the form leaves out: JSON pointers
    /// as their tokens for `json-body`, parameter names for `form-body`.
    package struct BodyMatch: Sendable, Equatable {
        package enum Form: String, Sendable {
            case json = "json-body"
            case graphql = "graphql"
            case form = "form-body"
        }
        package let pattern: [UInt8]
        package let form: Form
        package let ignoring: [[String]]
        /// `ignoring` as bytes, made once: each pointer's tokens (a form rule's names as one-token pointers).
        let ignoredBytes: [[[UInt8]]]

        package init(pattern: [UInt8], form: Form, ignoring: [[String]]) {
            self.pattern = pattern
            self.form = form
            self.ignoring = ignoring
            ignoredBytes = ignoring.map { $0.map { Array($0.utf8) } }
        }

        package static func == (a: BodyMatch, b: BodyMatch) -> Bool { a.pattern == b.pattern && a.form == b.form && a.ignoring == b.ignoring }

        /// The canonical form of `body` under this rule; nil when the body is not of the rule's form (it is then
        /// matched by its bytes).
        package func canonical(_ body: [UInt8]) -> [UInt8]? {
            switch form {
            case .json: CanonicalJSON.canonical(body, ignoringTokens: ignoredBytes)
            case .graphql: CanonicalGraphQL.canonical(body, ignoringTokens: ignoredBytes)
            case .form: CanonicalForm.canonical(body, ignoring: Set(ignoredBytes.map { $0[0] }))
            }
        }
    }

    /// Reads a body `match` value: `PATTERN json-body [POINTER…]`, `PATTERN graphql [POINTER…]` or `PATTERN form-body
    /// [NAME…]`, pointers and names with `%20` for a space and `%25` for `%`. Nil when it is not one (another form, a
    /// pointer that is not one).
    package static func bodyMatch(_ value: String) -> BodyMatch? {
        let words = value.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count >= 2, !words[0].isEmpty, let form = BodyMatch.Form(rawValue: String(words[1])) else { return nil }
        var ignoring: [[String]] = []
        for word in words.dropFirst(2) {
            let text = word.replacingOccurrences(of: "%20", with: " ").replacingOccurrences(of: "%25", with: "%")
            guard !word.isEmpty else { return nil }
            switch form {
            case .json, .graphql:
                guard let tokens = CanonicalJSON.tokens(ofPointer: text) else { return nil }
                ignoring.append(tokens)
            case .form:
                ignoring.append([text])
            }
        }
        return BodyMatch(pattern: Array(words[0].lowercased().utf8), form: form, ignoring: ignoring)
    }

    /// A `match PATTERN ignore-params NAME…` rule read: the URL pattern (matched with the query-less canonical key) and
    /// the parameter name patterns, lowercased.
    package struct ParameterMatch: Sendable, Equatable {
        package var pattern: [UInt8]
        package var names: [[UInt8]]
    }

    /// Reads an `ignore-params` `match` value; nil when it is not one (or names no parameter).
    package static func parameterMatch(_ value: String) -> ParameterMatch? {
        let words = value.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count >= 3, !words[0].isEmpty, words[1] == "ignore-params", !words.dropFirst(2).contains(where: \.isEmpty) else { return nil }
        let names = words.dropFirst(2).map { Array($0.replacingOccurrences(of: "%20", with: " ").replacingOccurrences(of: "%25", with: "%").lowercased().utf8) }
        return ParameterMatch(pattern: Array(words[0].lowercased().utf8), names: names)
    }

    /// The `match` value that leaves the query parameters `names` out of the keys under `pattern`.
    package static func ignoreParamsRule(pattern: String, names: [String]) -> String {
        ([pattern, "ignore-params"] + names.map { $0.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: " ", with: "%20") })
            .joined(separator: " ")
    }

    /// Whether `value` is a `match` rule a reader applies (docs/FORMAT.md §4.6): `PATTERN json-body [POINTER…]`,
    /// `PATTERN graphql [POINTER…]`, `PATTERN form-body [NAME…]` or `PATTERN ignore-params NAME…`.
    public static func isMatchRule(_ value: String) -> Bool { bodyMatch(value) != nil || parameterMatch(value) != nil }

    /// The `ignore-params` rules, read.
    package var parameterMatches: [ParameterMatch] { match.compactMap(Self.parameterMatch) }

    /// The `match` value for `pattern`'s form bodies (`application/x-www-form-urlencoded`), leaving out the parameters
    /// named `ignoring`.
    package static func formBodyRule(pattern: String, ignoring: [String]) -> String {
        bodyRule(pattern: pattern, form: .form, ignoring: ignoring)
    }

    /// The `match` value for `pattern`'s JSON bodies (or GraphQL request bodies, with `form` `.graphql`), leaving out
    /// `ignoring` (JSON pointers).
    package static func jsonBodyRule(pattern: String, form: BodyMatch.Form = .json, ignoring: [String]) -> String {
        bodyRule(pattern: pattern, form: form, ignoring: ignoring)
    }

    /// `PATTERN FORM WORD…`, each word with `%` as `%25` and a space as `%20`.
    private static func bodyRule(pattern: String, form: BodyMatch.Form, ignoring: [String]) -> String {
        ([pattern, form.rawValue] + ignoring.map { $0.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: " ", with: "%20") })
            .joined(separator: " ")
    }

    /// The body a request to `canonicalKey` (its URL, canonical) is matched by: its canonical JSON form where a
    /// `match` rule covers the URL and the body is one JSON document, else the body as sent.
    package func bodyForMatching(canonicalKey: String, body: Data?) -> Data? {
        guard !match.isEmpty else { return body }
        return Self.bodyForMatching(match.compactMap(Self.bodyMatch), canonicalKey: canonicalKey, body: body)
    }

    /// ``bodyForMatching(canonicalKey:body:)`` with the `match` rules read already (a reader reads them once, at mount).
    package static func bodyForMatching(_ rules: [BodyMatch], canonicalKey: String, body: Data?) -> Data? {
        guard !rules.isEmpty, let body, !body.isEmpty else { return body }
        guard let rule = bodyRule(rules, canonicalKey: canonicalKey) else { return body }
        return rule.canonical(Array(body)).map { Data($0) } ?? body
    }

    /// The first of `rules` whose pattern covers `canonicalKey`.
    package static func bodyRule(_ rules: [BodyMatch], canonicalKey: String) -> BodyMatch? {
        guard !rules.isEmpty else { return nil }
        let key = Array(canonicalKey.lowercased().utf8)
        return rules.first { globMatch($0.pattern[...], key[...]) }
    }

    /// The key's `b=` digest for a request to `canonicalKey` with `body` (§5.4, over the canonical form §5.5 where a
    /// `match` rule says so); nil for no body.
    package func bodyDigest(canonicalKey: String, body: Data?) -> String? {
        RequestQualifiers.bodyDigest(of: bodyForMatching(canonicalKey: canonicalKey, body: body))
    }

    /// The ignore-query pattern the query-less canonical key `canonicalKey` matches, or nil.
    public func ignoreQueryPattern(matching canonicalKey: String) -> String? {
        guard !ignoreQuery.isEmpty else { return nil }
        let key = Array(canonicalKey.lowercased().utf8)
        return ignoreQuery.first { globMatch(Array($0.lowercased().utf8)[...], key[...]) }
    }

    /// The block pattern that matches `canonicalKey`, or nil.
    public func blockPattern(matching canonicalKey: String) -> String? {
        guard !block.isEmpty else { return nil }
        let key = Array(canonicalKey.lowercased().utf8)
        return block.first { globMatch(Array($0.lowercased().utf8)[...], key[...]) }
    }

    /// The substitution prefix `canonicalKey` lies under, or nil.
    public func substitutionPrefix(containing canonicalKey: String) -> String? {
        substitutionPrefixes.first { canonicalKey.hasPrefix($0) }
    }

    // MARK: The encoding in index.bin (docs/FORMAT.md §4.6)

    /// Rule names, in the order a writer emits them.
    static let names = ["drop-query", "block", "substitute", "substitute-prefix", "ignore-query", "match"]

    private var lists: [[String]] { [dropQueryParameters, block, substitutions, substitutionPrefixes, ignoreQuery, match] }

    /// One line per rule, `name SP value LF`, grouped by name in the order of ``names``, each group in declared order.
    package func encoded() throws -> [UInt8] {
        var out = [UInt8]()
        for (name, values) in zip(Self.names, lists) {
            for value in values {
                guard !value.isEmpty, !value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) else {
                    throw BundleError(.invalidArgument, "a \(name) rule is empty or has a line break in it: \(value.debugDescription)")
                }
                out.append(contentsOf: name.utf8)
                out.append(UInt8(ascii: " "))
                out.append(contentsOf: value.utf8)
                out.append(0x0A)
            }
        }
        return out
    }

    /// Parses the rules text; an unknown rule name or a malformed line is an error.
    package init(decoding bytes: some Collection<UInt8>) throws {
        self.init()
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            if line.isEmpty { continue }
            guard let space = line.firstIndex(of: UInt8(ascii: " ")) else {
                throw BundleError(.corruptIndex, "index.bin: a rule line has no value")
            }
            let name = String(decoding: line[line.startIndex..<space], as: UTF8.self)
            let value = String(decoding: line[line.index(after: space)...], as: UTF8.self)
            guard !value.isEmpty else { throw BundleError(.corruptIndex, "index.bin: the \(name) rule is empty") }
            switch name {
            case "drop-query": dropQueryParameters.append(value)
            case "block": block.append(value)
            case "substitute": substitutions.append(value)
            case "substitute-prefix": substitutionPrefixes.append(value)
            case "ignore-query": ignoreQuery.append(value)
            case "match":
                // A form this reader does not know would match bodies otherwise than the writer did: refused.
                guard Self.bodyMatch(value) != nil || Self.parameterMatch(value) != nil else {
                    throw BundleError(.unsupported, "index.bin: a match rule this reader cannot apply: \(value.prefix(80).debugDescription)")
                }
                match.append(value)
            default: throw BundleError(.unsupported, "index.bin: unknown rule \(name.prefix(40).debugDescription)")
            }
        }
    }
}
