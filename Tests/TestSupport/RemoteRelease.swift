import Foundation
import OfflineBundle
import OfflineBundleHTTPClient

/// nginx serving a folder of bundles, mounted back by their URLs: what a test needs to put the shared table's
/// release where a fleet would read it (`runtimeLoader(…, mountRelease: remote.mount)`).
public final class RemoteRelease: Sendable {
    public let server: RealServer
    let root: String
    let options: RemoteOptions

    init(server: RealServer, root: String, options: RemoteOptions) {
        self.server = server
        self.root = root
        self.options = options
    }

    /// Starts nginx on a free port, serving a folder in `folder`, with a cache folder beside it.
    public static func start(in folder: TemporaryFolder) async throws -> RemoteRelease {
        let root = folder.path + "/served"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/served-state")
        let options = RemoteOptions(transport: try HTTPClientRemoteTransport(connectTimeout: .seconds(5)), cacheDirectory: folder.path + "/remote-cache")
        return RemoteRelease(server: server, root: root, options: options)
    }

    /// Copies the bundle at `path` under the server's root and mounts it from there by its URL.
    public func mount(_ path: String) throws -> MountedBundle { try mount(path, options: MountedBundle.Options()) }

    /// ``mount(_:)`` with mount options (a required key).
    public func mount(_ path: String, options: MountedBundle.Options) throws -> MountedBundle {
        let name = URL(fileURLWithPath: path).lastPathComponent
        try? FileManager.default.removeItem(atPath: root + "/" + name)
        try FileManager.default.copyItem(atPath: path, toPath: root + "/" + name)
        return try MountedBundle(url: server.base + "/" + name, remote: self.options, options: options)
    }

    public func stop() { server.stop() }
}
