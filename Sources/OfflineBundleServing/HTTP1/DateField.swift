import Foundation
import OfflineBundle

/// The `Date` field's value (RFC 9110 §6.6.1), formatted once a second.
struct DateField {
    private var second = 0
    private var text = ""

    /// The value for `now` (`time()`).
    mutating func value(at now: Int) -> String {
        if now != second { (second, text) = (now, HTTPDates.format(Date(timeIntervalSince1970: TimeInterval(now)))) }
        return text
    }
}
