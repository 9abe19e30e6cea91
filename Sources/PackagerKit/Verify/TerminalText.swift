/// `text` with control characters (escape sequences a hostile bundle or archive could carry into a terminal)
/// shown as `\u{..}` instead of sent raw.
public func terminalSafe(_ text: String) -> String {
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
