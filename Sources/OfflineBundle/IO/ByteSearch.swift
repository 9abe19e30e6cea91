import Foundation

extension Array where Element == UInt8 {
    /// Whether `needle` occurs in these bytes, found by `memchr` on its first byte (the generic `firstRange(of:)` took
    /// more than half of a 10,000-entry verify).
    package func containsBytes(_ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= count else { return needle.isEmpty }
        return withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                var at = 0
                let last = h.count - n.count
                while at <= last {
                    guard let found = memchr(h.baseAddress! + at, Int32(first), last - at + 1) else { return false }
                    let i = h.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                    if memcmp(h.baseAddress! + i, n.baseAddress!, n.count) == 0 { return true }
                    at = i + 1
                }
                return false
            }
        }
    }
}
