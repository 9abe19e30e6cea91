import Foundation
import OfflineBundle
import Testing

@testable import PackagerKit

/// The manifest's times are written by hand; Foundation's formatter is the reference.
@Suite("manifest times")
struct ManifestTimeTests {
    @Test(
        "times written as ISO8601DateFormatter writes them (whole seconds and fractions), from year 1 to 9999 (Julian days before 1583 included), leap days and the epoch's edges included"
    )
    func sameAsFoundation() {
        let formatter = ISO8601DateFormatter()
        var seconds: [Int64] = [0, -1, 1, 86_399, 86_400, 951_782_400, 951_868_799, 1_767_323_045, 253_402_300_799, -62_135_596_800, -2_208_988_800]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { seconds.append(Int64.random(in: -62_135_596_800...253_402_300_799, using: &generator)) }
        for second in seconds {
            let date = Date(timeIntervalSince1970: TimeInterval(second))
            #expect(HTTPDates.iso8601(date) == formatter.string(from: date), "\(second)")
        }
        // Times within a second (a verify report's, a certificate's) drop the fraction as the formatter does.
        for second in seconds.prefix(2_000) {
            let date = Date(timeIntervalSince1970: TimeInterval(second) + Double.random(in: 0.001..<0.999, using: &generator))
            #expect(HTTPDates.iso8601(date) == formatter.string(from: date), "\(date.timeIntervalSince1970)")
        }
        // Outside what is made by hand, the formatter answers.
        let far = Date(timeIntervalSince1970: 300_000_000_000)
        #expect(HTTPDates.iso8601(far) == formatter.string(from: far))
    }

    @Test("HTTP dates: the IMF-fixdate read and written back, spaces around; month names as RFC 9110 writes them")
    func httpDates() throws {
        for text in ["Sun, 06 Nov 1994 08:49:37 GMT", "Thu, 01 Jan 1970 00:00:00 GMT", "Tue, 29 Feb 2000 23:59:59 GMT"] {
            let date = try #require(HTTPDates.parse(" \t" + text + " "))
            #expect(HTTPDates.format(date) == text)
        }
        #expect(HTTPDates.parse("Sun, 06 NOV 1994 08:49:37 GMT") == nil)
        #expect(HTTPDates.parse("Sun, 06 Nox 1994 08:49:37 GMT") == nil)
    }
}

@Suite("RFC 3339 times read by hand, as Foundation's formatter reads them")
struct RFC3339Tests {
    @Test("the same instants as ISO8601DateFormatter (fractions dropped), and nil for what is not RFC 3339")
    func sameAsFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        for text in [
            "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123Z", "2024-02-29T23:59:59+02:00", "1999-12-31T00:00:00-05:30", "2026-11-25T23:18:20.5Z",
            "1970-01-01T00:00:00Z",
        ] {
            let expected = (formatter.date(from: text) ?? plain.date(from: text)).map { $0.timeIntervalSince1970.rounded(.down) }
            #expect(HTTPDates.parseRFC3339(text)?.timeIntervalSince1970 == expected, "\(text)")
        }
        // RFC 3339 allows a lowercase t and z, which Foundation's formatter refuses.
        #expect(HTTPDates.parseRFC3339("1999-12-31t00:00:00.5z") == HTTPDates.parseRFC3339("1999-12-31T00:00:00Z"))
        for text in ["2026-02-30T00:00:00Z", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05", "2026-01-02T25:04:05Z", "2026-01-02T03:04:05+0200", "x"] {
            #expect(HTTPDates.parseRFC3339(text) == nil, "\(text)")
        }
    }
}
