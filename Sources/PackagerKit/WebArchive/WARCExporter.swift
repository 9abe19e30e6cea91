import Crypto
import Foundation
import OfflineBundle

/// A bundle written as WARC 1.1 (ISO 28500:2017), gzipped a record per member (`packager export --format warc`), for
/// the web-archiving tools: pywb and replayweb.page replay it, warcio reads and checks it.
///
/// The file opens with a `warcinfo` record (the software, the bundle's digest and date). Each entry then gives, in key
/// order, a `response` record (the recorded status line and headers, `Content-Length` set to the body's bytes, and the
/// body, checked) and a `request` record after it (`WARC-Concurrent-To` the response): the method, the target and
/// `Host`, the headers and body of a declared request, a secret's value left out. A body stored once for several
/// entries is written once: the later entries get `revisit` records (profile identical-payload-digest) that refer to
/// the first. Blocked entries are answers the declaration made up, not exchanges: they are left out.
///
/// Digests are SHA-256 in hex (`WARC-Payload-Digest` of the body, `WARC-Block-Digest` of the record's block). Record
/// IDs and dates come from the bundle (its digest and each entry's key; the time each entry was fetched), so the same
/// bundle always gives the same bytes. Records are compressed on a thread of their own while the next are read and
/// digested. Memory is a record of at most 4 MiB, or a chunk of a larger body (read twice, to digest the block and to
/// write it, never held whole), and at most 8 MiB of records waiting to be compressed.
public enum WARCExporter {
    /// What an export wrote.
    public struct Summary: Sendable, Equatable {
        /// Records written, warcinfo included.
        public var records: Int
        /// Entries written as responses (and revisits).
        public var entries: Int
        /// Blocked entries left out.
        public var blocked: Int
        /// The fingerprint of the key that signed the WACZ (``OfflineBundle/BundlePublicKey/fingerprint``); nil when
        /// unsigned.
        public var signedBy: String?
    }

    /// The profile of a revisit record whose payload is the one its target has (WARC 1.1, 6.7.2).
    static let identicalPayloadProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

    /// Writes the bundle at `bundlePath` to `output` as WARC 1.1, gzipped a record per member.
    @discardableResult
    public static func export(bundle bundlePath: String, to output: String) throws -> Summary {
        // The output's folder first: a large bundle's index goes to a scratch file there.
        if let problem = OutputFile.problem(with: output) { throw problem }
        let bundle = try MountedBundle(
            path: bundlePath, options: .wholeBundlePass(scratchIn: (output as NSString).deletingLastPathComponent))
        let atomic = try AtomicOutput(destination: output)
        let summary = try write(bundle, to: atomic, filename: (output as NSString).lastPathComponent) { _ in }.summary
        try atomic.commit()
        return summary
    }

    /// A response or revisit record as a CDXJ index (WACZ) lists it.
    struct IndexedRecord {
        var url: String
        var date: Date
        var status: Int
        var mediaType: String
        var payloadDigest: String
        var revisit: Bool
        var method: String
        var requestBody: Data?
        /// The request's `Content-Type`, when it had one.
        var requestContentType: String?
        /// Where its gzip member starts in the file, and its length.
        var offset: UInt64
        var length: UInt64
    }

