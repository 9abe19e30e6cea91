/// The declaration's rules that travel in a bundle (format version 2), so the runtime can apply them to URLs the
/// build never met.
///
/// - ``dropQueryParameters``: query parameter name patterns removed from every request key (`utm_*`).
/// - ``block``: URL patterns answered with an empty response and never fetched (`*` matches any run of bytes,
///   compared with the canonical key, both ASCII-lowercased).
/// - ``substitutions``: canonical keys that a local file answers.
/// - ``substitutionPrefixes``: canonical URL prefixes that a local folder answers: a URL under one is answered
///   from the bundle or not at all.
public struct BundleRules: Sendable, Equatable, Codable {
    public var dropQueryParameters: [String]
    public var block: [String]
    public var substitutions: [String]
    public var substitutionPrefixes: [String]

    /// Creates a rule set.
    public init(dropQueryParameters: [String] = [], block: [String] = [], substitutions: [String] = [], substitutionPrefixes: [String] = []) {
        self.dropQueryParameters = dropQueryParameters
        self.block = block
        self.substitutions = substitutions
        self.substitutionPrefixes = substitutionPrefixes
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
    static let names = ["drop-query", "block", "substitute", "substitute-prefix"]

    private var lists: [[String]] { [dropQueryParameters, block, substitutions, substitutionPrefixes] }

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
            default: throw BundleError(.unsupported, "index.bin: unknown rule \(name.prefix(40).debugDescription)")
            }
        }
    }
}
