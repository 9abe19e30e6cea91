import Foundation
import OfflineBundle

/// What changed between two bundles: request keys added, removed, and changed (status, headers or body).
public struct BundleDiff: Codable, Sendable {
    /// One key on one or both sides.
    public struct Item: Codable, Sendable, Equatable {
        public var url: String
        /// Body sizes (inflated), when there is a body.
        public var oldSize: UInt64?
        public var newSize: UInt64?
        /// For changed entries: what differs (status, kind, body, a header name).
        public var changes: [String]
        /// For a changed body of JSON or text: the fields that changed, as `/pointer: old -> new` (volatile ones left
        /// out), or the changed lines as a unified diff; at most 20 fields or 40 lines.
        public var details: [String]?
    }

    public var old: String
    public var new: String
    public var added: [Item]
    public var removed: [Item]
    public var changed: [Item]
    public var unchanged: Int

    /// The largest body whose changes are shown field by field or line by line.
    static let detailLimit: UInt64 = 4 << 20

    /// Compares the bundles at `old` and `new` from their indexes (bodies by SHA-256). A changed body of JSON or text
    /// (up to 4 MiB) is read on both sides to say what changed; a JSON body with volatile fields whose JSON without
    /// them is the same is not a change.
    public static func compare(old: String, new: String) throws -> BundleDiff {
        let a = try MountedBundle(path: old)
        // A delta made over the older bundle is the newer one mounted over it.
        let b = try MountedBundle.deltaInfo(atPath: new) != nil ? MountedBundle(deltaPath: new, base: a) : MountedBundle(path: new)
        let oldDeclared = Verifier.declaredEntries(of: a)
        let newDeclared = Verifier.declaredEntries(of: b)
        var before: [String: BundleEntry] = [:]
        for entry in a.entries { before[entry.key] = entry }
        var diff = BundleDiff(old: old, new: new, added: [], removed: [], changed: [], unchanged: 0)
        var seen = Set<String>()
        for entry in b.entries {
            seen.insert(entry.key)
            guard let previous = before[entry.key] else {
                diff.added.append(Item(url: entry.key, oldSize: nil, newSize: entry.body?.size, changes: []))
                continue
            }
            var changes: [String] = []
            if previous.status != entry.status { changes.append("status \(previous.status) -> \(entry.status)") }
            if previous.kind != entry.kind { changes.append("kind \(previous.kind.rawValue) -> \(entry.kind.rawValue)") }
            // The same JSON without its volatile fields: the body, and the validators and length that change with it,
            // are not changes.
            let volatile = newDeclared[entry.position]?.volatile ?? oldDeclared[previous.position]?.volatile ?? []
            let stableBefore = oldDeclared[previous.position]?.stableSha256
            let sameStable = stableBefore != nil && stableBefore == newDeclared[entry.position]?.stableSha256
            let bodyChanged = previous.body?.sha256 != entry.body?.sha256 && !sameStable
            if bodyChanged { changes.append("body") }
            let oldHeaders = Dictionary(previous.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 })
            let newHeaders = Dictionary(entry.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 })
            let followBody: Set<String> = sameStable ? ["etag", "last-modified", "content-length"] : []
            for name in Set(oldHeaders.keys).union(newHeaders.keys).sorted() where oldHeaders[name] != newHeaders[name] && !followBody.contains(name) {
                changes.append(name)
            }
            if changes.isEmpty {
                diff.unchanged += 1
            } else {
                var item = Item(url: entry.key, oldSize: previous.body?.size, newSize: entry.body?.size, changes: changes)
                if bodyChanged { item.details = try details(a, previous, b, entry, volatile: volatile) }
                diff.changed.append(item)
            }
        }
        for entry in a.entries where !seen.contains(entry.key) {
            diff.removed.append(Item(url: entry.key, oldSize: entry.body?.size, newSize: nil, changes: []))
        }
        return diff
    }

    /// What changed in a body of JSON (by field) or text (by line), when both sides are such and small enough.
    ///
    /// - Throws: ``BundleError`` when a body read fails its checks: a damaged bundle is not compared as if it differed.
    static func details(_ a: MountedBundle, _ old: BundleEntry, _ b: MountedBundle, _ new: BundleEntry, volatile: [String]) throws -> [String]? {
        guard let x = old.body, let y = new.body, x.size <= detailLimit, y.size <= detailLimit else { return nil }
        let type = new.header("content-type").map(MediaTypes.essence(of:)) ?? ""
        let shown =
            type.hasPrefix("text/") || type == "application/json" || type.hasSuffix("+json") || type.hasSuffix("+xml") || type == "application/javascript"
        guard shown else { return nil }
        let before = try a.body(of: old)
        let after = try b.body(of: new)
        if type == "application/json" || type.hasSuffix("+json") {
            if let oldJSON = StableJSON.stableData(before, volatile: volatile).flatMap(JSONDiff.parse),
                let newJSON = StableJSON.stableData(after, volatile: volatile).flatMap(JSONDiff.parse)
            {
                let (shown, total) = JSONDiff.differences(oldJSON, newJSON)
                return shown.map(\.line) + (total > shown.count ? ["… \(total - shown.count) more fields changed"] : [])
            }
        }
        guard type.hasPrefix("text/") || type == "application/json" || type.hasSuffix("+xml") || type == "application/javascript",
            let oldText = String(data: before, encoding: .utf8), let newText = String(data: after, encoding: .utf8)
        else { return nil }
        return TextDiff.unified(oldText, newText)
    }

    /// Whether the bundles answer every request alike.
    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }
}
