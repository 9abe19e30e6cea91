/// Byte patches (docs/FORMAT.md §12.3): a target made of ranges copied from a source and bytes added, for a delta's
/// `index.bin`, `manifest.json` and changed bodies, whose next version is mostly the last one's bytes.
///
/// ```
/// "PKGDIFF1"  varint source length  varint target length
/// then, until the target is complete:
///   0x00  zigzag varint (offset − end of the last copy)  varint length   copy from the source
///   0x01  varint length  bytes                                          add these bytes
/// ```
package enum BinaryPatch {
    package static let magic = Array("PKGDIFF1".utf8)

    /// The target `patch` makes of `source`.
    ///
    /// - Throws: ``BundleError`` with code `.corruptIndex` when the patch is not one, was made for a source of another
    ///   length, reads outside the source, or makes more or less than its target length (at most `limit` bytes).
    package static func apply(_ patch: [UInt8], to source: [UInt8], limit: Int, what: String) throws -> [UInt8] {
        func fail(_ reason: String) -> BundleError { BundleError(.corruptIndex, "the patch of \(what) is damaged: \(reason)") }
        guard patch.count >= magic.count, patch.starts(with: magic) else { throw fail("no PKGDIFF1 header") }
        var position = magic.count
        func varint() throws -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                guard position < patch.count, shift < 64 else { throw fail("a number runs past the end") }
                let byte = patch[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }
        guard try varint() == UInt64(source.count) else { throw fail("it was made for a source of another length") }
        let length = try varint()
        guard length <= UInt64(limit) else { throw fail("it makes \(length) bytes, over the limit of \(limit)") }
        var target = [UInt8]()
        // What the patch claims is not reserved up front: at most what its source and its own bytes could make plainly.
        target.reserveCapacity(Int(min(length, UInt64(source.count + patch.count))))
        var copied: Int64 = 0
        while target.count < Int(length) {
            guard position < patch.count else { throw fail("it ends before its target is complete") }
            let op = patch[position]
            position += 1
            let count = try varint()
            switch op {
            case 0:
                let zigzag = count
                let delta = Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)
                let run = try varint()
                let (start, overflow) = copied.addingReportingOverflow(delta)
                guard !overflow, start >= 0, run > 0, run <= UInt64(source.count), UInt64(start) <= UInt64(source.count) - run,
                    run <= length - UInt64(target.count)
                else { throw fail("a copy reads outside the source or past the target") }
                target.append(contentsOf: source[Int(start)..<(Int(start) + Int(run))])
                copied = start + Int64(run)
            case 1:
                guard count > 0, count <= UInt64(patch.count - position), count <= length - UInt64(target.count) else {
                    throw fail("added bytes run past the patch or the target")
                }
                target.append(contentsOf: patch[position..<(position + Int(count))])
                position += Int(count)
            default:
                throw fail("unknown operation \(op)")
            }
        }
        guard position == patch.count else { throw fail("bytes follow the complete target") }
        return target
    }
}
