import Crypto
import Foundation
import OfflineBundle

/// Turns a folder, or an archive of one, into a bundle whose entries answer for a base URL.
///
/// `about/index.html` answers for `BASE/about/index.html` and `BASE/about/`;
/// `BASE/about` answers with a 301 to `BASE/about/`, as a web server would.
/// Media types come from file extensions (``MediaTypes``).
public struct Packer: Sendable {
    /// Settings for a pack.
    public struct Options: Sendable {
        /// The URL that the folder's root answers for.
        public var baseURL: String
        /// File names that answer for their folder's URL.
        public var indexFiles: [String]
        /// Charset added to textual media types (nil adds none).
        public var charset: String?
        /// Leading path components removed from archive entry names.
        public var stripComponents: Int
        /// Whether files and folders whose names start with a dot are packed (`.well-known` always is).
        public var includeHidden: Bool
        /// Settings passed to the writer.
        public var writer: BundleWriter.Options
        /// Whether the bundle answers a URL with a query by the file it names, as a static server does (`/search.html?q=x`
        /// by `search.html`): an ignore-query rule for every key (docs/FORMAT.md §4.6). On by default.
        public var ignoresQuery: Bool

        /// Creates options.
        public init(
            baseURL: String, indexFiles: [String] = ["index.html", "index.htm"], charset: String? = "utf-8", stripComponents: Int = 0,
            includeHidden: Bool = false, writer: BundleWriter.Options = .init(), ignoresQuery: Bool = true
        ) {
            self.ignoresQuery = ignoresQuery
            self.baseURL = baseURL
            self.indexFiles = indexFiles
            self.charset = charset
            self.stripComponents = stripComponents
            self.includeHidden = includeHidden
            self.writer = writer
        }
    }

    /// What a pack produced.
    public struct Summary: Sendable {
        public var files: Int
        public var skipped: [String]
        public var write: BundleWriter.Summary
    }

    public var options: Options

    /// Creates a packer.
    public init(options: Options) { self.options = options }

