import Foundation

/// The file a `{prefix, folder}` substitution answers a URL with, for the build and the runtime alike.
package enum SubstitutionPath {
    /// The path inside the folder for the part of a canonical key after the prefix: the query and fragment left
    /// out, percent-decoded, `index.html` for a folder; nil when the path would leave the folder (`..`, an absolute
    /// path) or names a hidden file or folder (a name starting with a dot: `.git`, `.env`), which the build never
    /// packages either.
    package static func relativePath(forRest rest: Substring) -> String? {
        var rest = String(rest)
        if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = String(rest[..<query]) }
        rest = rest.removingPercentEncoding ?? rest
        if rest.isEmpty || rest.hasSuffix("/") { rest += "index.html" }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        if parts.contains(where: { $0.hasPrefix(".") }) || rest.hasPrefix("/") || rest.utf8.contains(0) { return nil }
        return rest
    }

    /// `relative` inside `folder`, with symbolic links resolved; nil when the file lies outside the folder.
    package static func file(_ relative: String, inside folder: String) -> String? {
        let root = URL(fileURLWithPath: folder).resolvingSymlinksInPath().path
        let path = URL(fileURLWithPath: (root as NSString).appendingPathComponent(relative)).resolvingSymlinksInPath().path
        return path.hasPrefix(root.hasSuffix("/") ? root : root + "/") ? path : nil
    }

    /// The URL path (after a prefix) that a file at `relativePath` inside the folder answers, percent-encoded.
    package static func urlPath(forRelativePath relativePath: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "?#;%")
        return relativePath.addingPercentEncoding(withAllowedCharacters: allowed) ?? relativePath
    }

    /// The media type a substituted file is answered with: by its extension, text types as UTF-8.
    package static func contentType(forPath path: String) -> String {
        let type = MediaTypes.mediaType(forPath: path)
        return MediaTypes.isCompressible(type) && !type.contains("charset") && type.hasPrefix("text/") ? type + "; charset=utf-8" : type
    }
}
