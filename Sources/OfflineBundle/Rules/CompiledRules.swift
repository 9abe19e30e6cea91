import Foundation
import HTTPTypes

/// Runtime rules made ready for lookups: patterns as lowercased bytes, URLs and prefixes as canonical keys, and
/// every file and folder checked once.
struct CompiledRules: Sendable {
    private enum Content: Sendable {
        case file(String)
        case folder(String)
        case bytes(ResponseContent, mediaType: String)
    }

    private var block: [[UInt8]] = []
    private var byKey: [String: Content] = [:]
    private var prefixes: [(prefix: String, folder: String)] = []

    init() {}

    /// - Throws: ``BundleError`` with code `.invalidArgument` when a URL is not an http or https URL, or a
    ///   substituted file or folder does not exist.
    init(_ rules: OfflineRules) throws {
        let canonicalizer = RequestKeyCanonicalizer()
        block = rules.block.map { Array($0.lowercased().utf8) }
        for substitution in rules.substitutions {
            let text: String
            switch substitution.match {
            case .url(let url): text = url
            case .prefix(let prefix): text = prefix
            }
            guard HTTPRules.isFetchableURL(text), let key = canonicalizer.canonicalize(text) else {
                throw BundleError(.invalidArgument, "the substitution for \(text.debugDescription) does not name an http or https URL")
            }
            var isFolder: ObjCBool = false
            switch (substitution.match, substitution.content) {
            case (.url, .file(let path)):
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue else {
                    throw BundleError(.invalidArgument, "the substitution for \(text) names the file \(path), which does not exist or is a folder")
                }
                if byKey[key] == nil { byKey[key] = .file(path) }
            case (.url, .bytes(let data, let mediaType)):
                if byKey[key] == nil { byKey[key] = .bytes(ResponseContent(bytes: data), mediaType: mediaType) }
            case (.prefix, .folder(let path)):
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
                    throw BundleError(.invalidArgument, "the substitution for \(text) names the folder \(path), which does not exist or is not a folder")
                }
                // A prefix names a folder: `https://cdn.example.com/fonts` covers `…/fonts/…`, not `…/fonts-old/…`.
                prefixes.append((key.hasSuffix("/") ? key : key + "/", path))
            case (.url, .folder), (.prefix, .file), (.prefix, .bytes):
                throw BundleError(.invalidArgument, "the substitution for \(text): a URL takes a file or bytes, a prefix takes a folder")
            }
        }
    }

    /// The 204 a block rule answers `request` with, or nil.
    func blocked(_ request: BundleRequest) -> BundleResponse? {
        guard !block.isEmpty, let key = RequestKeyCanonicalizer().canonicalize(request.url) else { return nil }
        return blocked(key: key)
    }

    private func blocked(key: String) -> BundleResponse? {
        guard !block.isEmpty else { return nil }
        let lowered = Array(key.lowercased().utf8)
        guard block.contains(where: { globMatch($0[...], lowered[...]) }) else { return nil }
        return BundleResponse(status: 204, headers: [:], body: .empty, source: .rule)
    }

    /// The rules' answer to `request`, or nil when no rule matches.
    func answer(_ request: BundleRequest, head: Bool) -> BundleResponse? {
        guard !block.isEmpty || !byKey.isEmpty || !prefixes.isEmpty, let key = RequestKeyCanonicalizer().canonicalize(request.url) else { return nil }
        if let blocked = blocked(key: key) { return blocked }
        if let content = byKey[key] {
            switch content {
            case .bytes(let bytes, let mediaType):
                return bytes.respond(to: request, status: 200, headers: [("content-type", mediaType)], head: head, source: .rule)
            case .file(let path):
                return fileAnswer(request, head: head, path: path)
            case .folder:
                return nil
            }
        }
        for (prefix, folder) in prefixes where key.hasPrefix(prefix) {
            // Under a prefix, the folder answers or nothing does: never the network.
            guard let relative = SubstitutionPath.relativePath(forRest: key.dropFirst(prefix.count)),
                let path = SubstitutionPath.file(relative, inside: folder)
            else { return notFound() }
            return fileAnswer(request, head: head, path: path)
        }
        return nil
    }

    private func fileAnswer(_ request: BundleRequest, head: Bool, path: String) -> BundleResponse {
        guard let content = try? ResponseContent(file: path) else { return notFound() }
        var headers = [(name: "content-type", value: SubstitutionPath.contentType(forPath: path))]
        if let modified = content.modified { headers.append((name: "last-modified", value: HTTPDates.format(modified))) }
        return content.respond(to: request, status: 200, headers: headers, head: head, source: .rule)
    }

    private func notFound() -> BundleResponse { BundleResponse(status: 404, headers: [.contentLength: "0"], body: .empty, source: .rule) }
}