    /// Packs `source` (a folder, or a `.zip`, `.tar`, `.tar.gz`, `.tar.zst`... archive) into a bundle at `output`.
    ///
    /// - Throws: ``PackagerError`` when the source cannot be read, the base URL
    ///   is not an absolute http(s) URL, or the bundle cannot be written.
    public func pack(source: String, output: String) throws -> Summary {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory) else {
            throw PackagerError(.invalidInput, "cannot open \(source): no such file or directory")
        }
        if isDirectory.boolValue { return try packFolder(source, output: output, shown: source) }
        // An archive: extract it safely next to the output, pack, and remove the copy.
        let scratch = try ScratchFolder(besideOutput: output)
        defer { scratch.remove() }
        let staging = scratch.path(for: "site")
        try refuseFileAndFolderOfOneName(in: source)
        try Extractor.extract(archive: source, to: staging, stripComponents: options.stripComponents)
        return try packFolder(staging, output: output, shown: source)
    }

    /// An archive can hold a file `about` and a file `about/index.html`, which no folder can: the folder's 301 and the
    /// file would answer the same key (§5.3), so the pack is refused, named, before anything is extracted.
    private func refuseFileAndFolderOfOneName(in archive: String) throws {
        let reader = try LibArchive.Reader(path: archive)
        var files = Set<String>()
        var folders = [String: String]()  // a folder, and an entry found inside it
        while let header = try reader.next() {
            guard let relative = try Extractor.safeRelativePath(header.path, stripComponents: options.stripComponents) else { continue }
            if header.type == .file { files.insert(relative) }
            var parts = relative.split(separator: "/").dropLast()
            while !parts.isEmpty {
                folders[parts.joined(separator: "/")] = folders[parts.joined(separator: "/")] ?? relative
                parts = parts.dropLast()
            }
        }
        if let clash = files.sorted().first(where: { folders[$0] != nil }) {
            throw PackagerError(
                .invalidInput,
                "\(archive) holds both a file \(clash) and \(folders[clash]!) in a folder of that name: the folder's redirect and the file would answer the same key",
                subject: clash)
        }
    }

    /// The files of `folder` as writer entries.
    public func entries(forFolder folder: String) throws -> (entries: [RecordedExchange], skipped: [String]) {
        guard HTTPRules.isFetchableURL(options.baseURL), var base = URL(string: options.baseURL) else {
            throw PackagerError(.invalidInput, "the base URL \(options.baseURL) is not an absolute http or https URL")
        }
        if !base.absoluteString.hasSuffix("/") { base = URL(string: base.absoluteString + "/")! }
        let root = URL(fileURLWithPath: folder).standardizedFileURL.resolvingSymlinksInPath().path
        var entries = [RecordedExchange]()
        var skipped = [String]()
        // Walk in a fixed order (bytes of the relative path), so that which index file answers for a folder never depends on the file system.
        var found = [FolderWalker.Item]()
        try FolderWalker(includeHidden: options.includeHidden).walk(root: root, into: &found)
        found.sort { $0.relative.utf8.lexicographicallyPrecedes($1.relative.utf8) }
        // Which index file answers for each folder: the one earliest in the list of index files (index.html before
        // index.htm by default), whatever the byte order of their names.
        var claimant = [Substring: String]()
        for item in found where !item.isSymbolicLink {
            let name = item.relative.split(separator: "/").last.map(String.init) ?? item.relative
            guard let rank = options.indexFiles.firstIndex(of: name) else { continue }
            let folder = item.relative.dropLast(name.count)
            if let current = claimant[folder], let currentRank = options.indexFiles.firstIndex(of: current), currentRank <= rank { continue }
            claimant[folder] = name
        }
        var keys = Set<String>()
        let rootPath = root.hasSuffix("/") ? root : root + "/"
        for item in found {
            let relative = item.relative
            if item.isSymbolicLink {
                skipped.append(relative + " (symbolic link)")
                continue
            }
            let name = relative.split(separator: "/").last.map(String.init) ?? relative
            let path = rootPath + relative
            let encoded = relative.split(separator: "/", omittingEmptySubsequences: false).map { Self.encodeSegment(String($0)) }.joined(separator: "/")
            let url = base.absoluteString + encoded
            let headers = [(name: "content-type", value: contentType(for: name))]
            // A name that is not UTF-8 is keyed by its U+FFFD spelling and read by its own bytes, into memory (a String
            // path cannot name it).
            let body: BundleWriter.BodySource = try item.rawRelative.map { .data(try Self.readFile(root: root, raw: $0)) } ?? .file(path)
            entries.append(RecordedExchange(url: url, headers: headers, body: body, synthesizeETag: true))
            keys.insert(url)
            if claimant[relative.dropLast(name.count)] == name {
                let folderURL = String(url.dropLast(Self.encodeSegment(name).count))
                if keys.insert(folderURL).inserted {
                    entries.append(RecordedExchange(url: folderURL, headers: headers, body: body, synthesizeETag: true))
                    if folderURL != base.absoluteString {
                        // The Location is the folder's canonical key, so every writer spells it the same way (docs/FORMAT.md §5.3).
                        let location = RequestKeyCanonicalizer(dropQueryParameters: options.writer.dropQueryParameters).canonicalize(folderURL) ?? folderURL
                        entries.append(RecordedExchange(url: String(folderURL.dropLast()), status: 301, headers: [(name: "location", value: location)]))
                    }
                }
            }
        }
        return (entries, skipped)
    }

    /// `shown`: the source as the user named it (an archive's extracted copy is a scratch folder).
    private func packFolder(_ folder: String, output: String, shown: String) throws -> Summary {
        let (entries, skipped) = try entries(forFolder: folder)
        // Nothing to answer with: a mistake (the wrong folder, an archive of an empty one), not an empty bundle.
        let hasFile = entries.contains { entry in
            switch entry.body {
            case .file?, .data?: true
            default: false
            }
        }
        if !hasFile {
            throw PackagerError(
                .invalidInput,
                "there is no file to pack in \(shown)\(options.stripComponents > 0 ? " after --strip-components \(options.stripComponents)" : "")"
                    + (options.includeHidden ? "" : " (hidden files are left out without --include-hidden)"))
        }
        var writerOptions = options.writer
        // Files on a static server: the query does not change the answer.
        if options.ignoresQuery, writerOptions.rules.ignoreQuery.isEmpty, let base = RequestKeyCanonicalizer().canonicalize(options.baseURL) {
            writerOptions.rules.ignoreQuery = [base + "*"]
        }
        var writer = BundleWriter(options: writerOptions)
        for entry in entries { writer.add(entry) }
        let write = try writer.write(to: output)
        return Summary(
            files: Set(
                entries.compactMap { entry -> String? in
                    if case .file(let path) = entry.body { return path }
                    return nil
                }
            ).count, skipped: skipped, write: write)
    }

    /// The bytes of the regular file at `root` + `/` + `raw`, not through a symbolic link.
    static func readFile(root: String, raw: [UInt8]) throws -> Data {
        let fd = FolderWalker.withPath(root, raw) { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        let shown = root + "/" + String(decoding: raw, as: UTF8.self)
        guard fd >= 0 else { throw PackagerError(.io, "cannot read \(shown)", subject: shown, cause: SystemCallError(errno)) }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard got >= 0 else { throw PackagerError(.io, "cannot read \(shown)", subject: shown, cause: SystemCallError(errno)) }
            if got == 0 { return data }
            data.append(contentsOf: buffer[0..<got])
        }
    }

    func contentType(for name: String) -> String {
        let type = MediaTypes.mediaType(forPath: name)
        guard let charset = options.charset else { return type }
        let textual =
            type.hasPrefix("text/")
            || ["application/javascript", "application/json", "application/xml", "image/svg+xml", "application/manifest+json", "application/ld+json"].contains(
                type)
        return textual ? "\(type); charset=\(charset)" : type
    }

    private static let segmentAllowed: CharacterSet = {
        var set = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        set.insert(charactersIn: "-._~!$&'()*+,;=:@")
        return set
    }()

    static func encodeSegment(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: segmentAllowed) ?? segment
    }
}

