// One file past 600 lines on purpose: the tokenizer is one state machine (WHATWG §13.2.5), its states one switch over
// one buffer; split across files, a reader would follow each transition through several. Character references live
// apart (HTMLTokenizer+CharacterReferences.swift).

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A token the HTML tokenizer hands out: only what link discovery needs.
enum HTMLToken: Sendable, Equatable {
    /// One attribute of a start tag; the name is ASCII-lowercased, the value has its character references decoded.
    struct Attribute: Sendable, Equatable {
        var name: String
        var value: String
    }

    case startTag(name: String, attributes: [Attribute], selfClosing: Bool)
    case endTag(name: String)
    /// The whole text content of a raw text or RCDATA element (RCDATA text has its character references decoded).
    case rawText(element: String, text: String)
}

/// Splits HTML bytes into start tags, end tags and the text of chosen raw text elements.
///
/// It follows the tokenization states of the WHATWG HTML standard for tags, attributes, comments,
/// bogus comments and DOCTYPEs, and the tree builder's switches into RAWTEXT (`style`, `xmp`,
/// `iframe`, `noembed`, `noframes`), RCDATA (`title`, `textarea`), script data (`script`, with its
/// escaped and double-escaped states) and PLAINTEXT. Text outside those elements is skipped rather
/// than emitted. Simplifications: foreign content (SVG, MathML) is not tracked, so a `<style>` or
/// `<title>` inside `<svg>` is still treated as raw text, and `<noscript>` is tokenized as markup
/// (as with scripting disabled), which exposes its fallback images. Every state consumes input or
/// moves to a state that does, so any input ends in linear time.
///
/// Over 600 lines on purpose: the states mirror the specification's, one after another, and share private cursor
/// state that other files could not reach without widening it; the character references, which share nothing, are in
/// HTMLTokenizer+CharacterReferences.swift.
struct HTMLTokenizer {
    private let bytes: [UInt8]
    private var pos = 0
    /// Set after a start tag that switches the tokenizer out of the data state.
    private var pendingContent: Content?
    private let textElements: Set<String>
    /// Whether start tags switch the content model as the tree builder would (`<script>`, `<style>`, `<title>`…).
    private let switchesContentModel: Bool
    /// The attributes start tags report; nil for all. Others are still tokenized, as they must be, but no string is
    /// made of them: on real pages most attributes are `class` and `id`.
    private let attributeFilter: NameSet?
    /// The start tags reported; nil for every tag, end tags included. Other tags are still tokenized (and still switch
    /// the content model), but make no token and no string: on real pages most tags are `span`, `div` and `p`.
    private let tagFilter: TagFilter?
    /// Whether the filter names the tag being tokenized (always, without a filter). A tag it does not name is reported
    /// only when it has one of ``TagFilter/anyTagAttributes``.
    private var tagWanted = true
    /// The tag under construction: its attribute in progress, and the attributes kept so far.
    private var current = CurrentAttribute()
    private var attributes: [HTMLToken.Attribute] = []
    /// Built once a tag has many attributes, so duplicate checks stay linear on hostile input.
    private var seenNames: Set<String>?

    /// - Parameter textElements: elements whose raw text or RCDATA content is emitted as `rawText`.
    /// - Parameter attributeNames: the attributes reported; nil for all.
    /// - Parameter tags: the start tags reported; nil for every start and end tag.
    init(_ bytes: [UInt8], emittingTextOf textElements: Set<String> = ["style"], attributeNames: Set<[UInt8]>? = nil, tags: TagFilter? = nil) {
        self.init(bytes, emittingTextOf: textElements, switchesContentModel: true, initialState: nil, attributeNames: attributeNames, tags: tags)
    }

    /// Which start tags a tokenizer reports: those named, and any other that has one of the attributes named (a
    /// `style` attribute can hold URLs on any element). End tags are not reported.
    struct TagFilter {
        let names: NameSet
        let anyTagAttributes: NameSet

        init(names: Set<[UInt8]>, anyTagAttributes: Set<[UInt8]>) {
            self.names = NameSet(names)
            self.anyTagAttributes = NameSet(anyTagAttributes)
        }
    }

