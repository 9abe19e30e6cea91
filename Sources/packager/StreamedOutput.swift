import Foundation
import PackagerKit

/// Standard output written about 64 KiB at a time through `print` (so that it keeps its order with other prints): a
/// listing of a million lines is not a million calls. What is written goes up to a line's end, so that no character's
/// UTF-8 bytes are cut in two (a part of one would print as U+FFFD).
struct StandardOutput {
    private var buffer: [UInt8] = []

    init() { buffer.reserveCapacity(Self.chunk) }

    private static let chunk = 64 << 10

    mutating func append(_ byte: UInt8) {
        buffer.append(byte)
        if byte == UInt8(ascii: "\n"), buffer.count >= Self.chunk { flush() }
    }

    mutating func append<Bytes: Collection<UInt8>>(_ bytes: Bytes) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= Self.chunk, let end = buffer.lastIndex(of: UInt8(ascii: "\n")) {
            Swift.print(String(decoding: buffer[...end], as: UTF8.self), terminator: "")
            buffer.removeSubrange(...end)
        }
    }

    /// Writes everything appended: at the end, when every character is whole.
    mutating func flush() {
        guard !buffer.isEmpty else { return }
        Swift.print(String(decoding: buffer, as: UTF8.self), terminator: "")
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Standard output as a reference, for a closure that is given the pieces of a report.
final class PrintedPieces {
    var output = StandardOutput()
}

/// A table printed a row at a time: every row is measured first (``measure(_:)``), then printed (``print(_:)``), so
/// that a table of a million rows holds its columns' widths, not its cells. Cells are made terminal-safe, and every
/// column but the last is padded to its width in characters, two spaces apart.
struct StreamedTable {
    private let header: [String]
    private var widths: [Int]
    private var out = StandardOutput()

    init(header: [String]) {
        self.header = header
        widths = header.map { terminalSafe($0).count }
    }

    mutating func measure(_ row: [String]) {
        for (i, cell) in row.enumerated() where i < widths.count - 1 { widths[i] = max(widths[i], terminalSafe(cell).count) }
    }

    mutating func printHeader() { print(header) }

    mutating func print(_ row: [String]) {
        for (i, cell) in row.enumerated() {
            let safe = terminalSafe(cell)
            out.append(safe.utf8)
            if i < widths.count - 1 {
                out.append(repeatElement(UInt8(ascii: " "), count: max(widths[i] - safe.count, 0) + 2))
            }
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// Writes what is buffered: before anything else is printed.
    mutating func finish() { out.flush() }
}