/// Lists the regular files and symbolic links under a folder with POSIX calls (one `readdir` pass per folder, no per-file `stat` when the file system reports types).
struct FolderWalker {
    struct Item {
        /// The path below the root, `/`-separated, read as UTF-8 (invalid sequences as U+FFFD, docs/FORMAT.md §5.3).
        var relative: String
        var isSymbolicLink: Bool
        /// The path below the root as the file system spells it, when that is not valid UTF-8 (`relative` then names
        /// another file, or none): the file is read by these bytes.
        var rawRelative: [UInt8]? = nil
    }

    var includeHidden: Bool

    func walk(root: String, into items: inout [Item]) throws {
        try walk(root: root, relative: "", raw: [], into: &items)
    }

    /// Calls `body` with the C string of `root` + `/` + `raw` (or `root` alone when `raw` is empty).
    static func withPath<T>(_ root: String, _ raw: [UInt8], _ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        let bytes = Array(root.utf8) + (raw.isEmpty ? [] : [UInt8(ascii: "/")] + raw) + [0]
        return try bytes.withUnsafeBufferPointer { buffer in
            try buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) { try body($0) }
        }
    }

    private func walk(root: String, relative: String, raw: [UInt8], into items: inout [Item]) throws {
        let folder = relative.isEmpty ? root : root + "/" + relative
        guard let dir = Self.withPath(root, raw, { opendir($0) }) else {
            throw PackagerError(.io, "cannot read the folder \(folder)", subject: folder, cause: SystemCallError(errno))
        }
        var folders = [(String, [UInt8])]()
        var failure: Int32 = 0
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                failure = errno  // 0 at the end of the folder; otherwise the listing broke off
                break
            }
            let nameBytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
            let name = String(decoding: nameBytes, as: UTF8.self)
            if name == "." || name == ".." { continue }
            if name.hasPrefix("."), name != ".well-known", !includeHidden { continue }
            let path = relative.isEmpty ? name : relative + "/" + name
            let rawPath = raw.isEmpty ? nameBytes : raw + [UInt8(ascii: "/")] + nameBytes
            let exotic = rawPath.elementsEqual(path.utf8) ? nil : rawPath
            var type = Int32(entry.pointee.d_type)
            if type == Int32(DT_UNKNOWN) {
                var info = stat()
                guard Self.withPath(root, rawPath, { lstat($0, &info) }) == 0 else {
                    if errno == ENOENT { continue }  // removed while we listed
                    let error = SystemCallError(errno)
                    closedir(dir)
                    throw PackagerError(.io, "cannot read \(root + "/" + path)", subject: path, cause: error)
                }
                switch info.st_mode & S_IFMT {
                case S_IFDIR: type = Int32(DT_DIR)
                case S_IFREG: type = Int32(DT_REG)
                case S_IFLNK: type = Int32(DT_LNK)
                default: continue
                }
            }
            switch type {
            case Int32(DT_DIR): folders.append((path, rawPath))
            case Int32(DT_REG): items.append(Item(relative: path, isSymbolicLink: false, rawRelative: exotic))
            case Int32(DT_LNK): items.append(Item(relative: path, isSymbolicLink: true, rawRelative: exotic))
            default: continue  // sockets, devices, FIFOs
            }
        }
        // Closed before descending, so a deep tree holds one descriptor at a time.
        closedir(dir)
        if failure != 0 {
            throw PackagerError(.io, "cannot list the folder \(folder)", subject: folder, cause: SystemCallError(failure))
        }
        for (sub, subRaw) in folders { try walk(root: root, relative: sub, raw: subRaw, into: &items) }
    }
}
