import Foundation

/// HTTP dates (RFC 9110 §5.6.7), parsed by the grammar and nothing else: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the form every current server sends, and the two obsolete forms a recipient must accept, RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Names are case-sensitive as the
/// grammar writes them (`Nov`, `GMT`); the fields must be in range (day within its month, hour ≤ 23, minute ≤ 59,
/// second ≤ 60 for a leap second, read as 59); the weekday is not checked against the date. A two-digit RFC 850 year
/// is the most recent year with those digits that is not more than 50 years ahead of `now`. Anything else is no date.
package enum HTTPDates {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

    package static func parse(_ text: String) -> Date? { parse(text, now: Date()) }

    /// `text` as an HTTP date, reading a two-digit RFC 850 year relative to `now`.
    package static func parse(_ text: String, now: Date) -> Date? {
        let b = Array(Substring(text).trimmingWhitespace().utf8)
        func number(_ r: Range<Int>) -> Int? {
            guard r.upperBound <= b.count else { return nil }
            var n = 0
            for i in r {
                guard b[i] >= 48 && b[i] <= 57 else { return nil }
                n = n * 10 + Int(b[i] - 48)
            }
            return n
        }
        func word(_ r: Range<Int>, in names: [String]) -> Int? {
            guard r.upperBound <= b.count else { return nil }
            return names.firstIndex { $0.utf8.elementsEqual(b[r]) }
        }
        func byte(_ i: Int, _ c: Character) -> Bool { i < b.count && b[i] == c.asciiValue! }
        /// `HH:MM:SS` at `i`.
        func time(_ i: Int) -> (Int, Int, Int)? {
            guard byte(i + 2, ":"), byte(i + 5, ":"), let h = number(i..<(i + 2)), let m = number((i + 3)..<(i + 5)),
                let s = number((i + 6)..<(i + 8)), h <= 23, m <= 59, s <= 60
            else { return nil }
            return (h, m, min(s, 59))
        }
        func date(_ year: Int, _ month: Int, _ day: Int, _ t: (Int, Int, Int)) -> Date? {
            guard (1...daysIn(month: month + 1, year: year)).contains(day) else { return nil }
            let seconds = daysFromCivil(year, month + 1, day) * 86400 + t.0 * 3600 + t.1 * 60 + t.2
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        // IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
        if b.count == 29, word(0..<3, in: days) != nil, byte(3, ","), byte(4, " "), byte(7, " "), byte(11, " "), byte(16, " "), byte(25, " "),
            b[26...].elementsEqual("GMT".utf8), let day = number(5..<7), let month = word(8..<11, in: months), let year = number(12..<16),
            let t = time(17)
        {
            return date(year, month, day, t)
        }
        // asctime: `Sun Nov  6 08:49:37 1994` (a one-digit day after a space).
        if b.count == 24, word(0..<3, in: days) != nil, byte(3, " "), let month = word(4..<7, in: months), byte(7, " "),
            let day = byte(8, " ") ? number(9..<10) : number(8..<10), byte(10, " "), let t = time(11), byte(19, " "), let year = number(20..<24)
        {
            return date(year, month, day, t)
        }
        // RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`.
        if let comma = b.firstIndex(of: UInt8(ascii: ",")), word(0..<comma, in: longDays) != nil, b.count == comma + 24, byte(comma + 1, " "),
            let day = number((comma + 2)..<(comma + 4)), byte(comma + 4, "-"), let month = word((comma + 5)..<(comma + 8), in: months),
            byte(comma + 8, "-"), let yy = number((comma + 9)..<(comma + 11)), byte(comma + 11, " "), let t = time(comma + 12),
            byte(comma + 20, " "), b[(comma + 21)...].elementsEqual("GMT".utf8)
        {
            // RFC 9110 §5.6.7: more than 50 years ahead means the most recent past year with those digits.
            let thisYear = civil(Int(now.timeIntervalSince1970)).year
            var year = thisYear - thisYear % 100 + yy
            if year > thisYear + 50 { year -= 100 }
            return date(year, month, day, t)
        }
        return nil
    }

    /// Days in `month` (1–12) of `year` (proleptic Gregorian).
    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// A date as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP sends (RFC 9110 §5.6.7).
    package static func format(_ date: Date) -> String {
        let t = civil(Int(date.timeIntervalSince1970.rounded(.down)))
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][t.weekday]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let monthName = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][t.month - 1]
        return "\(weekday), \(two(t.day)) \(monthName) \(t.year) \(two(t.hour)):\(two(t.minute)):\(two(t.second)) GMT"
    }

    /// The UTC calendar date and time of `seconds` since 1970-01-01 (proleptic Gregorian); `weekday` counts from
    /// Thursday, the weekday of 1970-01-01, as 0.
    package static func civil(_ seconds: Int) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, weekday: Int) {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        // Civil date from days since 1970-01-01 (the inverse of daysFromCivil).
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let dayOfEra = z - era * 146097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60, ((days % 7) + 7) % 7)
    }

    /// A time as Foundation's `ISO8601DateFormatter` writes it by default (`2026-11-23T22:57:16Z`: UTC, the fraction of
    /// a second dropped), made by hand for the years 1583 to 9999; outside them (where the formatter counts days in the
    /// Julian calendar, or years in more digits) the formatter writes it. Making the formatter costs about a millisecond
    /// of ICU set-up, a twentieth of a small `packager verify`, and formatting took a sixth of the bundle writer's time.
    package static func iso8601(_ date: Date) -> String {
        let t = date.timeIntervalSince1970.rounded(.down)
        guard t >= -12_000_000_000, t <= 254_000_000_000, case let c = civil(Int(t)), (1583...9999).contains(c.year) else {
            return ISO8601DateFormatter().string(from: date)
        }
        var out = [UInt8]()
        out.reserveCapacity(20)
        // Each field, then the character that follows it.
        for (value, width, then) in [(c.year, 4, "-"), (c.month, 2, "-"), (c.day, 2, "T"), (c.hour, 2, ":"), (c.minute, 2, ":"), (c.second, 2, "Z")]
            as [(Int, Int, Unicode.Scalar)]
        {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
            out.append(UInt8(ascii: then))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An RFC 3339 time (`2026-01-02T03:04:05.123Z`, `…+02:00`), as HAR and manifests write them, read by hand (ICU's
    /// formatter took a third of the time of packing a recording); fractions of a second are dropped. Nil for
    /// anything else.
    package static func parseRFC3339(_ text: String) -> Date? {
        let b = Array(text.utf8)
        func number(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= b.count else { return nil }
            var n = 0
            for c in b[at..<(at + count)] {
                guard c >= 0x30 && c <= 0x39 else { return nil }
                n = n * 10 + Int(c - 0x30)
            }
            return n
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] | 0x20 == UInt8(ascii: "t"), b[13] == UInt8(ascii: ":"),
            b[16] == UInt8(ascii: ":"), let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        var i = 19
        if b[i] == UInt8(ascii: ".") {
            i += 1
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] | 0x20 == UInt8(ascii: "z") {
            guard i + 1 == b.count else { return nil }
        } else {
            guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), i + 6 == b.count, b[i + 3] == UInt8(ascii: ":"),
                let hours = number(i + 1, 2), let minutes = number(i + 4, 2)
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (b[i] == UInt8(ascii: "+") ? 1 : -1)
        }
        let seconds = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146097 + dayOfEra - 719468
    }
}
