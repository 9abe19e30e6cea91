import Foundation
import Yams

/// Rules a service adds to a loader at runtime: URLs to block, URLs to answer from local content, and policies for
/// hosts or URL patterns. They are checked before the bundles (see ``OfflineLoader`` for the order).
///
/// ```swift
/// var rules = try OfflineRules(contentsOf: "offline-rules.yml")
/// rules.block.append("https://*.tracker.example/*")
/// rules.substitutions.append(.url("https://api.example.com/flags.json", bytes: Data("{}".utf8), mediaType: "application/json"))
/// let loader = releaseLoader.adding(rules)
/// ```
///
/// A rules file uses the declaration's syntax for `block` and `substitutions`, and adds `policies`:
///
/// ```yaml
/// block:
///   - "https://*.doubleclick.net/*"
/// substitutions:
///   - url: https://cdn.example.com/app.js
///     file: vendor/app.js            # relative to the rules file's folder
///   - prefix: https://cdn.example.com/fonts/
///     folder: fonts
/// policies:
///   - host: api.example.com          # or "*.example.com", or url: "https://*/live/*"
///     policy: network-first          # bundle-only, bundle-first, network-first
///     timeout: 2s                    # network-first only; 10s when not given
/// ```
public struct OfflineRules: Sendable {
    /// What a substitution answers with.
    public enum Content: Sendable {
        /// A local file, answered with the media type of its extension.
        case file(String)
        /// A local folder: the rest of the URL after the prefix names a file in it (`index.html` for a folder).
        case folder(String)
        /// Bytes, with a media type (`application/json`).
        case bytes(Data, mediaType: String)
    }

    /// A URL, or every URL under a prefix, answered from local content.
    public struct Substitution: Sendable {
        /// What a substitution matches.
        public enum Match: Sendable, Equatable {
            /// This URL (compared as a canonical request key).
            case url(String)
            /// Every URL that starts with this prefix (compared as canonical request keys).
            case prefix(String)
        }

        public var match: Match
        public var content: Content

        public init(_ match: Match, content: Content) {
            self.match = match
            self.content = content
        }

        /// `url` answered with the file at `path`.
        public static func url(_ url: String, file path: String) -> Substitution { Substitution(.url(url), content: .file(path)) }
        /// `url` answered with `bytes` of type `mediaType`.
        public static func url(_ url: String, bytes: Data, mediaType: String) -> Substitution {
            Substitution(.url(url), content: .bytes(bytes, mediaType: mediaType))
        }
        /// Every URL under `prefix` answered from the folder at `path`.
        public static func prefix(_ prefix: String, folder path: String) -> Substitution { Substitution(.prefix(prefix), content: .folder(path)) }
    }

    /// URL patterns answered with an empty 204 and never sent to the network: `*` matches any run of characters,
    /// compared with the canonical request key, both lowercased (as a declaration's `block`).
    public var block: [String]
    /// URLs answered from local content, the first that matches.
    public var substitutions: [Substitution]
    /// Policies for hosts or URL patterns, the first that matches; they win over the loader's own overrides.
    public var overrides: [PolicyOverride]

    /// Creates a rule set.
    public init(block: [String] = [], substitutions: [Substitution] = [], overrides: [PolicyOverride] = []) {
        self.block = block
        self.substitutions = substitutions
        self.overrides = overrides
    }

    /// Whether there are no rules.
    public var isEmpty: Bool { block.isEmpty && substitutions.isEmpty && overrides.isEmpty }

    /// Reads a rules file; relative paths in it resolve against its folder.
    ///
    /// - Throws: ``BundleError`` with code `.invalidArgument`, naming the file, line and column and what is wrong.
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw BundleError(.io, "cannot read the rules file \(path) (missing, unreadable, or not UTF-8)")
        }
        let folder = (URL(fileURLWithPath: path).standardizedFileURL.path as NSString).deletingLastPathComponent
        try self.init(yaml: text, file: path, baseDirectory: folder)
    }

    /// Parses rules text; `file` names it in errors, and relative paths resolve against `baseDirectory`.
    public init(yaml text: String, file: String = "rules.yml", baseDirectory: String = FileManager.default.currentDirectoryPath) throws {
        self.init()
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw BundleError(.invalidArgument, "\(file): invalid YAML: \(error)")
        }
        guard let root else { return }
        let reader = RulesReader(file: file, base: baseDirectory)
        for (key, value) in try reader.mapping(root, keys: ["block", "substitutions", "policies"]) {
            switch key.string {
            case "block":
                block = try reader.list(value, "block").map { try reader.string($0, "a block pattern") }
            case "substitutions":
                substitutions = try reader.list(value, "substitutions").map(reader.substitution)
            default:
                overrides = try reader.list(value, "policies").map(reader.policy)
            }
        }
    }

    /// These rules followed by `other`'s: where both match, these win.
    public func followed(by other: OfflineRules) -> OfflineRules {
        OfflineRules(block: block + other.block, substitutions: substitutions + other.substitutions, overrides: overrides + other.overrides)
    }
}

