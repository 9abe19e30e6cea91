/// `text` with control characters (escape sequences a hostile bundle or archive could carry into a terminal)
/// shown as `\u{..}` instead of sent raw.
public func terminalSafe(_ text: String) -> String {
    // Printable ASCII, most of what is printed, has no control or format character: no scalar's properties to look up
    // (the lookups were two fifths of listing a large bundle).
    if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return text }
    guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }) else {
        return text
    }
    var out = ""
    for scalar in text.unicodeScalars {
        let category = scalar.properties.generalCategory
        if category == .control || category == .format {
            out += "\\u{" + String(scalar.value, radix: 16) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// Lists for a person: items that share an explanation are printed as one group, and a long group shows its first
/// few items and a count of the rest (`--verbose` lists them all; `--json` always does).
public enum GroupedListing {
    /// Groups of this many items or fewer are listed in full.
    public static let listedInFull = 5
    /// How many items a longer group shows before its count of the rest.
    public static let shownOfLongGroup = 3

    /// `items` grouped by `key`, groups in the order of their first item, items in their order.
    public static func groups<Item>(_ items: [Item], by key: (Item) -> String) -> [(key: String, items: [Item])] {
        var order: [String] = []
        var members: [String: [Item]] = [:]
        for item in items {
            let k = key(item)
            if members[k] == nil { order.append(k) }
            members[k, default: []].append(item)
        }
        return order.map { ($0, members[$0] ?? []) }
    }

    /// The items of one group to print, and how many are left out (0 when `all` or the group is short).
    public static func shown<Item>(_ items: [Item], all: Bool) -> (shown: ArraySlice<Item>, more: Int) {
        if all || items.count <= listedInFull { return (items[...], 0) }
        return (items.prefix(shownOfLongGroup), items.count - shownOfLongGroup)
    }

    /// For a failure because its origin was found down earlier in the run (`not tried: ORIGIN could not be reached
    /// (REASON)`, or `not fetched: …`): the sentence after the prefix, and REASON, what the URL that found the origin
    /// down says; so that the two are one group. Nil for any other reason.
    public static func originDown(_ text: String) -> (sentence: String, reason: String)? {
        guard let prefix = ["not tried: ", "not fetched: "].first(where: text.hasPrefix), text.hasSuffix(")") else { return nil }
        let sentence = text.dropFirst(prefix.count)
        guard let open = sentence.range(of: " could not be reached (") else { return nil }
        return (String(sentence), String(sentence[open.upperBound..<sentence.index(before: sentence.endIndex)]))
    }

    /// The key that groups `reason` with the same reason said of an origin found down (see ``originDown(_:)``).
    public static func groupKey(_ reason: String) -> String { originDown(reason)?.reason ?? reason }

    /// What a group of `reasons` (one key) says: the origin found down, when one of them names it, else the first.
    public static func groupReason(_ reasons: some Sequence<String>) -> String {
        var first: String?
        for reason in reasons {
            if let down = originDown(reason) { return down.sentence }
            if first == nil { first = reason }
        }
        return first ?? ""
    }

    /// `... and 47 more (--verbose lists them)`, indented by `indent`.
    public static func moreLine(_ more: Int, indent: String) -> String {
        "\(indent)... and \(more) more (--verbose lists them)"
    }
}