    /// The state a tokenizer starts in, for running the html5lib tokenizer tests (which start some inputs inside an
    /// element's content, and never let a start tag switch the state).
    enum InitialState {
        case rawText(element: String)
        case rcdata(element: String)
        case scriptData, plaintext
    }

    /// A tokenizer as the html5lib tokenizer tests define one: no tree builder switching states after a start tag,
    /// and optionally starting inside an element's content.
    init(
        _ bytes: [UInt8], emittingTextOf textElements: Set<String>, switchesContentModel: Bool, initialState: InitialState?,
        attributeNames: Set<[UInt8]>? = nil, tags: TagFilter? = nil
    ) {
        self.attributeFilter = attributeNames.map(NameSet.init)
        self.tagFilter = tags
        // The standard's input preprocessing turns CR LF and lone CR into LF; doing it once keeps every state simple.
        let hasCR = bytes.withUnsafeBufferPointer { all in all.baseAddress.map { memchr($0, 0x0D, all.count) != nil } ?? false }
        self.bytes = hasCR ? Self.normalizingNewlines(bytes) : bytes
        self.textElements = textElements
        self.switchesContentModel = switchesContentModel
        switch initialState {
        case .rawText(let element): pendingContent = .rawText(element)
        case .rcdata(let element): pendingContent = .rcdata(element)
        case .scriptData: pendingContent = .script
        case .plaintext: pendingContent = .plaintext
        case nil: pendingContent = nil
        }
    }

    /// What follows a start tag that switches the tokenizer: the element's content model.
    private enum Content {
        case rawText(String)
        case rcdata(String)
        case script, plaintext

        var element: String {
            switch self {
            case .rawText(let name), .rcdata(let name): name
            case .script: "script"
            case .plaintext: "plaintext"
            }
        }
    }

    /// The next token, or nil at the end of the input.
    mutating func next() -> HTMLToken? {
        while pos < bytes.count {
            if let content = pendingContent {
                pendingContent = nil
                if let token = consumeContent(content) { return token }
                continue
            }
            // Data state: only a '<' can start anything the caller wants.
            let from = pos
            guard
                let i = bytes.withUnsafeBufferPointer({ all in
                    memchr(all.baseAddress! + from, Int32(UInt8(ascii: "<")), all.count - from).map {
                        UnsafeRawPointer(all.baseAddress!).distance(to: UnsafeRawPointer($0))
                    }
                })
            else { break }
            pos = i + 1
            if let token = tagOpen() { return token }
        }
        pos = bytes.count
        return nil
    }

    // MARK: - Markup

    /// The tag open state; `pos` is just past the '<'.
    private mutating func tagOpen() -> HTMLToken? {
        guard pos < bytes.count else { return nil }
        let c = bytes[pos]
        if c == UInt8(ascii: "!") {
            pos += 1
            markupDeclarationOpen()
            return nil
        }
        if c == UInt8(ascii: "/") {
            pos += 1
            guard pos < bytes.count else { return nil }
            let d = bytes[pos]
            if Self.isAlpha(d) { return tag(isEnd: true) }
            if d == UInt8(ascii: ">") {
                pos += 1  // "</>" is dropped
                return nil
            }
            skipBogusComment()
            return nil
        }
        if Self.isAlpha(c) { return tag(isEnd: false) }
        if c == UInt8(ascii: "?") { skipBogusComment() }
        // Anything else: the '<' was text, and c is reconsumed in the data state.
        return nil
    }

    /// The markup declaration open state; `pos` is just past "<!".
    private mutating func markupDeclarationOpen() {
        if hasPrefix("--", caseInsensitive: false) {
            pos += 2
            skipComment()
        } else if hasPrefix("doctype", caseInsensitive: true) {
            // Every DOCTYPE state ends at the first '>', even inside a quoted identifier.
            pos += 7
            skipBogusComment()
        } else {
            // Includes "[CDATA[", which is a bogus comment outside foreign content.
            skipBogusComment()
        }
    }