/// Walks a rules file's nodes, with errors that name the line and column.
private struct RulesReader {
    let file: String
    let base: String

    func fail(_ node: Node, _ message: String) -> BundleError {
        let mark = node.mark.map { ":\($0.line):\($0.column)" } ?? ""
        return BundleError(.invalidArgument, "\(file)\(mark): \(message)")
    }

    func mapping(_ node: Node, keys: [String]) throws -> [(Node, Node)] {
        guard let mapping = node.mapping else { throw fail(node, "expected a mapping with keys \(keys.joined(separator: ", "))") }
        for key in mapping.keys where !keys.contains(key.string ?? "") {
            throw fail(key, "unknown key '\(key.string ?? "?")' (expected one of \(keys.joined(separator: ", ")))")
        }
        return Array(mapping)
    }

    func list(_ node: Node, _ what: String) throws -> [Node] {
        guard let sequence = node.sequence else { throw fail(node, "\(what) must be a list") }
        return Array(sequence)
    }

    func string(_ node: Node, _ what: String) throws -> String {
        guard let scalar = node.scalar, !scalar.string.isEmpty else { throw fail(node, "\(what) must be a non-empty string") }
        return scalar.string
    }

    func path(_ node: Node, _ what: String) throws -> String {
        let value = try string(node, what)
        return value.hasPrefix("/") ? value : (base as NSString).appendingPathComponent(value)
    }

    func url(_ node: Node, _ what: String) throws -> String {
        let value = try string(node, what)
        guard HTTPRules.isFetchableURL(value) else { throw fail(node, "\(what) '\(value)' is not an absolute http or https URL") }
        return value
    }

    func substitution(_ node: Node) throws -> OfflineRules.Substitution {
        var fields: [String: Node] = [:]
        for (key, value) in try mapping(node, keys: ["url", "file", "prefix", "folder"]) { fields[key.string ?? ""] = value }
        if let url = fields["url"], let file = fields["file"], fields.count == 2 {
            return .url(try self.url(url, "substitution url"), file: try path(file, "substitution file"))
        }
        if let prefix = fields["prefix"], let folder = fields["folder"], fields.count == 2 {
            return .prefix(try url(prefix, "substitution prefix"), folder: try path(folder, "substitution folder"))
        }
        throw fail(node, "a substitution needs either 'url' and 'file', or 'prefix' and 'folder'")
    }

    func policy(_ node: Node) throws -> PolicyOverride {
        var fields: [String: Node] = [:]
        for (key, value) in try mapping(node, keys: ["host", "url", "policy", "timeout"]) { fields[key.string ?? ""] = value }
        let match: PolicyOverride.Match
        switch (fields["host"], fields["url"]) {
        case (let host?, nil): match = .host(try string(host, "host"))
        case (nil, let url?): match = .url(glob: try string(url, "url"))
        default: throw fail(node, "a policy needs either 'host' or 'url'")
        }
        guard let policyNode = fields["policy"] else { throw fail(node, "a policy needs 'policy' (bundle-only, bundle-first or network-first)") }
        var timeout = Duration.seconds(10)
        if let node = fields["timeout"] {
            guard let seconds = Self.seconds(try string(node, "timeout")), seconds > 0, seconds <= 86_400 else {
                throw fail(node, "timeout must be a duration like 2s, 500ms or 1.5 (seconds), at most a day")
            }
            timeout = .milliseconds(Int64((seconds * 1000).rounded()))
        }
        switch try string(policyNode, "policy") {
        case "bundle-only": return PolicyOverride(match, policy: .bundleOnly)
        case "bundle-first": return PolicyOverride(match, policy: .bundleFirst)
        case "network-first": return PolicyOverride(match, policy: .networkFirst(timeout: timeout))
        case let other: throw fail(policyNode, "unknown policy '\(other)' (expected bundle-only, bundle-first or network-first)")
        }
    }

    /// `2s`, `500ms`, `1m` or a plain number of seconds.
    static func seconds(_ text: String) -> Double? {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        for (suffix, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * factor }.flatMap { $0.isFinite ? $0 : nil }
        }
        return Double(text).flatMap { $0.isFinite ? $0 : nil }
    }
}
