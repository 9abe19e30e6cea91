/// Whether something watched at regular checks has gone quiet: a count of its activity (requests read, writes done,
/// body bytes received) that did not move for ``checks`` checks in a row. The connection's idle check and its check
/// of a body being held are each one, run by the event loop's timer; the decision is here, without a channel or a
/// clock, so that it can be tested alone.
///
/// With checks half a period apart and two of them, what goes quiet is found between one and one and a half periods
/// after its last activity. Counters, not a timestamp per event: an `IdleStateHandler` that reads the clock on every
/// read and write cost a tenth of the request rate.
struct QuietWatch {
    /// Quiet checks in a row that make it quiet.
    let checks: Int
    private var seen: Int
    private var quiet = 0

    /// Starts watching a count that stands at `activity` now.
    init(activity: Int = 0, checks: Int = 2) {
        self.checks = checks
        seen = activity
    }

    /// One check, with the activity count now: true once it has not moved for ``checks`` checks in a row.
    mutating func check(activity: Int) -> Bool {
        guard activity == seen else {
            seen = activity
            quiet = 0
            return false
        }
        quiet += 1
        return quiet >= checks
    }
}