    /// Writes `bundle`'s records into `output`, telling `indexed` of each response and revisit record once its member is
    /// written, in order; the SHA-256 (hex) and size of what it wrote. Members are compressed and written on a thread of their own
    /// (``MemberPipeline``) while the next records are read.
    static func write(
        _ bundle: MountedBundle, to output: AtomicOutput, filename: String, indexed: (IndexedRecord) throws -> Void
    ) throws -> (summary: Summary, sha256: String, size: UInt64) {
        // The manifest's entries one at a time beside the index's, both in key order: what was sent for each request.
        // A manifest that does not match the index, or that cannot be read, is refused: the export would drop what was
        // sent for each request without saying so.
        let manifest = try bundle.manifestEntries()
        let members = MemberPipeline(members: GzipMembers(output: output))
        defer { members.stop() }
        let created = bundle.createdAt ?? Date(timeIntervalSince1970: 0)
        var summary = Summary(records: 0, entries: 0, blocked: 0)

        let info = Array(
            """
            software: packager/\(PackagerVersion.string)\r
            format: WARC File Format 1.1\r
            conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r
            packager-bundle: \(bundle.digest)\r
            packager-bundle-created: \(warcDate(created))\r

            """.utf8)
        try writeRecord(
            members,
            fields: [
                ("WARC-Type", "warcinfo"), ("WARC-Record-ID", recordID(bundle.digest, "warcinfo")), ("WARC-Date", warcDate(created)),
                ("WARC-Filename", filename), ("Content-Type", "application/warc-fields"),
            ], head: info, body: nil)
        summary.records += 1

        // The first entry whose response record holds each body (its position + 1; 0 for none yet): what a later entry
        // with the same body revisits. In the scratch folder beside the output past 1 MiB.
        let firstOfBody = try ScratchArray<UInt32>(
            zeros: bundle.bodyCount, folder: (output.temporaryPath as NSString).deletingLastPathComponent, memoryLimit: 1 << 20, pageBytes: 0)
        func firstRecord(_ body: Int) throws -> (id: String, uri: String, date: String)? {
            let position = Int(try firstOfBody.value(at: body))
            guard position > 0 else { return nil }
            let first = bundle.entry(at: position - 1)
            return (recordID(bundle.digest, "response " + first.key), String(RequestQualifiers.split(key: first.key).url), warcDate(first.fetchedAt ?? created))
        }
        for position in 0..<bundle.entryCount {
            let entry = bundle.entry(at: position)
            if entry.kind == .blocked {
                summary.blocked += 1
                continue
            }
            let split = RequestQualifiers.split(key: entry.key)
            let url = String(split.url)
            let recorded = try manifest.request(forKey: entry.key)
            let method = recorded?.method ?? split.qualifiers?.method ?? "GET"
            let fetched = entry.fetchedAt ?? created
            let date = warcDate(fetched)
            let responseID = recordID(bundle.digest, "response " + entry.key)
            let head = Array(responseHead(entry).utf8)
            let payloadDigest = "sha256:" + (entry.body?.sha256 ?? hexString(Array(SHA256.hash(data: Data()))))
            var fields: [(String, String)] = [("WARC-Target-URI", url), ("WARC-Date", date), ("WARC-Payload-Digest", payloadDigest)]
            let sentBody = recorded?.bodySecret == true ? nil : recorded?.bodyData
            let first = try entry.body.flatMap { $0.size > 0 ? try firstRecord($0.index) : nil }
            let revisit = first != nil
            let record = IndexedRecord(
                url: url, date: fetched, status: entry.status, mediaType: entry.headers.first { $0.name == "content-type" }?.value ?? "",
                payloadDigest: payloadDigest, revisit: revisit, method: method, requestBody: sentBody,
                requestContentType: recorded?.headers.first { $0.first?.lowercased() == "content-type" }?.last, offset: 0, length: 0)
            if let first {
                fields =
                    [("WARC-Type", "revisit"), ("WARC-Record-ID", responseID)] + fields + [
                        ("WARC-Profile", identicalPayloadProfile), ("WARC-Refers-To", first.id), ("WARC-Refers-To-Target-URI", first.uri),
                        ("WARC-Refers-To-Date", first.date), ("Content-Type", "application/http;msgtype=response"),
                    ]
                try writeRecord(members, fields: fields, head: head, body: nil, indexed: record)
            } else {
                fields = [("WARC-Type", "response"), ("WARC-Record-ID", responseID)] + fields + [("Content-Type", "application/http;msgtype=response")]
                do {
                    try writeRecord(members, fields: fields, head: head, body: (bundle, entry), indexed: record)
                } catch let error as BundleError {
                    // Nothing is written at the output: the temporary file goes with the error.
                    throw PackagerError(.integrity, "cannot export \(url): \(error.message)", subject: url)
                }
                if let body = entry.body, body.size > 0 { try firstOfBody.set(UInt32(position + 1), at: body.index) }
            }
            // The request, as it was sent (a secret's value, and a body that held one, left out).
            var requestHead = "\(method) \(requestTarget(url)) HTTP/1.1\r\n"
            if let host = hostField(url) { requestHead += "Host: \(host)\r\n" }
            var requestBody = Data()
            for header in recorded?.headers ?? [] where header.count == 2 && !header[1].isEmpty && header[0].lowercased() != "host" {
                requestHead += "\(header[0]): \(header[1])\r\n"
            }
            // A credential the key names, as a placeholder of its scheme (as the HAR export writes it).
            for qualifier in RequestQualifiers.split(key: entry.key).qualifiers?.headers ?? []
            where RequestQualifiers.credentialHeaders.contains(qualifier.name) {
                guard let scheme = qualifier.value, !requestHead.lowercased().contains("\r\n\(qualifier.name):") else { continue }
                requestHead += "\(qualifier.name): \(HARExporter.credentialPlaceholder(scheme))\r\n"
            }
            if let sentBody, !sentBody.isEmpty {
                requestBody = sentBody
                if !(recorded?.headers ?? []).contains(where: { $0.first?.lowercased() == "content-length" }) {
                    requestHead += "Content-Length: \(sentBody.count)\r\n"
                }
            }
            requestHead += "\r\n"
            try writeRecord(
                members,
                fields: [
                    ("WARC-Type", "request"), ("WARC-Record-ID", recordID(bundle.digest, "request " + entry.key)), ("WARC-Target-URI", url),
                    ("WARC-Date", date), ("WARC-Concurrent-To", responseID), ("Content-Type", "application/http;msgtype=request"),
                ], head: Array(requestHead.utf8) + Array(requestBody), body: nil)
            summary.records += 2
            summary.entries += 1
            for record in members.takeWritten() { try indexed(record) }
        }
        let (records, written) = try members.finish()
        for record in records { try indexed(record) }
        return (summary, written.sha256, written.offset)
    }