    /// The comment states; `pos` is just past "<!--".
    private mutating func skipComment() {
        let n = bytes.count
        // "<!-->" and "<!--->" are complete (abruptly closed) empty comments.
        if pos < n && bytes[pos] == UInt8(ascii: ">") {
            pos += 1
            return
        }
        if pos + 1 < n && bytes[pos] == UInt8(ascii: "-") && bytes[pos + 1] == UInt8(ascii: ">") {
            pos += 2
            return
        }
        // Otherwise the comment states end at the first "-->" or "--!>"; the nested "<!--" states only report errors.
        var i = pos
        while i + 2 < n {
            if bytes[i] == UInt8(ascii: "-") && bytes[i + 1] == UInt8(ascii: "-") {
                if bytes[i + 2] == UInt8(ascii: ">") {
                    pos = i + 3
                    return
                }
                if bytes[i + 2] == UInt8(ascii: "!") && i + 3 < n && bytes[i + 3] == UInt8(ascii: ">") {
                    pos = i + 4
                    return
                }
            }
            i += 1
        }
        pos = n
    }

    /// The bogus comment state: everything up to and including the next '>'.
    private mutating func skipBogusComment() {
        while pos < bytes.count && bytes[pos] != UInt8(ascii: ">") { pos += 1 }
        if pos < bytes.count { pos += 1 }
    }

