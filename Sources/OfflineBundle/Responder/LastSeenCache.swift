import Crypto
import Foundation
import HTTPTypes
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the network last answered, kept on disk so that a service restarted offline answers with it.
///
/// Give one to ``LoaderOptions/lastSeen``: under network-first and bundle-first, successful network responses for
/// URLs of the bundles' origins are kept, and answer before the bundles when they are newer than the bundles' entry
/// for the URL. The cache holds at most ``maxBytes`` (least recently used out first); each response is one file,
/// written to a temporary name and renamed, so a crash never leaves half a response to be served.
///
/// Not kept: responses other than 200 to a GET, responses to requests with credentials (`Authorization`, `Cookie`)
/// or a `Range`, responses with `Cache-Control: no-store` or `private`, `Vary: *`, a `Content-Encoding` (the cache
/// holds decoded bodies), bodies over ``maxEntryBytes``, and, when ``minimumLifetime`` is set, responses whose
/// freshness lifetime (`max-age`, or `Expires` minus `Date`) is shorter or not given. `Set-Cookie` is never kept.
public final class LastSeenCache: Sendable {

    /// The folder the responses are kept in.
    public let directory: String
    /// The most bytes the kept files may take.
    public let maxBytes: UInt64
    /// The largest body kept (an eighth of ``maxBytes`` unless set).
    public let maxEntryBytes: UInt64
    /// Responses fresh for less than this are not kept.
    public let minimumLifetime: Duration

    private struct Item {
        var size: UInt64
        var used: Date
    }

    /// The files kept, and the bytes they take.
    private struct Files {
        var items: [String: Item] = [:]
        var total: UInt64 = 0
    }

    private let files: Mutex<Files>
    private static let suffix = ".seen"
    private static let magic = Array("PKSEEN01".utf8)

    /// Opens (creating it when needed) the cache in `directory`.
    ///
    /// - Throws: ``BundleError`` with code `.io` when the folder cannot be created or read.
    public init(directory: String, maxBytes: UInt64, maxEntryBytes: UInt64? = nil, minimumLifetime: Duration = .zero) throws {
        self.directory = directory
        self.maxBytes = maxBytes
        self.maxEntryBytes = maxEntryBytes ?? maxBytes / 8
        self.minimumLifetime = minimumLifetime
        let manager = FileManager.default
        var found = Files()
        do {
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for name in try manager.contentsOfDirectory(atPath: directory) {
                let path = (directory as NSString).appendingPathComponent(name)
                if name.hasPrefix(".tmp-") {
                    // Left by a write a crash interrupted.
                    try? manager.removeItem(atPath: path)
                    continue
                }
                guard name.hasSuffix(Self.suffix), let attributes = try? manager.attributesOfItem(atPath: path) else { continue }
                let size = (attributes[.size] as? NSNumber)?.uint64Value ?? 0
                found.items[name] = Item(size: size, used: attributes[.modificationDate] as? Date ?? .distantPast)
                found.total += size
            }
        } catch {
            throw BundleError(.io, "cannot use \(directory) for the last-seen cache: \(error.localizedDescription)")
        }
        files = Mutex(found)
        files.withLock { evict(&$0, keeping: nil) }
    }

    /// The bytes the kept files take now.
    public var bytesUsed: UInt64 { files.withLock { $0.total } }

    /// Whether a response to `request` could be kept at all.
    public func mayStore(_ request: BundleRequest) -> Bool {
        request.method.uppercased() == "GET" && request.headers[.authorization] == nil && request.headers[.cookie] == nil
            && request.headers[.proxyAuthorization] == nil && request.headers[.range] == nil
    }

