import Foundation
import OfflineBundle

extension MountedBundle {
    /// Mounts the bundle at `path` for a tool's pass over all its entries (check, inspect, verify): with `options`, and a
    /// local bundle's `index.bin` past `above` bytes inflated into a mapped scratch file in `folder`
    /// (``Options/indexScratch``), so that the pass's memory does not grow with the entries (about 230 bytes an entry
    /// held otherwise, 230 MB for a million). When that folder cannot hold it (missing, full, read-only: an I/O error),
    /// the index is held in memory, as a service holds it; a bundle that cannot be read fails again, and is reported.
    static func mountedWithIndexAside(
        _ path: String, options: Options, scratchIn folder: String, above: Int = 8 << 20, remote: RemoteOptions?
    ) throws -> MountedBundle {
        var aside = options
        aside.indexScratch = (folder.isEmpty ? "." : folder, above)
        do {
            return try MountedBundle(location: path, options: aside, remote: remote)
        } catch let error as BundleError where error.code == .io && !RemoteOptions.isRemote(path) {
            return try MountedBundle(location: path, options: options, remote: remote)
        }
    }
}
