import Foundation
import OfflineBundle
import Synchronization

/// What one WARC import keeps while it reads: the places its exchanges are named by, and the spool of bodies and
/// payload places revisits read again.
extension WARCImporter {
    /// The places exchanges are named by, numbered from 1 (the numbers the shared import step reports): a record's offset
    /// and its file, 16 bytes each (a sentence each held a hundred, for every record of the archive), in a file of
    /// `folder` past 1 MiB (65,536 records).
    final class PlaceList: Sendable {
        private struct Place {
            var file: Int32
            var offset: Int
        }
        private struct List: ~Copyable {
            var files: [String] = []
            var places: ScratchArray<Place>
        }
        private let list: Mutex<List>

        init(folder: String) {
            list = Mutex(List(places: ScratchArray(folder: folder, memoryLimit: 1 << 20, pageBytes: 16 << 10)))
        }

        func add(offset: Int, of file: String) throws -> Int {
            try list.withLock { list in
                if list.files.last != file { list.files.append(file) }
                try list.places.append(Place(file: Int32(list.files.count - 1), offset: offset))
                return list.places.count
            }
        }

        func place(_ number: Int) -> String {
            list.withLock { list in
                guard number >= 1 && number <= list.places.count, let place = try? list.places.value(at: number - 1) else { return "record \(number)" }
                return "the record at offset \(place.offset) of \(list.files[Int(place.file)])"
            }
        }
    }

    /// Where one import keeps what it read: the bodies spooled to files, and where the payloads revisits may refer to are.
    final class Spool {
        let folder: ScratchFolder
        private var files = 0
        /// What a revisit may refer to, by record ID and by payload digest (each name as the first 16 bytes of its
        /// SHA-256: the names themselves cost a hundred bytes and more for every response), as an index into
        /// ``places``: two names a response, and a place each, took 37 MB at 200,000 names and twice that while the
        /// table grew, in a Dictionary of names; a ``DigestTable`` of 16-byte names takes about 9.
        private var payloads: DigestTable
        /// A place for each response remembered, in a file of ``folder`` past 2 MiB (65,536 responses).
        private let places: ScratchArray<Payload>
        /// The bodies of ``Payload/kept(_:)`` places.
        private var kept: [BodyPlace] = []
        /// Whether the entries are returned (small bodies stay in memory) rather than sent to a store.
        private let inMemory: Bool
        /// The WARC files read, by number, and a reader of each opened for a revisit (kept: a reader's buffers cost more
        /// to make than a record to read).
        private var warcs: [(path: String, shown: String)] = []
        private var readers: [Int: WARCReader] = [:]
        /// WACZ packages unpacked: their WARCs stay until the import ends, for revisits across them.
        private var unpacked: [ScratchFolder] = []
        /// Bodies kept aside for revisits (``remember(_:of:in:)``), one after the other in one file, written a megabyte
        /// at a time.
        private var aside: FileHandle?
        private var asideBuffer = Data()
        private var asideWritten: UInt64 = 0

        enum BodyPlace {
            case memory(Data)
            case file(String)
        }

        /// Where a response's payload is found again: its body kept (in memory, or a file of its own), or its record in
        /// the WARC, read again when a revisit names it. Writing every response's body aside for a revisit that may
        /// never come cost a tenth of an import. 32 bytes, whatever the kind.
        private struct Payload {
            private var kind: Int32
            private var warc: Int32
            private var offset: Int
            private var within: Int
            private var id: UInt64

            enum Kind {
                /// The body at this position of ``Spool/kept``.
                case kept(Int)
                /// Bytes of the file of bodies kept aside.
                case aside(offset: UInt64, count: Int)
                /// `offset` and `within`: where the record starts (``WARCReader/Record``); `id`: the first 8 bytes of the
                /// SHA-256 of its record ID (0 for none), checked when it is read again.
                case record(warc: Int32, offset: Int, within: Int, id: UInt64)
            }

            init(_ kind: Kind) {
                switch kind {
                case .kept(let index): (self.kind, warc, offset, within, id) = (0, 0, index, 0, 0)
                case .aside(let offset, let count): (self.kind, warc, self.offset, within, id) = (1, 0, Int(offset), count, 0)
                case .record(let warc, let offset, let within, let id):
                    (self.kind, self.warc, self.offset, self.within, self.id) = (2, warc, offset, within, id)
                }
            }

            var place: Kind {
                switch kind {
                case 0: .kept(offset)
                case 1: .aside(offset: UInt64(offset), count: within)
                default: .record(warc: warc, offset: offset, within: within, id: id)
                }
            }
        }

        /// A body at least this large goes to a file of its own, not into memory, until the bundle is written: 16 KiB
        /// when the entries are returned, 1 MiB when they go to a store (which compresses each at once, and keeps it in
        /// its budget or its overflow file: a file per body cost more than the rest of the import).
        let spoolAt: Int

        init(inMemory: Bool, in parent: String) throws {
            folder = try ScratchFolder(in: parent)
            payloads = DigestTable(folder: folder.path)
            places = ScratchArray(folder: folder.path, memoryLimit: 2 << 20, pageBytes: 16 << 10)
            self.inMemory = inMemory
            spoolAt = inMemory ? 16 << 10 : 1 << 20
        }

        /// The number the records of the WARC at `path` (`shown` so) are remembered by, for a WARC about to be read.
        func warc(_ path: String, shownAs shown: String) -> Int {
            warcs.append((path, shown))
            return warcs.count - 1
        }