    private func hasPrefix(_ literal: StaticString, caseInsensitive: Bool) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard pos + count <= bytes.count else { return false }
        let start = literal.utf8Start
        for k in 0..<count {
            let b = caseInsensitive ? Self.lowered(bytes[pos + k]) : bytes[pos + k]
            if b != start[k] { return false }
        }
        return true
    }

    // MARK: - Tags

    /// The tokenizer states inside a tag, named as in the standard.
    private enum TagState {
        case beforeAttributeName, attributeName, afterAttributeName, beforeAttributeValue
        case doubleQuotedValue, singleQuotedValue, unquotedValue, afterQuotedValue, selfClosingStartTag
    }

    /// The tag states from "tag name" on; `pos` is at the name's first letter. Nil when the input ends inside the tag, which drops it.
    ///
    /// Names and values are runs of the input: a name is kept as its range, and a value as its range until a
    /// character reference or a NUL makes it differ from the input. Strings are made only for the attributes the caller
    /// asked for, and the scratch storage is reused from tag to tag, so a tag the caller does not want costs no
    /// allocation.
    private mutating func tag(isEnd: Bool) -> HTMLToken? {
        let n = bytes.count
        // The tag name state: a run up to whitespace, '/' or '>'.
        let nameStart = pos
        var i = pos
        while i < n, !Self.endsName(bytes[i]) { i += 1 }
        guard i < n else {
            pos = n
            return nil
        }
        let nameBytes = bytes[nameStart..<i]
        pos = i
        tagWanted = tagFilter.map { !isEnd && $0.names.contains(nameBytes) } ?? true
        let content = !isEnd && switchesContentModel ? Self.contentModel(of: nameBytes) : nil
        current.reset(keepsAttributes: !isEnd)
        var state = TagState.beforeAttributeName
        while pos < n {
            let c = bytes[pos]
            switch state {
            case .beforeAttributeName:
                if Self.isSpace(c) {
                    pos += 1
                } else if c == UInt8(ascii: "/") || c == UInt8(ascii: ">") {
                    state = .afterAttributeName
                } else {
                    // A leading '=' starts the attribute's name.
                    finishAttribute()
                    current.nameStart = pos
                    if c == UInt8(ascii: "=") { pos += 1 }
                    state = .attributeName
                }
            case .attributeName:
                var end = pos
                while end < n {
                    let b = bytes[end]
                    if Self.isSpace(b) || b == UInt8(ascii: "/") || b == UInt8(ascii: ">") || b == UInt8(ascii: "=") { break }
                    end += 1
                }
                pos = end
                startAttribute(nameEnd: end)
                guard end < n else { break }
                if bytes[end] == UInt8(ascii: "=") {
                    state = .beforeAttributeValue
                    pos += 1
                } else {
                    state = .afterAttributeName
                }
            case .afterAttributeName:
                if Self.isSpace(c) {
                    pos += 1
                } else if c == UInt8(ascii: "/") {
                    state = .selfClosingStartTag
                    pos += 1
                } else if c == UInt8(ascii: "=") {
                    state = .beforeAttributeValue
                    pos += 1
                } else if c == UInt8(ascii: ">") {
                    pos += 1
                    return emit(nameBytes, content, isEnd: isEnd, selfClosing: false)
                } else {
                    finishAttribute()
                    current.nameStart = pos
                    state = .attributeName
                }
            case .beforeAttributeValue:
                if Self.isSpace(c) {
                    pos += 1
                } else if c == UInt8(ascii: "\"") {
                    state = .doubleQuotedValue
                    pos += 1
                } else if c == UInt8(ascii: "'") {
                    state = .singleQuotedValue
                    pos += 1
                } else if c == UInt8(ascii: ">") {
                    pos += 1
                    return emit(nameBytes, content, isEnd: isEnd, selfClosing: false)
                } else {
                    state = .unquotedValue
                }
            case .doubleQuotedValue, .singleQuotedValue:
                quotedValue(&state)
            case .unquotedValue:
                // A run of plain bytes, then whitespace, '>', a character reference or a NUL.
                var end = pos
                while end < n {
                    let b = bytes[end]
                    if Self.isSpace(b) || b == UInt8(ascii: ">") || b == UInt8(ascii: "&") || b == 0 { break }
                    end += 1
                }
                appendValue(pos..<end)
                pos = end
                guard end < n else { break }
                let b = bytes[end]
                if Self.isSpace(b) {
                    state = .beforeAttributeName
                    pos += 1
                } else if b == UInt8(ascii: ">") {
                    pos += 1
                    return emit(nameBytes, content, isEnd: isEnd, selfClosing: false)
                } else {
                    specialValueByte()
                }
            case .afterQuotedValue:
                if Self.isSpace(c) {
                    state = .beforeAttributeName
                    pos += 1
                } else if c == UInt8(ascii: "/") {
                    state = .selfClosingStartTag
                    pos += 1
                } else if c == UInt8(ascii: ">") {
                    pos += 1
                    return emit(nameBytes, content, isEnd: isEnd, selfClosing: false)
                } else {
                    state = .beforeAttributeName
                }
            case .selfClosingStartTag:
                if c == UInt8(ascii: ">") {
                    pos += 1
                    return emit(nameBytes, content, isEnd: isEnd, selfClosing: true)
                }
                state = .beforeAttributeName
            }
        }
        // End of input inside a tag: the standard emits nothing for it.
        current.reset(keepsAttributes: false)
        return nil
    }

    /// The attribute value (double- or single-quoted) states: a run of plain bytes, then the quote, a character
    /// reference or a NUL.
    private mutating func quotedValue(_ state: inout TagState) {
        let n = bytes.count
        let quote = state == .doubleQuotedValue ? UInt8(ascii: "\"") : UInt8(ascii: "'")
        var end = pos
        if current.keeps {
            while end < n {
                let b = bytes[end]
                if b == quote || b == UInt8(ascii: "&") || b == 0 { break }
                end += 1
            }
            appendValue(pos..<end)
        } else {
            // A value nobody asked for: character references never consume a quote, so it ends at the next one.
            while end < n && bytes[end] != quote { end += 1 }
        }
        pos = end
        guard pos < n else { return }
        if bytes[pos] == quote {
            state = .afterQuotedValue
            pos += 1
        } else {
            specialValueByte()
        }
    }

    /// A '&' (a character reference) or a NUL (U+FFFD) in an attribute value, at `pos`.
    private mutating func specialValueByte() {
        guard current.keeps else {
            // Neither changes where the value ends.
            pos += 1
            return
        }
        current.moveValueToBuffer(from: bytes)
        if bytes[pos] == UInt8(ascii: "&") {
            Self.characterReference(in: bytes, at: &pos, into: &current.buffer, inAttribute: true)
        } else {
            current.buffer.append(contentsOf: Self.replacementCharacter)
            pos += 1
        }
    }

    /// Adds a run of the input to the value of the attribute under construction.
    @inline(__always) private mutating func appendValue(_ run: Range<Int>) {
        guard current.keeps, !run.isEmpty else { return }
        if current.inBuffer {
            current.buffer.append(contentsOf: bytes[run])
        } else if current.value.isEmpty {
            current.value = run
        } else {
            current.moveValueToBuffer(from: bytes)
            current.buffer.append(contentsOf: bytes[run])
        }
    }

    /// The attribute whose name is `bytes[current.nameStart..<nameEnd]` starts: whether it is kept is decided here.
    private mutating func startAttribute(nameEnd: Int) {
        current.hasAttribute = true
        current.nameEnd = nameEnd
        current.value = 0..<0
        current.inBuffer = false
        guard current.keepsAttributes else {
            current.keeps = false
            return
        }
        let name = bytes[current.nameStart..<nameEnd]
        if tagWanted {
            current.keeps = attributeFilter?.contains(name) ?? true
        } else {
            current.keeps = tagFilter!.anyTagAttributes.contains(name)
        }
    }

    /// Keeps the attribute under construction unless an earlier one has the same name (the first one wins).
    private mutating func finishAttribute() {
        guard current.hasAttribute else { return }
        current.hasAttribute = false
        guard current.keeps else { return }
        current.keeps = false
        let name = Self.loweredString(bytes[current.nameStart..<current.nameEnd])
        let duplicate: Bool
        if attributes.count < 16 {
            duplicate = attributes.contains { $0.name == name }
        } else {
            if seenNames == nil { seenNames = Set(attributes.map(\.name)) }
            duplicate = !seenNames!.insert(name).inserted
        }
        guard !duplicate else { return }
        let value = current.inBuffer ? String(decoding: current.buffer, as: UTF8.self) : String(decoding: bytes[current.value], as: UTF8.self)
        attributes.append(.init(name: name, value: value))
    }

    /// The token for a complete tag, or nil for a tag the filter does not report.
    private mutating func emit(_ name: ArraySlice<UInt8>, _ content: Content?, isEnd: Bool, selfClosing: Bool) -> HTMLToken? {
        if isEnd {
            current.reset(keepsAttributes: false)
            return tagWanted ? .endTag(name: Self.loweredString(name)) : nil
        }
        finishAttribute()
        // The tree builder switches the tokenizer for these elements whether or not the tag is self-closing.
        if let content { pendingContent = content }
        // A tag not named by the filter is reported only for an attribute it names.
        guard tagWanted || !attributes.isEmpty else { return nil }
        var taken: [HTMLToken.Attribute] = []
        swap(&taken, &attributes)
        seenNames = nil
        return .startTag(name: Self.loweredString(name), attributes: taken, selfClosing: selfClosing)
    }

    /// The content model a start tag switches the tokenizer to, as the tree builder does; nil for most elements.
    private static func contentModel(of name: ArraySlice<UInt8>) -> Content? {
        switch name.count {
        case 3: if equalsLowercase(name, "xmp") { return .rawText("xmp") }
        case 5:
            if equalsLowercase(name, "style") { return .rawText("style") }
            if equalsLowercase(name, "title") { return .rcdata("title") }
        case 6:
            if equalsLowercase(name, "script") { return .script }
            if equalsLowercase(name, "iframe") { return .rawText("iframe") }
        case 7: if equalsLowercase(name, "noembed") { return .rawText("noembed") }
        case 8:
            if equalsLowercase(name, "noframes") { return .rawText("noframes") }
            if equalsLowercase(name, "textarea") { return .rcdata("textarea") }
        case 9: if equalsLowercase(name, "plaintext") { return .plaintext }
        default: break
        }
        return nil
    }

    /// Whether `run`, ASCII-lowercased, is `lowercase` (of the same length).
    @inline(__always) private static func equalsLowercase(_ run: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
        let start = lowercase.utf8Start
        var k = 0
        for b in run {
            if lowered(b) != start[k] { return false }
            k += 1
        }
        return true
    }

    /// The attribute under construction: where its name lies, and its value as a range of the input or, once a
    /// character reference or a NUL made it differ, in a buffer reused from attribute to attribute.
    private struct CurrentAttribute {
        var keepsAttributes = false
        var hasAttribute = false
        /// Whether this attribute is reported (its value is then collected).
        var keeps = false
        var nameStart = 0
        var nameEnd = 0
        var value = 0..<0
        var inBuffer = false
        var buffer: [UInt8] = []

        mutating func reset(keepsAttributes: Bool) {
            self.keepsAttributes = keepsAttributes
            hasAttribute = false
            keeps = false
        }

        mutating func moveValueToBuffer(from bytes: [UInt8]) {
            guard !inBuffer else { return }
            buffer.removeAll(keepingCapacity: true)
            buffer.append(contentsOf: bytes[value])
            inBuffer = true
        }
    }

    /// A set of tag or attribute names, looked up by length and then by bytes, ASCII case-insensitively.
    struct NameSet {
        private var byLength: [[[UInt8]]] = []

        init(_ names: Set<[UInt8]>) {
            for name in names {
                while byLength.count <= name.count { byLength.append([]) }
                byLength[name.count].append(name.map(HTMLTokenizer.lowered))
            }
        }

        func contains(_ name: ArraySlice<UInt8>) -> Bool {
            guard name.count < byLength.count else { return false }
            for candidate in byLength[name.count] {
                var k = name.startIndex
                var equal = true
                for b in candidate {
                    if HTMLTokenizer.lowered(name[k]) != b {
                        equal = false
                        break
                    }
                    k += 1
                }
                if equal { return true }
            }
            return false
        }
    }

    /// Whether a byte ends a tag name.
    @inline(__always) private static func endsName(_ b: UInt8) -> Bool { isSpace(b) || b == UInt8(ascii: "/") || b == UInt8(ascii: ">") }

    /// A tag or attribute name as the standard reports it: ASCII lowercased, NUL replaced by U+FFFD.
    private static func loweredString(_ run: ArraySlice<UInt8>) -> String {
        if !run.contains(where: { $0 == 0 || ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) }) {
            return String(decoding: run, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(run.count)
        for b in run { appendLowered(b, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - Element content

    /// Skips (and, for elements in `textElements`, returns) the content of a raw text, RCDATA, script or PLAINTEXT element.
    private mutating func consumeContent(_ content: Content) -> HTMLToken? {
        let start = pos
        let end: Int
        switch content {
        case .rawText(let name), .rcdata(let name): end = endTag(named: name, from: pos) ?? bytes.count
        case .script: end = scriptDataEnd(from: pos) ?? bytes.count
        case .plaintext: end = bytes.count
        }
        // The end tag itself is left for the data state to tokenize.
        pos = end
        let element = content.element
        guard end > start, textElements.contains(element) else { return nil }
        let text: String
        if case .rcdata = content {
            var decoded: [UInt8] = []
            decoded.reserveCapacity(end - start)
            var i = start
            while i < end {
                if bytes[i] == UInt8(ascii: "&") {
                    Self.characterReference(in: bytes, at: &i, into: &decoded, inAttribute: false, limit: end)
                } else {
                    decoded.append(bytes[i])
                    i += 1
                }
            }
            text = String(decoding: decoded, as: UTF8.self)
        } else {
            text = String(decoding: bytes[start..<end], as: UTF8.self)
        }
        return .rawText(element: element, text: text)
    }

    /// Where the appropriate end tag for `name` starts, from the RAWTEXT and RCDATA end tag states.
    private func endTag(named name: String, from start: Int) -> Int? {
        var i = start
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "<") && isAppropriateEndTag(name, at: i) { return i }
            i += 1
        }
        return nil
    }

    /// Whether "</name" followed by whitespace, '/' or '>' starts at `i` (an end tag at the end of input is text).
    private func isAppropriateEndTag(_ name: String, at i: Int) -> Bool {
        guard i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "/") else { return false }
        var k = i + 2
        for b in name.utf8 {
            guard k < bytes.count, Self.lowered(bytes[k]) == b else { return false }
            k += 1
        }
        guard k < bytes.count else { return false }
        let c = bytes[k]
        return Self.isSpace(c) || c == UInt8(ascii: "/") || c == UInt8(ascii: ">")
    }

    /// The script data states that matter for finding the end of a script, named as in the standard.
    private enum ScriptState {
        case data, escaped, escapedDash, escapedDashDash, doubleEscaped, doubleEscapedDash, doubleEscapedDashDash
    }

    /// Where the script's end tag starts, following the script data states: inside "<!--" a nested
    /// "<script" enters the double-escaped state, where "</script>" does not end the element.
    private func scriptDataEnd(from start: Int) -> Int? {
        let n = bytes.count
        var state = ScriptState.data
        var i = start
        while i < n {
            let c = bytes[i]
            switch state {
            case .data:
                if c == UInt8(ascii: "<") {
                    if isAppropriateEndTag("script", at: i) { return i }
                    if i + 3 < n && bytes[i + 1] == UInt8(ascii: "!") && bytes[i + 2] == UInt8(ascii: "-") && bytes[i + 3] == UInt8(ascii: "-") {
                        state = .escapedDashDash
                        i += 4
                        continue
                    }
                }
                i += 1
            case .escaped, .escapedDash, .escapedDashDash:
                if c == UInt8(ascii: "-") {
                    state = state == .escaped ? .escapedDash : .escapedDashDash
                    i += 1
                } else if c == UInt8(ascii: "<") {
                    if isAppropriateEndTag("script", at: i) { return i }
                    state = .escaped
                    i += 1
                    if i < n && bytes[i] == UInt8(ascii: "/") {
                        i += 1
                    } else if i < n && Self.isAlpha(bytes[i]) {
                        // Script data double escape start.
                        let (isScript, after) = scriptWord(at: i)
                        if isScript {
                            state = .doubleEscaped
                            i = after + 1
                        } else {
                            i = after
                        }
                    }
                } else if c == UInt8(ascii: ">") && state == .escapedDashDash {
                    state = .data
                    i += 1
                } else {
                    state = .escaped
                    i += 1
                }
            case .doubleEscaped, .doubleEscapedDash, .doubleEscapedDashDash:
                if c == UInt8(ascii: "-") {
                    state = state == .doubleEscaped ? .doubleEscapedDash : .doubleEscapedDashDash
                    i += 1
                } else if c == UInt8(ascii: "<") {
                    state = .doubleEscaped
                    i += 1
                    if i < n && bytes[i] == UInt8(ascii: "/") {
                        // Script data double escape end.
                        let (isScript, after) = scriptWord(at: i + 1)
                        if isScript {
                            state = .escaped
                            i = after + 1
                        } else {
                            i = after
                        }
                    }
                } else if c == UInt8(ascii: ">") && state == .doubleEscapedDashDash {
                    state = .data
                    i += 1
                } else {
                    state = .doubleEscaped
                    i += 1
                }
            }
        }
        return nil
    }

    /// Reads the letters at `i`: whether they spell "script" (any case) followed by whitespace, '/' or '>', and where the letters end.
    private func scriptWord(at start: Int) -> (Bool, Int) {
        var i = start
        while i < bytes.count && Self.isAlpha(bytes[i]) { i += 1 }
        guard i < bytes.count, i - start == 6 else { return (false, i) }
        let c = bytes[i]
        guard Self.isSpace(c) || c == UInt8(ascii: "/") || c == UInt8(ascii: ">") else { return (false, i) }
        for (k, b) in "script".utf8.enumerated() where Self.lowered(bytes[start + k]) != b { return (false, i) }
        return (true, i)
    }

    // MARK: - Bytes

    private static func normalizingNewlines(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == 0x0D {
                out.append(0x0A)
                if i + 1 < bytes.count && bytes[i + 1] == 0x0A { i += 1 }
            } else {
                out.append(b)
            }
            i += 1
        }
        return out
    }

    /// ASCII whitespace: tab, LF, FF, space, and CR (which preprocessing has already turned into LF here).
    @inline(__always) static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0C || b == 0x0D }
    @inline(__always) static func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }
    @inline(__always) static func isAlphanumeric(_ b: UInt8) -> Bool { isAlpha(b) || decimalValue(b) != nil }
    @inline(__always) static func lowered(_ b: UInt8) -> UInt8 { b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b | 0x20 : b }

    @inline(__always) static func decimalValue(_ b: UInt8) -> UInt8? {
        b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") ? b - UInt8(ascii: "0") : nil
    }

    @inline(__always) static func hexValue(_ b: UInt8) -> UInt8? {
        if let d = decimalValue(b) { return d }
        let l = b | 0x20
        return l >= UInt8(ascii: "a") && l <= UInt8(ascii: "f") ? l - UInt8(ascii: "a") + 10 : nil
    }

    /// Appends a name byte: ASCII lowercased, NUL replaced by U+FFFD.
    @inline(__always) private static func appendLowered(_ b: UInt8, to out: inout [UInt8]) {
        if b == 0 {
            out.append(contentsOf: replacementCharacter)
        } else {
            out.append(lowered(b))
        }
    }
}
