/// Media types by file name extension, for packing local files and for the runtime's substitution answers; and the
/// one parser of Content-Type values (``essence(of:)``, ``charset(of:)``).
///
/// The table maps lowercase file name extensions to bare media types (no
/// parameters such as `charset`; those are decided elsewhere). It favours the
/// IANA-registered type where browsers accept it, and otherwise the type that
/// common web servers send. The compressibility rules decide whether a body is
/// worth deflating or is already compressed and should be stored as it is.
public enum MediaTypes {
    /// The media type sent for files whose type is not known.
    static let fallback = "application/octet-stream"

    /// The media type for a file extension (without the dot, any case), or nil if unknown.
    ///
    /// The lookup is case-insensitive: `"PNG"`, `"png"` and `"Png"` give the
    /// same answer. A single leading dot is tolerated, so `".png"` works too.
    /// The result is a bare media type such as `"text/html"`, never with
    /// parameters.
    ///
    /// - Parameter ext: A file name extension, such as `"html"` or `"woff2"`.
    /// - Returns: The media type, or `nil` when the extension is not in the table.
    public static func mediaType(forExtension ext: String) -> String? {
        var key = Substring(ext)
        if key.first == "." {
            key = key.dropFirst()
        }
        guard !key.isEmpty else { return nil }
        return byExtension[key.lowercased()]
    }

    /// The media type for a path or file name: by its last extension; "application/octet-stream" when unknown.
    ///
    /// Only the last path component is examined, and only its last extension:
    /// `"a/b.tar.gz"` is looked up as `"gz"`. A name without a dot
    /// (`"Makefile"`), a name whose only dot is the leading one (`".hidden"`)
    /// and a name ending in a dot have no extension. Whenever there is no
    /// extension, or it is not in the table, the result is
    /// `"application/octet-stream"`.
    ///
    /// - Parameter path: A file path or file name, with `/` as separator.
    /// - Returns: The media type for the path's extension, or `"application/octet-stream"`.
    public static func mediaType(forPath path: String) -> String {
        let name: Substring
        if let slash = path.lastIndex(of: "/") {
            name = path[path.index(after: slash)...]
        } else {
            name = Substring(path)
        }
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else {
            return fallback
        }
        let ext = name[name.index(after: dot)...]
        guard !ext.isEmpty, let type = byExtension[ext.lowercased()] else {
            return fallback
        }
        return type
    }

    /// The media type of a Content-Type value, lowercased, without parameters (`text/html` of
    /// `Text/HTML; charset=utf-8`): the one parser of Content-Type the build, verify and the runtime share.
    package static func essence(of contentType: String) -> String {
        contentType.prefix { $0 != ";" }.trimmingWhitespace().lowercased()
    }

