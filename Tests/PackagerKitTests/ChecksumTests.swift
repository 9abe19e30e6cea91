import OfflineBundle
import Testing

@testable import PackagerKit

@Suite("CRC-32: the build side's (libdeflate) and the runtime's (zlib) agree")
struct ChecksumTests {
    @Test("the same values, whole and chained piece by piece, the empty input and the standard check value included")
    func sameValues() {
        // The CRC-32 check value of the ASCII digits 1 to 9 (the ZIP and gzip polynomial).
        #expect(FastCRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(FastCRC32.checksum([UInt8]()) == 0 && FastCRC32.checksum([UInt8](), continuing: 0x1234_5678) == 0x1234_5678)
        var generator = SystemRandomNumberGenerator()
        for size in [1, 15, 16, 63, 64, 4096, 1 << 20] {
            let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let whole = CRC32.checksum(bytes)
            #expect(FastCRC32.checksum(bytes) == whole, "\(size) bytes")
            // Chained over pieces cut at random places, as the writer feeds a streamed body.
            var crc: UInt32 = 0
            var at = 0
            while at < size {
                let end = min(size, at + Int.random(in: 1...max(1, size / 3), using: &generator))
                crc = bytes[at..<end].withUnsafeBytes { FastCRC32.checksum($0, continuing: crc) }
                at = end
            }
            #expect(crc == whole, "\(size) bytes in pieces")
        }
    }
}
