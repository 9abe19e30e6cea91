import Testing

@testable import OfflineBundle

@Suite("Media types")
struct MediaTypesTests {
    @Test(
        "Lookup by extension",
        arguments: [
            ("html", "text/html"),
            ("HTM", "text/html"),
            ("css", "text/css"),
            ("mjs", "text/javascript"),
            ("json", "application/json"),
            ("webmanifest", "application/manifest+json"),
            ("svg", "image/svg+xml"),
            ("Jpeg", "image/jpeg"),
            ("webp", "image/webp"),
            ("woff2", "font/woff2"),
            ("wasm", "application/wasm"),
            ("ts", "video/mp2t"),
            ("m3u8", "application/vnd.apple.mpegurl"),
            ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
            ("7z", "application/x-7z-compressed"),
            (".png", "image/png"),
        ])
    func lookupByExtension(ext: String, expected: String) {
        #expect(MediaTypes.mediaType(forExtension: ext) == expected)
    }

    @Test("Unknown extensions give nil", arguments: ["", ".", "nosuchext", "tar.gz"])
    func unknownExtension(ext: String) {
        #expect(MediaTypes.mediaType(forExtension: ext) == nil)
    }

    @Test(
        "Lookup by path",
        arguments: [
            ("index.html", "text/html"),
            ("assets/app.min.js", "text/javascript"),
            ("a/b.tar.gz", "application/gzip"),
            ("Fonts/Inter.TTF", "font/ttf"),
            ("docs/.hidden.txt", "text/plain"),
            ("noext", "application/octet-stream"),
            (".hidden", "application/octet-stream"),
            ("dir.d/Makefile", "application/octet-stream"),
            ("trailing.", "application/octet-stream"),
            ("data.unknownext", "application/octet-stream"),
            ("", "application/octet-stream"),
        ])
    func lookupByPath(path: String, expected: String) {
        #expect(MediaTypes.mediaType(forPath: path) == expected)
    }

    @Test(
        "Compressibility",
        arguments: [
            ("text/html; charset=utf-8", true),
            ("TEXT/CSS", true),
            (" application/json ", true),
            ("application/vnd.api+json; charset=utf-8", true),
            ("application/atom+xml", true),
            ("image/svg+xml", true),
            ("text/javascript", true),
            ("application/wasm", true),
            ("font/ttf", true),
            ("application/vnd.ms-fontobject", true),
            ("image/bmp", true),
            ("audio/wav", true),
            ("application/x-tar", true),
            ("image/png", false),
            ("image/jpeg", false),
            ("font/woff2", false),
            ("application/pdf", false),
            ("application/zip", false),
            ("application/epub+zip", false),
            ("application/gzip", false),
            ("video/mp4", false),
            ("audio/mpeg", false),
            ("application/octet-stream", false),
            ("", false),
            ("text", false),
        ])
    func compressibility(mediaType: String, expected: Bool) {
        #expect(MediaTypes.isCompressible(mediaType) == expected)
    }

    @Test("Every table entry is lowercase and well formed")
    func tableIsWellFormed() {
        #expect(MediaTypes.byExtension.count >= 150)
        for (ext, type) in MediaTypes.byExtension {
            #expect(ext == ext.lowercased(), "key \(ext) is not lowercase")
            #expect(!ext.hasPrefix("."), "key \(ext) has a dot")
            #expect(type.split(separator: "/").count == 2, "\(ext) maps to \(type)")
            #expect(!type.contains(";"), "\(ext) maps to \(type) with parameters")
        }
    }

    @Test("Every extension found by path as by extension")
    func pathAgreesWithExtension() {
        for (ext, type) in MediaTypes.byExtension {
            #expect(MediaTypes.mediaType(forPath: "dir/file.\(ext.uppercased())") == type)
        }
    }
}
