import OfflineBundle

/// What the bundle recorded for one entry, copied out so probes need not touch the bundle.
struct Recorded: Sendable {
    var url: String
    var kind: EntryKind
    var status: Int
    var etag: String?
    var lastModified: String?
    var contentType: String?
    var location: String?
    var size: UInt64?
    var sha256: String?

    init(entry: BundleEntry) {
        url = entry.key
        kind = entry.kind
        status = entry.status
        // One decode of the headers, not one per field.
        let headers = entry.headers
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
        // Validators the writer made up (a packed file's ETag of its digest) are no origin's: never sent, never compared.
        etag = entry.etagSynthesized ? nil : header("etag")
        lastModified = entry.lastModifiedSynthesized ? nil : header("last-modified")
        contentType = header("content-type")
        location = header("location")
        size = entry.body?.size
        sha256 = entry.body?.sha256
    }
}
