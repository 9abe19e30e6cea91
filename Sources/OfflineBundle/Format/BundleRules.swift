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
///   records any entry for that path with a query (then the query matters there).
public struct BundleRules: Sendable, Equatable, Codable {
    public var dropQueryParameters: [String]
    public var block: [String]
    public var substitutions: [String]
    public var substitutionPrefixes: [String]
    public var ignoreQuery: [String]

    /// Creates a rule set.
    public init(
        dropQueryParameters: [String] = [], block: [String] = [], substitutions: [String] = [], substitutionPrefixes: [String] = [],
        ignoreQuery: [String] = []
    ) {
        self.dropQueryParameters = dropQueryParameters
        self.block = block
        self.substitutions = substitutions
        self.substitutionPrefixes = substitutionPrefixes
        self.ignoreQuery = ignoreQuery
    }

    private enum CodingKeys: String, CodingKey { case dropQueryParameters, block, substitutions, substitutionPrefixes, ignoreQuery }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        dropQueryParameters = try container.decode([String].self, forKey: .dropQueryParameters)
        block = try container.decode([String].self, forKey: .block)
        substitutions = try container.decode([String].self, forKey: .substitutions)
        substitutionPrefixes = try container.decode([String].self, forKey: .substitutionPrefixes)
        // Written only when there are some (docs/FORMAT.md §6): bundles without it read as before.
        ignoreQuery = try container.decodeIfPresent([String].self, forKey: .ignoreQuery) ?? []
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
    static let names = ["drop-query", "block", "substitute", "substitute-prefix", "ignore-query"]

    private var lists: [[String]] { [dropQueryParameters, block, substitutions, substitutionPrefixes, ignoreQuery] }

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
            default: throw BundleError(.unsupported, "index.bin: unknown rule \(name.prefix(40).debugDescription)")
            }
        }
    }
}