    /// One record: its header fields, then `WARC-Block-Digest` and `Content-Length` of the block (`head`, then the
    /// entry's body when given), the block, and the two CRLFs that end it; one gzip member, whose offset and length
    /// `indexed` is given.
    static func writeRecord(
        _ members: MemberPipeline, fields: [(String, String)], head: [UInt8], body: (bundle: MountedBundle, entry: BundleEntry)?,
        indexed: IndexedRecord? = nil
    ) throws {
        // A record of at most 4 MiB is read once and compressed whole; a larger one is read twice (digest, then
        // write), never held.
        if (body?.entry.body?.size ?? 0) <= wholeRecordLimit {
            var block = head
            if let (bundle, entry) = body { block += try bundle.body(of: entry) }
            var record = Array(header(fields, block: SHA256.hash(data: block), length: UInt64(block.count)).utf8)
            record.reserveCapacity(record.count + block.count + 4)
            record += block
            record += Array("\r\n\r\n".utf8)
            try members.submit(record, indexed: indexed)
            return
        }
        var digest = SHA256()
        digest.update(data: head)
        var length = UInt64(head.count)
        if let (bundle, entry) = body {
            try bundle.forEachBodyChunk(of: entry) { chunk in
                digest.update(data: chunk)
                length += UInt64(chunk.count)
            }
        }
        let recordHeader = Array(header(fields, block: digest.finalize(), length: length).utf8)
        try members.exclusive(indexed: indexed) { members in
            try members.begin()
            try members.feed(recordHeader)
            try members.feed(head)
            if let (bundle, entry) = body {
                var written = UInt64(head.count)
                try bundle.forEachBodyChunk(of: entry) { chunk in
                    written += UInt64(chunk.count)
                    try members.feed(chunk)
                }
                // The body read for the digest and the one written are the bundle's, both checked: they cannot differ
                // in length unless the file changed between the two reads.
                guard written == length else { throw PackagerError(.io, "\(entry.key)'s body changed while it was exported") }
            }
            try members.feed(Array("\r\n\r\n".utf8))
            try members.finish()
        }
    }