    /// The `charset` parameter of a Content-Type value, lowercased and unquoted; nil when it has none.
    package static func charset(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].trimmingWhitespace().lowercased() == "charset" {
                var value = parts[1].trimmingWhitespace()
                if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
                return value.lowercased()
            }
        }
        return nil
    }

    /// Whether bodies of this media type are worth deflating.
    ///
    /// Takes a full Content-Type value, possibly with parameters
    /// (`"text/html; charset=utf-8"`), compared case-insensitively. The answer is
    /// `true` for text and text-like formats (all of `text/*`, JSON, XML and any
    /// `+json` or `+xml` type, JavaScript, WebAssembly, scripts, SVG, RTF,
    /// PostScript, uncompressed tar), for uncompressed fonts (TTF, OTF, EOT,
    /// TTC), uncompressed images (BMP, ICO, TIFF, PNM) and audio (WAV, AIFF),
    /// legacy binary Office documents, executables and SQLite databases.
    ///
    /// It is `false` for formats that are already compressed (JPEG, PNG, GIF,
    /// WebP, AVIF, HEIC, WOFF, WOFF2, PDF, ZIP and every zip-based format such as
    /// JAR, APK, EPUB and Office Open XML or OpenDocument files, gzip, bzip2, xz,
    /// zstd, 7z, RAR, video and most audio), and for anything unknown.
    ///
    /// - Parameter mediaType: A media type or full Content-Type value.
    /// - Returns: `true` if deflating the body is likely to pay off.
    public static func isCompressible(_ mediaType: String) -> Bool {
        let essence = essence(of: mediaType)
        guard let slash = essence.firstIndex(of: "/") else { return false }
        let top = essence[..<slash]
        let subtype = essence[essence.index(after: slash)...]
        guard !top.isEmpty, !subtype.isEmpty else { return false }

        if top == "text" {
            return true
        }
        if subtype == "json" || subtype == "xml"
            || subtype.hasSuffix("+json") || subtype.hasSuffix("+xml")
        {
            return true
        }
        return compressibleTypes.contains(essence)
    }

    // MARK: - Tables

    /// Media types, outside `text/*` and the JSON and XML families, whose bodies deflate well.
    static let compressibleTypes: Set<String> = [
        // Scripts, code and structured text.
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/wasm",
        "application/x-ndjson",
        "application/jsonl",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/sql",
        "application/graphql",
        "application/x-sh",
        "application/x-csh",
        "application/x-httpd-php",
        "application/x-perl",
        "application/x-tex",
        "application/x-latex",
        "application/x-subrip",
        "application/rtf",
        "application/postscript",
        "application/xml-dtd",
        "application/x-pem-file",
        "application/mbox",
        "application/vnd.apple.mpegurl",
        "application/x-mpegurl",
        "audio/mpegurl",
        "audio/x-mpegurl",
        "audio/x-scpls",
        "message/rfc822",

        // Uncompressed containers and binaries.
        "application/x-tar",
        "application/x-cpio",
        "application/vnd.sqlite3",
        "application/x-sqlite3",
        "application/java-vm",
        "application/vnd.microsoft.portable-executable",
        "application/x-msdownload",
        "application/x-executable",
        "application/x-sharedlib",
        "application/x-mach-binary",

        // Legacy binary Office documents (OLE compound files, not zip-based).
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",

        // Uncompressed fonts.
        "font/ttf",
        "font/otf",
        "font/collection",
        "font/sfnt",
        "application/font-sfnt",
        "application/x-font-ttf",
        "application/x-font-otf",
        "application/vnd.ms-fontobject",

        // Uncompressed images.
        "image/bmp",
        "image/x-ms-bmp",
        "image/x-icon",
        "image/vnd.microsoft.icon",
        "image/tiff",
        "image/x-portable-anymap",
        "image/x-portable-bitmap",
        "image/x-portable-graymap",
        "image/x-portable-pixmap",
        "image/x-xbitmap",
        "image/x-tga",
        "image/vnd.adobe.photoshop",
        "image/emf",
        "image/wmf",

        // Uncompressed audio.
        "audio/wav",
        "audio/wave",
        "audio/x-wav",
        "audio/vnd.wave",
        "audio/aiff",
        "audio/x-aiff",
        "audio/basic",
        "audio/midi",

        // 3D models stored without compression.
        "model/obj",
        "model/mtl",
        "model/stl",
        "model/gltf-binary",
    ]

    /// Media types keyed by lowercase file name extension.
    static let byExtension: [String: String] = [
        // Web pages, styles and scripts.
        "html": "text/html",
        "htm": "text/html",
        "shtml": "text/html",
        "xhtml": "application/xhtml+xml",
        "xht": "application/xhtml+xml",
        "css": "text/css",
        "js": "text/javascript",
        "mjs": "text/javascript",
        "cjs": "text/javascript",
        "wasm": "application/wasm",
        "appcache": "text/cache-manifest",
        "webmanifest": "application/manifest+json",

        // Structured data.
        "json": "application/json",
        "map": "application/json",
        "jsonld": "application/ld+json",
        "geojson": "application/geo+json",
        "ndjson": "application/x-ndjson",
        "jsonl": "application/jsonl",
        "xml": "application/xml",
        "xsd": "application/xml",
        "xsl": "application/xml",
        "xslt": "application/xslt+xml",
        "dtd": "application/xml-dtd",
        "rdf": "application/rdf+xml",
        "rss": "application/rss+xml",
        "atom": "application/atom+xml",
        "gpx": "application/gpx+xml",
        "kml": "application/vnd.google-earth.kml+xml",
        "kmz": "application/vnd.google-earth.kmz",
        "yaml": "application/yaml",
        "yml": "application/yaml",
        "toml": "application/toml",
        "csv": "text/csv",
        "tsv": "text/tab-separated-values",
        "cbor": "application/cbor",
        "pb": "application/x-protobuf",

        // Plain text and markup.
        "txt": "text/plain",
        "text": "text/plain",
        "log": "text/plain",
        "ini": "text/plain",
        "conf": "text/plain",
        "cfg": "text/plain",
        "md": "text/markdown",
        "markdown": "text/markdown",
        "rst": "text/x-rst",
        "ics": "text/calendar",
        "vcf": "text/vcard",
        "vcard": "text/vcard",
        "vtt": "text/vtt",
        "srt": "application/x-subrip",
        "ttml": "application/ttml+xml",
        "diff": "text/x-diff",
        "patch": "text/x-diff",
        "eml": "message/rfc822",
        "mbox": "application/mbox",

        // Source code.
        "sh": "application/x-sh",
        "bash": "application/x-sh",
        "csh": "application/x-csh",
        "py": "text/x-python",
        "rb": "text/x-ruby",
        "pl": "text/x-perl",
        "pm": "text/x-perl",
        "php": "application/x-httpd-php",
        "lua": "text/x-lua",
        "c": "text/x-c",
        "h": "text/x-c",
        "cc": "text/x-c",
        "cpp": "text/x-c",
        "cxx": "text/x-c",
        "hpp": "text/x-c",
        "hh": "text/x-c",
        "java": "text/x-java-source",
        "swift": "text/plain",
        "go": "text/plain",
        "rs": "text/plain",
        "kt": "text/plain",
        "dart": "text/plain",
        "cs": "text/plain",
        "jsx": "text/plain",
        "tsx": "text/plain",
        "sql": "application/sql",
        "graphql": "application/graphql",
        "wgsl": "text/wgsl",
        "tex": "application/x-tex",
        "latex": "application/x-latex",

        // Images.
        "png": "image/png",
        "apng": "image/apng",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "jpe": "image/jpeg",
        "jfif": "image/jpeg",
        "pjpeg": "image/jpeg",
        "pjp": "image/jpeg",
        "gif": "image/gif",
        "webp": "image/webp",
        "avif": "image/avif",
        "heic": "image/heic",
        "heif": "image/heif",
        "jxl": "image/jxl",
        "jp2": "image/jp2",
        "bmp": "image/bmp",
        "ico": "image/x-icon",
        "cur": "image/x-icon",
        "tif": "image/tiff",
        "tiff": "image/tiff",
        "svg": "image/svg+xml",
        "svgz": "image/svg+xml",
        "psd": "image/vnd.adobe.photoshop",
        "djvu": "image/vnd.djvu",
        "tga": "image/x-tga",
        "pnm": "image/x-portable-anymap",
        "pbm": "image/x-portable-bitmap",
        "pgm": "image/x-portable-graymap",
        "ppm": "image/x-portable-pixmap",
        "xbm": "image/x-xbitmap",
        "emf": "image/emf",
        "wmf": "image/wmf",
        "ktx": "image/ktx",
        "ktx2": "image/ktx2",

        // Fonts.
        "woff": "font/woff",
        "woff2": "font/woff2",
        "ttf": "font/ttf",
        "otf": "font/otf",
        "ttc": "font/collection",
        "eot": "application/vnd.ms-fontobject",

        // Audio.
        "mp3": "audio/mpeg",
        "mpga": "audio/mpeg",
        "m4a": "audio/mp4",
        "m4b": "audio/mp4",
        "aac": "audio/aac",
        "ogg": "audio/ogg",
        "oga": "audio/ogg",
        "opus": "audio/ogg",
        "spx": "audio/ogg",
        "wav": "audio/wav",
        "flac": "audio/flac",
        "weba": "audio/webm",
        "mka": "audio/x-matroska",
        "aif": "audio/aiff",
        "aiff": "audio/aiff",
        "aifc": "audio/aiff",
        "au": "audio/basic",
        "snd": "audio/basic",
        "mid": "audio/midi",
        "midi": "audio/midi",
        "amr": "audio/amr",
        "caf": "audio/x-caf",
        "wma": "audio/x-ms-wma",
        "m3u": "audio/x-mpegurl",
        "pls": "audio/x-scpls",

        // Video and streaming.
        "mp4": "video/mp4",
        "m4v": "video/x-m4v",
        "webm": "video/webm",
        "ogv": "video/ogg",
        "mov": "video/quicktime",
        "qt": "video/quicktime",
        "avi": "video/x-msvideo",
        "mkv": "video/x-matroska",
        "mpeg": "video/mpeg",
        "mpg": "video/mpeg",
        "mpe": "video/mpeg",
        "m2v": "video/mpeg",
        "ts": "video/mp2t",
        "m2ts": "video/mp2t",
        "mts": "video/mp2t",
        "3gp": "video/3gpp",
        "3g2": "video/3gpp2",
        "flv": "video/x-flv",
        "wmv": "video/x-ms-wmv",
        "asf": "video/x-ms-asf",
        "m3u8": "application/vnd.apple.mpegurl",
        "mpd": "application/dash+xml",

        // Documents.
        "pdf": "application/pdf",
        "epub": "application/epub+zip",
        "mobi": "application/x-mobipocket-ebook",
        "rtf": "application/rtf",
        "ps": "application/postscript",
        "eps": "application/postscript",
        "ai": "application/postscript",
        "doc": "application/msword",
        "dot": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "dotx": "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
        "docm": "application/vnd.ms-word.document.macroEnabled.12",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "xlsm": "application/vnd.ms-excel.sheet.macroEnabled.12",
        "ppt": "application/vnd.ms-powerpoint",
        "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "ppsx": "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
        "pptm": "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
        "odt": "application/vnd.oasis.opendocument.text",
        "ods": "application/vnd.oasis.opendocument.spreadsheet",
        "odp": "application/vnd.oasis.opendocument.presentation",
        "odg": "application/vnd.oasis.opendocument.graphics",
        "pages": "application/vnd.apple.pages",
        "numbers": "application/vnd.apple.numbers",
        "xps": "application/vnd.ms-xpsdocument",

        // Archives, compressed files and packages.
        "zip": "application/zip",
        "gz": "application/gzip",
        "tgz": "application/gzip",
        "tar": "application/x-tar",
        "cpio": "application/x-cpio",
        "bz2": "application/x-bzip2",
        "tbz2": "application/x-bzip2",
        "xz": "application/x-xz",
        "txz": "application/x-xz",
        "zst": "application/zstd",
        "lz": "application/x-lzip",
        "lzma": "application/x-lzma",
        "z": "application/x-compress",
        "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar",
        "cab": "application/vnd.ms-cab-compressed",
        "jar": "application/java-archive",
        "war": "application/java-archive",
        "apk": "application/vnd.android.package-archive",
        "xpi": "application/x-xpinstall",
        "dmg": "application/x-apple-diskimage",
        "iso": "application/x-iso9660-image",
        "deb": "application/vnd.debian.binary-package",
        "rpm": "application/x-rpm",
        "torrent": "application/x-bittorrent",

        // Binaries, databases and keys.
        "bin": "application/octet-stream",
        "exe": "application/vnd.microsoft.portable-executable",
        "dll": "application/vnd.microsoft.portable-executable",
        "so": "application/x-sharedlib",
        "class": "application/java-vm",
        "sqlite": "application/vnd.sqlite3",
        "sqlite3": "application/vnd.sqlite3",
        "parquet": "application/vnd.apache.parquet",
        "pem": "application/x-pem-file",
        "crt": "application/x-x509-ca-cert",
        "der": "application/x-x509-ca-cert",
        "cer": "application/pkix-cert",
        "p12": "application/x-pkcs12",
        "pfx": "application/x-pkcs12",
        "asc": "application/pgp-signature",
        "sig": "application/pgp-signature",

        // 3D models.
        "gltf": "model/gltf+json",
        "glb": "model/gltf-binary",
        "obj": "model/obj",
        "mtl": "model/mtl",
        "stl": "model/stl",
        "usdz": "model/vnd.usdz+zip",
        "3mf": "model/3mf",
    ]
}

extension Substring {
    /// This substring without leading and trailing spaces and tabs.
    package func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" {
            result = result.dropFirst()
        }
        while let last = result.last, last == " " || last == "\t" {
            result = result.dropLast()
        }
        return result
    }
}
