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
    }

    public var old: String
    public var new: String
    public var added: [Item]
    public var removed: [Item]
    public var changed: [Item]
    public var unchanged: Int

    /// Compares the bundles at `old` and `new` from their indexes (bodies by SHA-256, never read).
    public static func compare(old: String, new: String) throws -> BundleDiff {
        let a = try MountedBundle(path: old)
        let b = try MountedBundle(path: new)
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
            if previous.body?.sha256 != entry.body?.sha256 { changes.append("body") }
            let oldHeaders = Dictionary(previous.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 })
            let newHeaders = Dictionary(entry.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 })
            for name in Set(oldHeaders.keys).union(newHeaders.keys).sorted() where oldHeaders[name] != newHeaders[name] { changes.append(name) }
            if changes.isEmpty {
                diff.unchanged += 1
            } else {
                diff.changed.append(Item(url: entry.key, oldSize: previous.body?.size, newSize: entry.body?.size, changes: changes))
            }
        }
        for entry in a.entries where !seen.contains(entry.key) {
            diff.removed.append(Item(url: entry.key, oldSize: entry.body?.size, newSize: nil, changes: []))
        }
        return diff
    }

    /// Whether the bundles answer every request alike.
    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }
}