    /// Records whose body is at most this are compressed whole.
    static let wholeRecordLimit: UInt64 = 4 << 20

    /// A record's header: its fields, then the block's digest and length, and the empty line.
    static func header(_ fields: [(String, String)], block digest: SHA256.Digest, length: UInt64) -> String {
        var header = "WARC/1.1\r\n"
        for (name, value) in fields { header += "\(name): \(value)\r\n" }
        return header + "WARC-Block-Digest: sha256:\(hexString(Array(digest)))\r\nContent-Length: \(length)\r\n\r\n"
    }

    /// The response's status line and headers as recorded, its length the body's (a recorded `Content-Length`,
    /// `Transfer-Encoding` or `Content-Encoding` described the bytes on the wire, not the body kept).
    static func responseHead(_ entry: BundleEntry) -> String {
        var head = "HTTP/1.1 \(entry.status) \(HARExporter.reason(entry.status))\r\n"
        for header in entry.headers where !["content-length", "transfer-encoding", "content-encoding"].contains(header.name.lowercased()) {
            head += "\(header.name): \(header.value)\r\n"
        }
        return head + "content-length: \(entry.body?.size ?? 0)\r\n\r\n"
    }

    /// The request target of `url`: its path and query (`/` when it has no path).
    static func requestTarget(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
        let target = String(rest[slash...].prefix { $0 != "#" })
        return target.hasPrefix("?") ? "/" + target : target
    }

    /// The `Host` field of `url`: its authority, without credentials.
    static func hostField(_ url: String) -> String? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = authority.split(separator: "@").last.map(String.init) ?? ""
        return host.isEmpty ? nil : host
    }

    /// A WARC date: UTC, to the second (WARC 1.1, 5.4). Formatted by hand: a date formatter per record cost more than
    /// the record's SHA-256.
    static func warcDate(_ date: Date) -> String {
        utcText(date, after: ["-", "-", "T", ":", ":", "Z"]) {
            String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", $0.0, $0.1, $0.2, $0.3, $0.4, $0.5)
        }
    }

    /// `date`'s UTC year, month, day, hour, minute and second, zero-padded (the year to 4 digits), each followed by its
    /// character in `after` (none for nil): written by hand, as `String(format:)` with the same widths writes them
    /// (which took a twelfth of a WACZ export); `formatted` writes a year outside 0 to 9999.
    static func utcText(
        _ date: Date, after: [Unicode.Scalar?], formatted: ((Int, Int, Int, Int, Int, Int)) -> String
    ) -> String {
        let fields = utcFields(date)
        guard (0...9999).contains(fields.0) else { return formatted(fields) }
        var out = [UInt8]()
        out.reserveCapacity(20)
        for (i, value) in [fields.0, fields.1, fields.2, fields.3, fields.4, fields.5].enumerated() {
            var divisor = i == 0 ? 1000 : 10
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
            if let next = after[i] { out.append(UInt8(ascii: next)) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Year, month, day, hour, minute and second of `date` in UTC.
    static func utcFields(_ date: Date) -> (Int, Int, Int, Int, Int, Int) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var fields = tm()
        gmtime_r(&seconds, &fields)
        return (Int(fields.tm_year) + 1900, Int(fields.tm_mon) + 1, Int(fields.tm_mday), Int(fields.tm_hour), Int(fields.tm_min), Int(fields.tm_sec))
    }

    /// A record ID from the bundle's digest and what the record is: a UUID (version 8, RFC 9562) made of their SHA-256,
    /// so that an export is reproducible and two records never share one.
    static func recordID(_ bundleDigest: String, _ what: String) -> String {
        var bytes = Array(SHA256.hash(data: Data((bundleDigest + "\n" + what).utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = hexString(bytes)
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return "<urn:uuid:" + parts.joined(separator: "-") + ">"
    }
}
