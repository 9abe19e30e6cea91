/// `srcset` candidates, as the HTML standard parses them.
extension LinkExtractor {
    /// The URLs of a `srcset` value, following the standard's "parse a srcset attribute" algorithm.
    ///
    /// A candidate is a run of non-whitespace (trailing commas removed) and optional descriptors up to
    /// the next comma outside parentheses; a comma inside a URL is part of it. Candidates whose
    /// descriptors are invalid (say "2q", or both `w` and `x`) are dropped, as browsers drop them.
    static func srcsetURLs(_ value: String) -> [String] {
        let b = Array(value.utf8)
        let n = b.count
        var i = 0
        var urls: [String] = []
        while true {
            while i < n && (isSpace(b[i]) || b[i] == UInt8(ascii: ",")) { i += 1 }
            guard i < n else { return urls }
            let urlStart = i
            while i < n && !isSpace(b[i]) { i += 1 }
            var urlEnd = i
            var descriptors: [[UInt8]] = []
            if b[urlEnd - 1] == UInt8(ascii: ",") {
                // A URL ending in commas has no descriptors; the commas end the candidate.
                while urlEnd > urlStart && b[urlEnd - 1] == UInt8(ascii: ",") { urlEnd -= 1 }
            } else {
                descriptors = srcsetDescriptors(b, at: &i)
            }
            if urlEnd > urlStart && validDescriptors(descriptors) { urls.append(String(decoding: b[urlStart..<urlEnd], as: UTF8.self)) }
        }
    }

    /// The states of the srcset descriptor tokenizer.
    private enum DescriptorState { case inDescriptor, inParentheses, afterDescriptor }

    /// The descriptor tokenizer of the srcset algorithm; `i` ends past the candidate's comma (or at the end).
    private static func srcsetDescriptors(_ b: [UInt8], at i: inout Int) -> [[UInt8]] {
        let n = b.count
        var descriptors: [[UInt8]] = []
        var current: [UInt8] = []
        var state = DescriptorState.inDescriptor
        while i < n && isSpace(b[i]) { i += 1 }
        while true {
            guard i < n else {
                if !current.isEmpty { descriptors.append(current) }
                return descriptors
            }
            let c = b[i]
            switch state {
            case .inDescriptor:
                if isSpace(c) {
                    if !current.isEmpty { descriptors.append(current) }
                    current = []
                    state = .afterDescriptor
                } else if c == UInt8(ascii: ",") {
                    i += 1
                    if !current.isEmpty { descriptors.append(current) }
                    return descriptors
                } else {
                    if c == UInt8(ascii: "(") { state = .inParentheses }
                    current.append(c)
                }
            case .inParentheses:
                if c == UInt8(ascii: ")") { state = .inDescriptor }
                current.append(c)
            case .afterDescriptor:
                if !isSpace(c) {
                    state = .inDescriptor
                    continue  // reconsume
                }
            }
            i += 1
        }
    }

    /// The descriptor checks of the srcset algorithm: at most one of `Nw` and `Nx`, `Nh` only with `Nw`.
    private static func validDescriptors(_ descriptors: [[UInt8]]) -> Bool {
        var width = false
        var density = false
        var height = false
        for descriptor in descriptors {
            let number = descriptor.dropLast()
            switch descriptor.last {
            case UInt8(ascii: "w"):
                guard !width, !density, isPositiveInteger(number) else { return false }
                width = true
            case UInt8(ascii: "x"):
                guard !width, !density, !height, isNonNegativeFloat(number) else { return false }
                density = true
            case UInt8(ascii: "h"):
                guard !height, !density, isPositiveInteger(number) else { return false }
                height = true
            default:
                return false
            }
        }
        return !height || width
    }

    private static func isPositiveInteger(_ s: ArraySlice<UInt8>) -> Bool {
        !s.isEmpty && s.allSatisfy(isDigit) && s.contains { $0 != UInt8(ascii: "0") }
    }

    /// A valid floating-point number (`-`? digits? (`.` digits)? exponent?) that is not below zero.
    private static func isNonNegativeFloat(_ s: ArraySlice<UInt8>) -> Bool {
        var i = s.startIndex
        let negative = i < s.endIndex && s[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let integerStart = i
        while i < s.endIndex && isDigit(s[i]) { i += 1 }
        var mantissaDigits = s[integerStart..<i]
        if i < s.endIndex && s[i] == UInt8(ascii: ".") {
            i += 1
            let fractionStart = i
            while i < s.endIndex && isDigit(s[i]) { i += 1 }
            guard i > fractionStart else { return false }
            mantissaDigits = s[integerStart..<i]
        }
        guard mantissaDigits.contains(where: isDigit) else { return false }
        if i < s.endIndex && (s[i] == UInt8(ascii: "e") || s[i] == UInt8(ascii: "E")) {
            i += 1
            if i < s.endIndex && (s[i] == UInt8(ascii: "-") || s[i] == UInt8(ascii: "+")) { i += 1 }
            let exponentStart = i
            while i < s.endIndex && isDigit(s[i]) { i += 1 }
            guard i > exponentStart else { return false }
        }
        guard i == s.endIndex else { return false }
        // "-0" is zero, which is allowed; any other negative number is not.
        return !negative || !mantissaDigits.contains { isDigit($0) && $0 != UInt8(ascii: "0") }
    }
}