        /// Keeps `folder` (a WACZ unpacked) until ``remove(spooled:)``.
        func keep(unpacked folder: ScratchFolder) { unpacked.append(folder) }

        /// Removes the unpacked packages (the import is over) and, when `spooled`, the spooled bodies (the bundle will
        /// not be written).
        func remove(spooled: Bool) {
            try? aside?.close()
            aside = nil
            readers = [:]
            for folder in unpacked { folder.remove() }
            unpacked = []
            if spooled { folder.remove() }
        }

        /// Where `body` is kept until the bundle is written.
        func keep(_ body: Data) throws -> BodyPlace {
            guard body.count >= spoolAt else { return .memory(body) }
            files += 1
            let path = folder.newFile(files)
            do {
                try body.write(to: URL(fileURLWithPath: path))
            } catch {
                throw PackagerError(.io, "cannot spool a body to \(path)", cause: error)
            }
            return .file(path)
        }

        /// Keeps where the body of `record` (of the WARC numbered `warc`) is, for revisits naming its record ID or its
        /// payload digest.
        ///
        /// A record in a gzip member too large to inflate whole (a whole file gzipped as one) is not read again: each
        /// revisit would inflate the member from its start. Its body is kept aside in one file instead.
        func remember(_ body: BodyPlace, of record: WARCReader.Record, in warc: Int) throws {
            let id = record.fields["warc-record-id"].map { ExchangeImport.KeyDigest($0) }
            let digest = record.fields["warc-payload-digest"].map { ExchangeImport.KeyDigest($0) }
            guard id != nil || digest != nil, places.count < Int(UInt32.max) else { return }
            do {
                if case .memory(let data) = body, !inMemory {
                    try places.append(
                        Payload(
                            record.inLargeMember
                                ? try keepAside(data)
                                : .record(warc: Int32(warc), offset: record.offset, within: record.within, id: id?.high ?? 0)))
                } else {
                    kept.append(body)
                    try places.append(Payload(.kept(kept.count - 1)))
                }
                let place = UInt32(places.count - 1)
                if let id { try payloads.set(UInt64(place), for: id) }
                if let digest { try payloads.set(UInt64(place), for: digest) }
            } catch let error as BundleError {
                throw PackagerError(.io, "cannot keep where the archive's payloads are in \(folder.path)", cause: error)
            }
        }

        /// `body` appended to the file of bodies kept aside.
        private func keepAside(_ body: Data) throws -> Payload.Kind {
            if aside == nil {
                let path = folder.path + "/aside"
                guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forUpdatingAtPath: path) else {
                    throw PackagerError(.io, "cannot write \(path)")
                }
                aside = handle
            }
            let place = Payload.Kind.aside(offset: asideWritten + UInt64(asideBuffer.count), count: body.count)
            asideBuffer.append(body)
            if asideBuffer.count >= 1 << 20 { try flushAside() }
            return place
        }

        private func flushAside() throws {
            guard let aside, !asideBuffer.isEmpty else { return }
            do {
                try aside.seekToEnd()
                try aside.write(contentsOf: asideBuffer)
            } catch {
                throw PackagerError(.io, "cannot write the bodies kept for revisits to \(folder.path)", cause: error)
            }
            asideWritten += UInt64(asideBuffer.count)
            asideBuffer.removeAll(keepingCapacity: true)
        }

        private func readAside(offset: UInt64, count: Int) throws -> BodyPlace {
            try flushAside()
            guard let aside else { return .memory(Data()) }
            do {
                try aside.seek(toOffset: offset)
                return .memory(try aside.read(upToCount: count) ?? Data())
            } catch {
                throw PackagerError(.io, "cannot read back the bodies kept for revisits from \(folder.path)", cause: error)
            }
        }

        /// The payload a revisit names, as a body of its own; nil when no response of the archive had it.
        func payload(_ name: String) throws -> BodyPlace? {
            let place: Payload.Kind
            do {
                guard let index = try payloads.value(for: ExchangeImport.KeyDigest(name)) else { return nil }
                place = try places.value(at: Int(index)).place
            } catch let error as BundleError {
                throw PackagerError(.io, "cannot read back where the archive's payloads are in \(folder.path)", cause: error)
            }
            if case .aside(let offset, let count) = place { return try readAside(offset: offset, count: count) }
            guard case .record(let number, let offset, let within, let id) = place else {
                if case .kept(let index) = place { return kept[index] }
                return nil
            }
            let warc = Int(number)
            // Taken out while it reads, not copied: a copy of a reader copies its buffers on its first write.
            var reader = try readers.removeValue(forKey: warc) ?? WARCReader(path: warcs[warc].path)
            defer { readers[warc] = reader }
            reader.seek(to: offset, within: within)
            guard let record = try reader.next(), record.type == "response",
                (record.fields["warc-record-id"].map { ExchangeImport.KeyDigest($0).high } ?? 0) == id
            else {
                throw PackagerError(.invalidInput, "\(warcs[warc].shown): the record at offset \(offset), which a revisit refers to, is no longer there")
            }
            do {
                return .memory(try WARCImporter.decoded(try WARCImporter.http(record.block)))
            } catch let problem as Unreadable {
                throw PackagerError(.invalidInput, "\(warcs[warc].shown): the record at offset \(offset) no longer reads as it did: \(problem.reason)")
            }
        }
    }
}
