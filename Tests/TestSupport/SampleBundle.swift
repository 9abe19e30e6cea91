import Crypto
import Foundation
import OfflineBundle
import PackagerKit

/// The page every runtime test serves.
public let samplePage = String(repeating: "<p>Offline and fine.</p>\n", count: 400)
/// An incompressible body, stored as is, for Range tests.
public let sampleImage = noise(50_000, seed: 11)

/// Writes a bundle for `origin` (like `http://127.0.0.1:PORT`) with a page, an image, a redirect, a blocked script and a recorded 404.
@discardableResult
public func writeSampleBundle(origin: String, to path: String, signingKey: Curve25519.Signing.PrivateKey? = nil) throws -> BundleWriter.Summary {
    var writer = BundleWriter(options: .init(signingKey: signingKey))
    writer.add(
        .init(
            url: origin + "/",
            headers: [
                ("content-type", "text/html; charset=utf-8"), ("etag", "\"page-v1\""), ("last-modified", "Sat, 21 Nov 2026 10:00:00 GMT"),
                ("cache-control", "max-age=300"),
            ], body: .data(Data(samplePage.utf8))))
    writer.add(.init(url: origin + "/logo.png", headers: [("content-type", "image/png"), ("etag", "\"logo-1\"")], body: .data(sampleImage)))
    writer.add(.init(url: origin + "/old", status: 301, headers: [("location", "/")]))
    writer.add(.init(url: origin + "/ads.js", status: 204, kind: .blocked))
    writer.add(.init(url: origin + "/gone.html", status: 404, headers: [("content-type", "text/html")], body: .data(Data("<h1>Not here</h1>".utf8))))
    return try writer.write(to: path)
}

/// Writes a bundle of `bodies` by URL, each `application/octet-stream`.
public func writeBundle(_ bodies: [String: Data], to path: String) throws {
    var writer = BundleWriter()
    for (url, body) in bodies { writer.add(.init(url: url, headers: [("content-type", "application/octet-stream")], body: .data(body))) }
    _ = try writer.write(to: path)
}

/// gunzip, through the gzip tool.
public func gunzip(_ data: Data) throws -> Data {
    let folder = try TemporaryFolder()
    try data.write(to: URL(fileURLWithPath: folder.path + "/x.gz"))
    _ = try run("gzip", ["-d", folder.path + "/x.gz"])
    return try Data(contentsOf: URL(fileURLWithPath: folder.path + "/x"))
}

/// A live origin that answers `/` ("live page") and `/only-live.txt`, and the sample bundle recorded for it, for the
/// tests of the network policies; the origin is stopped when `body` returns.
public func withLiveSiteAndBundle<T>(_ body: (Origin, MountedBundle) async throws -> T) async throws -> T {
    try await withOrigin { live in
        live.set("/", .text("live page", type: "text/html"))
        live.set("/only-live.txt", .text("only on the network", type: "text/plain"))
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: live.base, to: folder.path + "/b.zip")
        return try await body(live, try MountedBundle(path: folder.path + "/b.zip"))
    }
}

/// Runs `body` with `packager serve BUNDLE` started on a free port (its base URL and process), and stops it after.
public func withServe<T>(_ bundle: String, _ extra: [String] = [], _ body: (String, Process) async throws -> T) async throws -> T {
    let (process, base) = try await startServe(bundle, extra)
    defer {
        process.terminate()
        process.waitUntilExit()
    }
    return try await body(base, process)
}
