import Foundation

extension MountedBundle {
    /// Hands `body` the entry's body, checked, in chunks of at most `chunkSize` bytes: for what writes a body out
    /// (an export) without holding it whole. A chunk that fails its check throws before it is handed over.
    package func forEachBodyChunk(of entry: BundleEntry, chunkSize: Int = 1 << 20, _ body: (Data) throws -> Void) throws {
        guard let record = entry.body, record.size > 0 else { return }
        let reader = BodyReader(bundle: self, bodyIndex: record.index, shape: .identity, chunkSize: max(1, min(chunkSize, Int(record.size))))
        while let chunk = try reader.next() { try body(chunk) }
    }
}