    /// Keeps the network's response to `request` under the canonical `key`, when the rules above allow it.
    ///
    /// - Returns: whether it was kept.
    @discardableResult
    package func store(key: String, request: BundleRequest, status: Int, headers: HTTPFields, body: Data, now: Date = Date()) -> Bool {
        guard status == 200, mayStore(request), UInt64(body.count) <= maxEntryBytes, Self.mayKeep(headers, minimumLifetime: minimumLifetime) else {
            return false
        }
        let kept = headers.filter { HeaderPolicy.isReplayed($0.name) && $0.name != .age }
        let meta = Meta(key: key, status: status, storedAt: now.timeIntervalSince1970, headers: kept.map { [$0.name.canonicalName, $0.value] })
        guard let metaBytes = try? JSONEncoder().encode(meta) else { return false }
        var file = Self.magic
        withUnsafeBytes(of: UInt32(metaBytes.count).littleEndian) { file.append(contentsOf: $0) }
        file.append(contentsOf: metaBytes)
        file.append(contentsOf: body)
        let name = Self.name(forKey: key)
        let path = (directory as NSString).appendingPathComponent(name)
        let temporary = (directory as NSString).appendingPathComponent(".tmp-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary, contents: Data(file)) else { return false }
        // Renamed under the lock, so an eviction running meanwhile cannot remove the file just written.
        return files.withLock { files in
            guard rename(temporary, path) == 0 else {
                unlink(temporary)
                return false
            }
            files.total -= files.items[name]?.size ?? 0
            files.items[name] = Item(size: UInt64(file.count), used: now)
            files.total += UInt64(file.count)
            evict(&files, keeping: name)
            return true
        }
    }

    /// The response kept for the canonical `key`, or nil.
    package func record(forKey key: String) -> Record? {
        let name = Self.name(forKey: key)
        guard files.withLock({ $0.items[name] != nil }) else { return nil }
        let path = (directory as NSString).appendingPathComponent(name)
        guard let file = try? BundleFile(path: path), file.size >= 12, let head = try? file.read(at: 0, count: 12, what: "the header"),
            Array(head[0..<8]) == Self.magic
        else { return nil }
        let metaLength = UInt64(head[8]) | UInt64(head[9]) << 8 | UInt64(head[10]) << 16 | UInt64(head[11]) << 24
        guard metaLength <= file.size - 12, let metaBytes = try? file.read(at: 12, count: Int(metaLength), what: "the header"),
            let meta = try? JSONDecoder().decode(Meta.self, from: Data(metaBytes)), meta.key == key
        else { return nil }
        let now = Date()
        files.withLock { $0.items[name]?.used = now }
        // The order survives a restart: the file's modification time is its last use.
        _ = try? FileManager.default.setAttributes([.modificationDate: now], ofItemAtPath: path)
        let bodyStart = 12 + metaLength
        return Record(
            status: meta.status, headers: meta.headers.compactMap { $0.count == 2 ? (name: $0[0].lowercased(), value: $0[1]) : nil },
            storedAt: Date(timeIntervalSince1970: meta.storedAt), content: ResponseContent(file: file, offset: bodyStart, size: file.size - bodyStart))
    }

    /// Removes the least recently used files until the total fits, never `keeping`.
    private func evict(_ files: inout Files, keeping: String?) {
        guard files.total > maxBytes else { return }
        for (name, item) in files.items.sorted(by: { $0.value.used < $1.value.used }) where name != keeping {
            unlink((directory as NSString).appendingPathComponent(name))
            files.items[name] = nil
            files.total -= item.size
            if files.total <= maxBytes { return }
        }
    }

    static func name(forKey key: String) -> String {
        SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined() + suffix
    }

    /// Whether response headers allow keeping (see the type's documentation).
    static func mayKeep(_ headers: HTTPFields, minimumLifetime: Duration) -> Bool {
        let directives = (headers[.cacheControl] ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        if directives.contains(where: { $0 == "no-store" || $0 == "private" || $0.hasPrefix("private=") }) { return false }
        if headers[.vary]?.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "*" }) == true { return false }
        if let encoding = headers[.contentEncoding]?.lowercased(), encoding != "identity" { return false }
        guard minimumLifetime > .zero else { return true }
        var lifetime: Double?
        if let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }) { lifetime = Double(maxAge.dropFirst(8)) }
        if lifetime == nil, let expires = headers[.expires].flatMap(HTTPDates.parse) {
            let date = headers[.date].flatMap(HTTPDates.parse) ?? Date()
            lifetime = expires.timeIntervalSince(date)
        }
        guard let lifetime, lifetime.isFinite else { return false }
        return Duration.milliseconds(Int64(max(0, min(lifetime, 1e12)) * 1000)) >= minimumLifetime
    }

    private struct Meta: Codable {
        var key: String
        var status: Int
        var storedAt: Double
        var headers: [[String]]
    }

    /// A kept response.
    package struct Record {
        var status: Int
        var headers: [(name: String, value: String)]
        var storedAt: Date
        var content: ResponseContent

        /// The answer to `request` from this response, with its `Age`.
        func respond(to request: BundleRequest, head: Bool, now: Date) -> BundleResponse {
            var response = content.respond(to: request, status: status, headers: headers, head: head, source: .lastSeen)
            response.headers[.age] = String(Int(max(0, min(now.timeIntervalSince(storedAt), Double(Int32.max)))))
            return response
        }
    }
}
