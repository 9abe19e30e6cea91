import ArgumentParser
import PackagerKit

/// `--quiet` and `--verbose`, for the commands whose output can run long (build, verify, refresh).
struct OutputLevel: ParsableArguments {
    @Flag(name: [.short, .long], help: "Print only the outcome (one line, and what failed); warnings still go to standard error.")
    var quiet = false

    @Flag(name: [.short, .long], help: "List every URL of a group (by default a long group shows its first three and a count).")
    var verbose = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("--quiet and --verbose cannot both be given") }
    }
}

/// `(url, reason)` pairs as lines for a person: one line for a reason only one URL has, else the reason once with its
/// URLs beneath (the first few of a long group, all with `all`). An entry not tried because its origin was found down
/// joins the entries that found it so.
func groupedLines(_ items: [(url: String, reason: String)], saying verb: String, all: Bool) -> [String] {
    var lines: [String] = []
    for group in GroupedListing.groups(items, by: { GroupedListing.groupKey($0.reason) }) {
        let reason = GroupedListing.groupReason(group.items.lazy.map(\.reason))
        if group.items.count == 1 {
            lines.append("  \(verb) \(terminalSafe(group.items[0].url)): \(terminalSafe(reason))")
            continue
        }
        lines.append("  \(verb) these \(group.items.count): \(terminalSafe(reason))")
        let (shown, more) = GroupedListing.shown(group.items, all: all)
        for item in shown { lines.append("    " + terminalSafe(item.url)) }
        if more > 0 { lines.append(GroupedListing.moreLine(more, indent: "    ")) }
    }
    return lines
}
