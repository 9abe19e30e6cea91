// Reads through the cache (fill, borrow, keep, the deadline) stay in this file, just over 600 lines: they share the
// object's locked state and its in-flight fetches. The exchanges with the server are in RemoteObject+Requests.swift.
import Foundation
import Logging
import Metrics
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One remote bundle object as mounted: its URL, the version pinned at mount (ETag, size), and the ranges fetched
/// so far. Reads are range requests, conditional on the pinned version, widened to whole bodies and checked by their
/// SHA-256 (``RemoteBodyCheck``) before they are kept in a ``RangeStore`` or handed to a reader.
///
/// A read that misses blocks its thread until the range arrives (servers read bodies off their event loops and off
/// the cooperative pool: ``BundleResponse/bodyPlace`` says `.large` for a body not yet held). Reads of one range at
/// once share one request; the parts of a read that are missing go out as one request spanning them.
package final class RemoteObject: Sendable {
    /// The URL as given, query and all (sent, never printed).
    package let url: String
    /// The URL without its query (a presigned URL's signature): what messages and logs name.
    package let shownURL: String
    package let options: RemoteOptions
    /// The version pinned at mount.
    package let etag: String?
    package let lastModified: String?
    package let size: UInt64
    package let store: RangeStore
    let state = Mutex(State())
    let logger = Logger(label: "offline-bundle.remote")

    struct State {
        var inflight: [Fetch] = []
        /// Why the object is taken as replaced (a 412, another ETag); nil while it is the one mounted.
        var changed: String?
        var watchers: [@Sendable () -> Void] = []
        var warnedWhole = false
        var requests = 0
        var fetchedBytes: UInt64 = 0
        /// The checks fetched bytes pass before they are kept; nil while the mount has not checked the index yet (its
        /// fetches then lie past the body area, where their readers check them).
        var check: RemoteBodyCheck?
        /// Bytes fetched before the index was checked (a cold mount's first reply, or an object sent whole), in a file
        /// of this process's own, read from there until the index is checked and its bodies with it.
        var staged: RangeStore?
        /// Checked bytes the cache could not keep (its bound reached, or a body checked piece by piece), in a file of
        /// this process's own; made when first needed.
        var spool: RangeStore?
        /// The bodies other bundles of the cache folder (earlier releases) hold, lent before the server is asked: looked
        /// up at the first read that misses (`.some(nil)` without a folder, or when no other bundle holds a body of this
        /// one).
        var donors: BodyDonors??
        /// Bytes of bodies copied from other bundles of the cache folder rather than fetched.
        var reused: UInt64 = 0
        /// The bodies (by their local header's offset) held and checked in this process, by their first read or as
        /// they were fetched.
        var checkedHeld = Set<UInt64>()
    }

    /// A range request in flight; readers of an overlapping range wait on it.
    final class Fetch: Sendable {
        let range: Range<UInt64>
        let done = DispatchGroup()
        init(range: Range<UInt64>) {
            self.range = range
            done.enter()
        }
    }

    /// The most bytes one request fetches; a longer read goes out in pieces.
    static let maxRequestBytes: UInt64 = 16 << 20
    /// A read that misses at least this much right after bytes held (a body past its first 16 MiB, read in chunks) asks
    /// for more after it; a body's first read (its prefetch) asks for the body alone.
    static let readAheadFrom = 32 << 10
    static let readAhead: UInt64 = 4 << 20
    /// The most bytes held between two missing parts of a read that one request still spans (fetching them again).
    static let heldGapBridged: UInt64 = 64 << 10

    static let requestsOK = Counter(label: "offline_bundle_remote_requests", dimensions: [("result", "ok")])
    static let requestsFailed = Counter(label: "offline_bundle_remote_requests", dimensions: [("result", "failed")])
    static let bytesFetched = Counter(label: "offline_bundle_remote_bytes")
    private static let cacheHits = Counter(label: "offline_bundle_remote_cache", dimensions: [("result", "hit")])
    private static let cacheMisses = Counter(label: "offline_bundle_remote_cache", dimensions: [("result", "miss")])
    private static let bytesReused = Counter(label: "offline_bundle_remote_reused_bytes")
    static let deadlinesMissed = Counter(label: "offline_bundle_remote_deadlines_missed")
    static let cacheDamaged = Counter(label: "offline_bundle_remote_cache_damaged")

    package init(url: String, options: RemoteOptions, etag: String?, lastModified: String?, size: UInt64, store: RangeStore) {
        self.url = url
        self.shownURL = Self.shown(url)
        self.options = options
        self.etag = etag
        self.lastModified = lastModified
        self.size = size
        self.store = store
    }

    /// A bundle's location as it may be printed and logged: a URL without its query and fragment (a presigned URL's
    /// signature) and without credentials in its authority (`user:password@`); a file path as it is.
    package static func shown(_ url: String) -> String {
        guard RemoteOptions.isRemote(url) else { return url }
        let bare = String(url.prefix { $0 != "?" && $0 != "#" })
        guard let scheme = bare.range(of: "://") else { return bare }
        let rest = bare[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return bare }
        return String(bare[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
    }

    /// Requests sent and bytes fetched by this object so far.
    package var traffic: (requests: Int, bytes: UInt64) { state.withLock { ($0.requests, $0.fetchedBytes) } }

    /// Bytes of bodies this object took from other bundles of the cache folder (an earlier release) instead of the
    /// server.
    package var reusedBytes: UInt64 { state.withLock { $0.reused } }

    /// Why the object is taken as replaced since it was mounted; nil while it is not.
    package var changeReason: String? { state.withLock { $0.changed } }

    /// Calls `watcher` once the object is seen replaced (at once when it was already).
    package func onChange(_ watcher: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.changed != nil { return true }
            state.watchers.append(watcher)
            return false
        }
        if now { watcher() }
    }

    func markChanged(_ reason: String) {
        let watchers = state.withLock { state -> [@Sendable () -> Void] in
            guard state.changed == nil else { return [] }
            state.changed = reason
            defer { state.watchers = [] }
            return state.watchers
        }
        if !watchers.isEmpty { logger.warning("remote bundle replaced", metadata: ["url": "\(shownURL)", "reason": "\(reason)"]) }
        for watcher in watchers { watcher() }
    }

    /// Whether every byte of `range` is held in the cache (what a server may send from its file).
    package func holds(_ range: Range<UInt64>) -> Bool { store.holds(range) }

    /// Fetches every byte the cache lacks, in requests of at most ``wholePiece`` bytes (each widened to whole bodies),
    /// each body checked as it comes: what `packager check` asks first.
    package func prefetchAll() throws {
        var position: UInt64 = 0
        while position < size {
            let end = min(size, position + Self.wholePiece)
            try fill(position..<end, maxSpan: Self.wholePiece, readAhead: false)
            position = end
        }
    }

    /// The most bytes one request of ``prefetchAll()`` asks for.
    static let wholePiece: UInt64 = 64 << 20

    /// Counts a request made for this object before it existed (a cold mount's first).
    package func count(requests: Int, bytes: UInt64) {
        state.withLock {
            $0.requests += requests
            $0.fetchedBytes += bytes
        }
    }

    /// Holds a cold mount's first reply (the object's last bytes) in a file of this process's own, where reads find
    /// it, until ``install(_:)`` checks what of it may be kept.
    package func stage(_ bytes: [UInt8], at offset: UInt64) throws {
        guard !bytes.isEmpty, offset <= size, UInt64(bytes.count) <= size - offset else { return }
        let file = try RangeStore(folder: nil, digest: "", size: size, budget: size)
        guard file.keep(bytes, at: offset) else { throw BundleError(.io, "cannot write the first reply of \(shownURL) to a file of this process's own") }
        state.withLock { $0.staged = file }
    }

    /// Holds the object sent whole (a store of this process's own that holds all of it, unchecked) where reads find it,
    /// until ``install(_:)`` checks what of it may be kept.
    package func stage(whole file: RangeStore) {
        guard file.holds(0..<size) else { return }
        state.withLock { $0.staged = file }
    }

    /// Sets the checks fetched bytes pass from now on (the mount has checked the index they come from), and keeps what
    /// of the staged bytes passes them.
    package func install(_ check: RemoteBodyCheck) {
        // Listed for the next release that shares these bodies (written once, when the list is not there); the other
        // bundles' lists are read at the first read that misses, not at every mount (a warm mount reads none).
        if let path = store.path, path.hasSuffix(".data") { BodyDonors.writeList(base: String(path.dropLast(5)), check: check) }
        let staged = state.withLock { state -> RangeStore? in
            state.check = check
            return state.staged
        }
        if let staged {
            for range in staged.heldRanges { _ = keep(from: staged, range, check: check) }
        }
        state.withLock { $0.staged = nil }
    }

    /// Fills `buffer` with the object's bytes at `offset`, fetching what is not held.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, what: @autoclosure () -> String) throws {
        guard offset <= size, UInt64(buffer.count) <= size - offset else {
            throw BundleError(.truncated, "\(what()) lies beyond the end of \(shownURL) (offset \(offset), \(buffer.count) bytes, object \(size) bytes)")
        }
        let range = offset..<(offset + UInt64(buffer.count))
        for attempt in 0..<3 {
            // A cold mount's staged reply first: the server's bytes now, over what the cache holds of the digest it claims.
            if try readElsewhere(range, into: buffer, what: what()) {
                if attempt == 0 { Self.cacheHits.increment() }
                return
            }
            if store.holds(range) {
                if attempt == 0 { Self.cacheHits.increment() }
                switch store.read(into: buffer, at: offset) {
                case .failed(let error):
                    throw BundleError(.io, "cannot read \(what()) from the cache of \(shownURL)", underlying: SystemCallError(error))
                case .done(let count) where count < buffer.count:
                    throw BundleError(.io, "the cache file of \(shownURL) ends early")
                case .done:
                    return
                }
            }
            if attempt == 0 { Self.cacheMisses.increment() }
            // A read that no prefetch went before (an index, a manifest): traced as the fetch of a body is.
            if let bytes = try traced(range, cacheHit: false, { try withinDeadline(range, { try self.fill(range) }) }) {
                // Not kept (the cache's bound is reached): the bytes go straight to the reader.
                buffer.copyBytes(from: bytes)
                return
            }
        }
        throw BundleError(.io, "the bytes fetched for \(what()) from \(shownURL) were not kept where they are read")
    }

    /// Fills `buffer` from the staged reply or the spool when either holds `range`; says whether one did.
    private func readElsewhere(_ range: Range<UInt64>, into buffer: UnsafeMutableRawBufferPointer, what: @autoclosure () -> String) throws -> Bool {
        let (staged, spool) = state.withLock { ($0.staged, $0.spool) }
        guard let file = [staged, spool].compactMap({ $0 }).first(where: { $0.holds(range) }) else { return false }
        switch file.read(into: buffer, at: range.lowerBound) {
        case .failed(let error):
            throw BundleError(.io, "cannot read \(what()) of \(shownURL) from this process's file of checked bytes", underlying: SystemCallError(error))
        case .done(let count) where count < buffer.count:
            throw BundleError(.io, "this process's file of checked bytes of \(shownURL) ends early")
        case .done:
            return true
        }
    }

    /// The parts of `range` that neither the cache, the staged reply nor the spool holds.
    private func missing(in range: Range<UInt64>) -> [Range<UInt64>] {
        var gaps = store.missing(in: range)
        guard !gaps.isEmpty else { return gaps }
        let (staged, spool) = state.withLock { ($0.staged, $0.spool) }
        if let staged { gaps = gaps.flatMap { staged.missing(in: $0) } }
        if let spool { gaps = gaps.flatMap { spool.missing(in: $0) } }
        return gaps
    }

    /// This process's file of checked bytes that the cache could not keep, made when first needed.
    private func spoolStore() throws -> RangeStore {
        if let spool = state.withLock({ $0.spool }) { return spool }
        let made = try RangeStore(folder: nil, digest: "", size: size, budget: options.cacheBytes)
        return state.withLock { state in
            if let spool = state.spool { return spool }
            state.spool = made
            return made
        }
    }

    /// Keeps what of `bytes` (fetched from `offset`) passes `check` (everything, before the mount has a check): in the
    /// cache, or past its bound in the spool. Returns the first body that failed its checks; its bytes are not kept.
    private func keep(_ bytes: [UInt8], at offset: UInt64, check: RemoteBodyCheck?) -> (range: Range<UInt64>, error: BundleError)? {
        guard let check else {
            keepLocally(bytes[...], at: offset)
            return nil
        }
        let (passed, failed) = check.check(bytes, at: offset)
        var merged: [Range<UInt64>] = []
        for range in passed {
            if let last = merged.last, last.upperBound == range.lowerBound {
                merged[merged.count - 1] = last.lowerBound..<range.upperBound
            } else {
                merged.append(range)
            }
        }
        for range in merged { keepLocally(bytes[Int(range.lowerBound - offset)..<Int(range.upperBound - offset)], at: range.lowerBound) }
        if let failed {
            logger.warning(
                "a body fetched from the server does not match the index; it was not kept",
                metadata: ["url": "\(shownURL)", "body": "\(failed.error.entry ?? "")", "reason": "\(failed.error.message)"])
        }
        return failed
    }

    /// Keeps what of `range` of `file` (bytes fetched, not yet checked) passes `check` (everything, before the mount has
    /// a check), reading it in pieces: each whole body in it hashed, then copied into the cache (or past its bound the
    /// spool). Returns the first body that failed its checks; its bytes are not kept.
    func keep(from file: RangeStore, _ range: Range<UInt64>, check: RemoteBodyCheck?) -> (range: Range<UInt64>, error: BundleError)? {
        guard let check else {
            copy(from: file, range)
            return nil
        }
        var failed: (range: Range<UInt64>, error: BundleError)?
        // Bodies that pass, next to each other, are copied as one run (one cache log record a piece, not a body).
        var run: Range<UInt64>?
        for i in check.bodies(touching: range) {
            let record = check.record(i)
            let extent = RemoteBodyCheck.extent(record)
            guard extent.lowerBound >= range.lowerBound, extent.upperBound <= range.upperBound else { continue }
            do {
                let body = try StreamedBodyCheck(record: record, check: check)
                try file.pieces(extent) { piece, _ in try body.feed(piece) }
                try body.finish()
                if let current = run, current.upperBound == extent.lowerBound {
                    run = current.lowerBound..<extent.upperBound
                } else {
                    if let current = run { copy(from: file, current) }
                    run = extent
                }
            } catch {
                if failed == nil { failed = (extent, error as? BundleError ?? BundleError(.corruptBody, "\(error)", entry: check.name(record))) }
            }
        }
        if let run { copy(from: file, run) }
        if range.upperBound > check.bodyAreaEnd { copy(from: file, max(range.lowerBound, check.bodyAreaEnd)..<range.upperBound) }
        if let failed {
            logger.warning(
                "a body fetched from the server does not match the index; it was not kept",
                metadata: ["url": "\(shownURL)", "body": "\(failed.error.entry ?? "")", "reason": "\(failed.error.message)"])
        }
        return failed
    }

    /// Copies checked bytes of `file` into the cache, piece by piece; when the cache cannot take them all, into the
    /// spool whole (where reads look first), so that a body is read from one place.
    private func copy(from file: RangeStore, _ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        var inCache = true
        try? file.pieces(range) { piece, offset in
            guard store.keep(Array(piece), at: offset) else {
                inCache = false
                throw CancellationError()
            }
        }
        guard !inCache, let spool = try? spoolStore() else { return }
        try? file.pieces(range) { piece, offset in
            guard spool.keep(Array(piece), at: offset) else { throw CancellationError() }
        }
    }

    @discardableResult
    private func keepLocally(_ bytes: ArraySlice<UInt8>, at offset: UInt64) -> Bool {
        let array = Array(bytes)
        if store.keep(array, at: offset) { return true }
        return (try? spoolStore().keep(array, at: offset)) ?? false
    }

    /// The cache folder's other bundles that hold bodies of this one, found once (reads up to eight lists).
    private func donors(_ check: RemoteBodyCheck) -> BodyDonors? {
        if let found = state.withLock({ $0.donors }) { return found }
        var found: BodyDonors?
        if let path = store.path, path.hasSuffix(".data") {
            found = BodyDonors.find(folder: (path as NSString).deletingLastPathComponent, ownBase: String(path.dropLast(5)), check: check)
        }
        return state.withLock { state in
            if let earlier = state.donors { return earlier }
            state.donors = .some(found)
            return found
        }
    }

    /// Copies into the cache the bodies of `range` it lacks that another bundle of the cache folder holds (checked
    /// there first, as a fetched body is); says whether it copied any.
    private func borrow(_ range: Range<UInt64>) -> Bool {
        guard let check = state.withLock({ $0.check }), range.lowerBound < check.bodyAreaEnd, let donors = donors(check) else { return false }
        let copied = donors.lend(
            check.align(range), check: check, lacks: { !self.missing(in: $0).isEmpty },
            keep: { bytes, offset in self.keepLocally(bytes, at: offset) })
        guard copied > 0 else { return false }
        state.withLock { $0.reused += copied }
        Self.bytesReused.increment(by: Int64(clamping: copied))
        return true
    }

    /// The request that brings `span`: widened to the whole bodies it touches, and cut to as many of them as fit in
    /// `maxSpan` (at least one); a body longer than ``maxRequestBytes`` alone, to be fetched in pieces (returned).
    private func plan(_ span: Range<UInt64>, check: RemoteBodyCheck, maxSpan: UInt64) -> (span: Range<UInt64>, large: IndexBodyRecord?) {
        let touched = check.bodies(touching: span)
        guard let first = touched.first else { return (span, nil) }
        let firstRecord = check.record(first)
        let firstExtent = RemoteBodyCheck.extent(firstRecord)
        if UInt64(firstExtent.count) > Self.maxRequestBytes { return (firstExtent, firstRecord) }
        let aligned = check.align(span)
        let cap = max(maxSpan, Self.maxRequestBytes)
        guard UInt64(aligned.count) > cap else { return (aligned, nil) }
        var end = firstExtent.upperBound
        for i in touched.dropFirst() {
            let extent = RemoteBodyCheck.extent(check.record(i))
            guard extent.upperBound - aligned.lowerBound <= cap else { break }
            end = extent.upperBound
        }
        return (aligned.lowerBound..<end, nil)
    }

    /// Makes `range` held, fetching its missing parts (waiting for requests in flight that overlap them). Returns the
    /// bytes of `range` when they could not be kept, else nil.
    @discardableResult
    func fill(_ range: Range<UInt64>, maxSpan: UInt64 = maxRequestBytes, readAhead: Bool = true) throws -> [UInt8]? {
        var borrowed = false
        while true {
            let gaps = missing(in: range)
            guard let first = gaps.first, let last = gaps.last else { return nil }
            // What an earlier release fetched is copied, not fetched again (once: what it could not lend is fetched).
            if !borrowed {
                borrowed = true
                let window =
                    readAhead ? first.lowerBound..<min(size, max(last.upperBound, first.lowerBound + Self.readAhead)) : first.lowerBound..<last.upperBound
                if borrow(window) { continue }
            }
            // One request spans the gaps that lie close together; past a stretch held that is longer than a request's
            // overhead is worth, the next request goes on from there.
            var end = first.upperBound
            for gap in gaps.dropFirst() {
                guard gap.lowerBound - end <= Self.heldGapBridged else { break }
                end = gap.upperBound
            }
            var span = first.lowerBound..<end
            // Sequential: the byte before the read is held, and the byte after it is not; the read-ahead stops where
            // bytes are held again.
            if readAhead, span.count >= Self.readAheadFrom, span.lowerBound > 0, span.upperBound < size,
                store.holds((span.lowerBound - 1)..<span.lowerBound), store.missing(in: span.upperBound..<(span.upperBound + 1)).count == 1
            {
                let ahead = span.upperBound..<min(size, span.lowerBound + max(UInt64(span.count), Self.readAhead))
                let next = missing(in: ahead).first
                span = span.lowerBound..<(next.map { $0.lowerBound == ahead.lowerBound ? $0.upperBound : span.upperBound } ?? span.upperBound)
            }
            span = span.lowerBound..<min(span.upperBound, span.lowerBound + max(maxSpan, 1))
            let check = state.withLock { $0.check }
            var large: IndexBodyRecord?
            if let check { (span, large) = plan(span, check: check, maxSpan: maxSpan) }
            let (fetch, owner) = state.withLock { state -> (Fetch, Bool) in
                if let running = state.inflight.first(where: { $0.range.overlaps(span) }) { return (running, false) }
                let fetch = Fetch(range: span)
                state.inflight.append(fetch)
                return (fetch, true)
            }
            if !owner {
                fetch.done.wait()
                // What it fetched may not have been kept, or may not cover all of ours: look again (and fetch ourselves).
                if missing(in: range).isEmpty { return nil }
                if state.withLock({ $0.changed }) != nil { try throwChanged() }
                continue
            }
            let got: (offset: UInt64, bytes: [UInt8])
            do {
                defer {
                    state.withLock { $0.inflight.removeAll { $0 === fetch } }
                    fetch.done.leave()
                }
                if let large, let check {
                    try fetchLarge(large, check: check)
                    continue
                }
                got = try get(span)
                if let failed = keep(got.bytes, at: got.offset, check: check), failed.range.overlaps(range) {
                    throw BundleError(
                        .corruptBody,
                        "\(shownURL) sent bytes that do not match the index (\(failed.error.message)): the object changed under the same version, or the server is not serving this bundle; they were not kept",
                        entry: failed.error.entry)
                }
                if missing(in: range).isEmpty { continue }
            }
            // Not kept: hand over what the reader asked for, when this request held it all.
            let fetched = got.offset..<(got.offset + UInt64(got.bytes.count))
            if fetched.lowerBound <= range.lowerBound && fetched.upperBound >= range.upperBound {
                return Array(got.bytes[Int(range.lowerBound - got.offset)..<Int(range.upperBound - got.offset)])
            }
            return try fetchUnkept(range)
        }
    }

    /// Fetches `range` whole, for a reader whose bytes neither the cache nor the spool can keep, each piece widened to
    /// whole bodies and checked.
    private func fetchUnkept(_ range: Range<UInt64>) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(range.count)
        var position = range.lowerBound
        while position < range.upperBound {
            var span = position..<min(range.upperBound, position + Self.maxRequestBytes)
            let check = state.withLock { $0.check }
            if let check {
                let planned = plan(span, check: check, maxSpan: Self.maxRequestBytes)
                if let large = planned.large {
                    throw BundleError(
                        .remote,
                        "\(shownURL): body \(check.name(large)) (\(large.storedSize) bytes) is checked whole before it is read, and the cache cannot hold it; give the cache more room (--cache-bytes)"
                    )
                }
                span = planned.span
            }
            let got = try get(span)
            if let check, let failed = check.check(got.bytes, at: got.offset).failed, failed.range.overlaps(position..<range.upperBound) {
                throw BundleError(.corruptBody, "\(shownURL) sent bytes that do not match the index (\(failed.error.message))", entry: failed.error.entry)
            }
            let end = min(range.upperBound, got.offset + UInt64(got.bytes.count))
            guard got.offset <= position, end > position else { throw BundleError(.remote, "\(shownURL) did not send the range asked for") }
            out += got.bytes[Int(position - got.offset)..<Int(end - got.offset)]
            position = end
        }
        return out
    }

    /// Fetches a body longer than one request in pieces, in order, checking them as they come into the spool; once the
    /// whole body passes, copies it into the cache where there is room. Nothing of a body that fails is kept.
    private func fetchLarge(_ record: IndexBodyRecord, check: RemoteBodyCheck) throws {
        let extent = RemoteBodyCheck.extent(record)
        let spool = try spoolStore()
        do {
            let body = try StreamedBodyCheck(record: record, check: check)
            var position = extent.lowerBound
            while position < extent.upperBound {
                let piece = position..<min(extent.upperBound, position + Self.maxRequestBytes)
                let got = try get(piece)
                let slice = got.bytes[Int(piece.lowerBound - got.offset)..<Int(piece.upperBound - got.offset)]
                try body.feed(slice)
                guard spool.keep(Array(slice), at: piece.lowerBound) else {
                    throw BundleError(
                        .remote,
                        "\(shownURL): body \(check.name(record)) (\(record.storedSize) bytes) is checked whole before it is read, and the cache cannot hold it; give the cache more room (--cache-bytes)"
                    )
                }
                position = piece.upperBound
            }
            do {
                try body.finish()
            } catch let error as BundleError {
                throw BundleError(
                    .corruptBody,
                    "\(shownURL) sent bytes that do not match the index (\(error.message)): the object changed under the same version, or the server is not serving this bundle; they were not kept",
                    entry: error.entry)
            }
        } catch {
            spool.forget(extent)
            throw error
        }
        // Checked: copied into the cache, piece by piece, while it has room (what it cannot keep is read from the spool).
        var position = extent.lowerBound
        while position < extent.upperBound {
            let piece = position..<min(extent.upperBound, position + Self.maxRequestBytes)
            var bytes = [UInt8](repeating: 0, count: piece.count)
            guard case .done(let count) = bytes.withUnsafeMutableBytes({ spool.read(into: $0, at: piece.lowerBound) }), count == piece.count,
                store.keep(bytes, at: piece.lowerBound)
            else { break }
            position = piece.upperBound
        }
        if store.holds(extent) { spool.forget(extent) }
    }
}
