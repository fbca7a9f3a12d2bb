import Foundation

/// What the Prefs commits of one file changed, kept beside the file in its commit file (``CommitFile``, written
/// under the file's lock just before the rename), so that every process writing the file can tell:
///
/// - whether a key changed since a commit it knew (``changed(_:since:)``): a deferred change gives way to a later
///   write of its key by another process, even one that put back the very value the change replaced;
/// - for a UserDefaults suite, which values a lock-less in-place rewrite (Foundation's `synchronize()`) put back
///   from before the latest Prefs commits of their keys, and what those latest values were (``recent``): the
///   rewrite keeps the file's inode, and so this record, while changing its bytes.
///
/// Keys and values are kept as 64-bit hashes (``StableHash``; a vault's key names as keyed hashes), and the record
/// stays under ``sizeLimit``: the least recently changed keys are dropped first, and ``floor`` then says up to which
/// commit a change may be missing. What the record cannot tell, the engine decides by comparing values, as it did
/// without one.
struct CommitRecord: Equatable, Sendable {
    /// Chosen at random when a file's record starts: generations of one lineage can be compared.
    var lineage: UInt64 = 0
    /// How many commits with a record the file has had.
    var generation: UInt64 = 0
    /// A key may have changed at a generation up to this one without being in ``changed``.
    var floor: UInt64 = 0
    /// The size and hash of the bytes committed with this record; bytes that differ were rewritten since.
    var contentSize: UInt64 = 0
    var contentHash: UInt64 = 0
    /// The size and hash of the bytes the commit before this one left: a file that still holds them is a commit
    /// whose record was written and whose rename never happened (a writer killed between the two).
    var previousSize: UInt64 = 0
    var previousHash: UInt64 = 0
    /// The generation at which each key (by hash) last changed.
    var changed: [UInt64: UInt64] = [:]
    /// For a suite: the keys changed within ``restoreWindow``.
    var recent: [UInt64: Recent] = [:]

    /// A key's latest commit within the window.
    struct Recent: Equatable, Sendable {
        /// The hash of its value after the latest commit (``absentHash``: removed).
        var latest: UInt64
        /// The hashes of the values it replaced within the window, oldest first.
        var earlier: [UInt64]
        /// When it was committed, on the system clock every process shares (milliseconds).
        var time: Int64
    }

    /// How long a commit is remembered for restoring: far longer than Foundation takes between its read of a suite
    /// and its rewrite (its read retries for up to 450 ms on a file it cannot parse).
    static let restoreWindow: Duration = .seconds(5)
    /// The most earlier values remembered per key.
    static let earlierLimit = 256
    /// The most bytes a record takes: it is read whenever another writer changed the file.
    static let sizeLimit = 3 * 1024
    /// The hash standing for "no value".
    static let absentHash: UInt64 = 0

    // MARK: Questions

    /// Whether these are the bytes this record was committed with (not rewritten in place since).
    func describes(_ data: Data) -> Bool { describes(size: data.count, hash: StableHash.ofContents(data)) }

    /// The same, for bytes of `size` whose ``StableHash/ofContents(_:)`` is `hash`.
    func describes(size: Int, hash: UInt64) -> Bool { contentSize == UInt64(size) && contentHash == hash }

    /// Whether these are the bytes of the commit before this record's: this record's commit never reached the file.
    func describesPrevious(_ data: Data) -> Bool {
        generation > 0 && previousSize == UInt64(data.count) && previousHash == StableHash.ofContents(data)
    }

    /// Whether the key with hash `key` changed after generation `base`; nil when the record cannot tell.
    func changed(_ key: UInt64, since base: UInt64) -> Bool? {
        if let at = changed[key] { return at > base }
        return base >= floor ? false : nil
    }

    /// For a suite rewritten in place since this record: whether the value with hash `found` that the file now
    /// holds for `key` is one the key's latest commit replaced within the window (a stale copy, not a new value),
    /// and if so the hash of the value it must have again.
    func staleValue(_ key: UInt64, found: UInt64, now: Duration) -> UInt64? {
        guard let entry = recent[key], Self.isRecent(entry.time, now: now), entry.latest != found,
            entry.earlier.contains(found)
        else { return nil }
        return entry.latest
    }

    // MARK: The next commit

    /// The record of a commit that changes `changes` (key hash, old value hash, new value hash) at `now`, made
    /// from this record as read with the file. `intact`: the file's bytes are still those of this record; when
    /// they are not (or there was no record), changes before this commit may be missing, and `floor` says so.
    func next(
        changing changes: [(key: UInt64, old: UInt64, new: UInt64)], intact: Bool, keepsRecent: Bool, now: Duration
    ) -> CommitRecord {
        var next = self
        next.previousSize = intact ? contentSize : 0
        next.previousHash = intact ? contentHash : 0
        if !intact { next.floor = generation }
        next.generation = generation + 1
        let time = Self.milliseconds(now)
        next.recent = recent.filter { keepsRecent && Self.isRecent($0.value.time, now: now) }
        for change in changes {
            next.changed[change.key] = next.generation
            guard keepsRecent else { continue }
            var entry = next.recent[change.key] ?? Recent(latest: change.new, earlier: [], time: time)
            entry.earlier.removeAll { $0 == change.old || $0 == change.new }
            entry.earlier.append(change.old)
            if entry.earlier.count > Self.earlierLimit { entry.earlier.removeFirst() }
            entry.latest = change.new
            entry.time = time
            next.recent[change.key] = entry
        }
        next.shrink()
        return next
    }

    /// Drops what does not fit ``sizeLimit``: first the keys changed longest ago (their generation only matters to
    /// a change deferred before them; ``floor`` then says so), keeping room for the values of the restoring window,
    /// then the oldest entries of that window.
    private mutating func shrink() {
        guard encodedSize > Self.sizeLimit else { return }
        let recentSize = encodedSize - Self.headerSize - changed.count * Self.changedEntrySize
        evictChanged(keeping: max(32, (Self.sizeLimit - Self.headerSize - recentSize) / Self.changedEntrySize))
        var size = encodedSize
        for (key, entry) in recent.sorted(by: { $0.value.time < $1.value.time }) where size > Self.sizeLimit {
            recent[key] = nil
            size -= Self.encodedSize(of: entry)
        }
        if encodedSize > Self.sizeLimit {
            evictChanged(
                keeping: (Self.sizeLimit - encodedSize + changed.count * Self.changedEntrySize)
                    / Self.changedEntrySize)
        }
    }

    /// Keeps the `count` keys changed most recently in ``changed``, raising ``floor`` past the others.
    private mutating func evictChanged(keeping count: Int) {
        guard changed.count > count else { return }
        for (key, at) in changed.sorted(by: { $0.value > $1.value }).dropFirst(max(0, count)) {
            changed[key] = nil
            floor = max(floor, at)
        }
    }

    private static func isRecent(_ time: Int64, now: Duration) -> Bool {
        let age = milliseconds(now) - time
        return age >= 0 && age < milliseconds(restoreWindow)
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    // MARK: Encoding

    private static let magic: [UInt8] = Array("PRC2".utf8)
    private static let headerSize = 4 + 7 * 8 + 4 + 4
    private static let changedEntrySize = 16

    private var encodedSize: Int {
        Self.headerSize + changed.count * Self.changedEntrySize
            + recent.values.reduce(0) { $0 + Self.encodedSize(of: $1) }
    }

    private static func encodedSize(of entry: Recent) -> Int { 26 + 8 * entry.earlier.count }

    /// The record as kept with the file: little-endian, keys in order.
    func encoded() -> Data {
        var bytes = Self.magic
        bytes.reserveCapacity(encodedSize)
        for value in [lineage, generation, floor, contentSize, contentHash, previousSize, previousHash] {
            bytes.appendLittleEndian(value)
        }
        bytes.appendLittleEndian(UInt32(changed.count))
        for (key, at) in changed.sorted(by: { $0.key < $1.key }) {
            bytes.appendLittleEndian(key)
            bytes.appendLittleEndian(at)
        }
        bytes.appendLittleEndian(UInt32(recent.count))
        for (key, entry) in recent.sorted(by: { $0.key < $1.key }) {
            bytes.appendLittleEndian(key)
            bytes.appendLittleEndian(entry.time)
            bytes.appendLittleEndian(entry.latest)
            bytes.appendLittleEndian(UInt16(entry.earlier.count))
            for hash in entry.earlier { bytes.appendLittleEndian(hash) }
        }
        return Data(bytes)
    }

    /// Reads a record; nil when `data` is not one this version writes (it is then ignored, never trusted).
    init?(_ data: Data) {
        let parsed: CommitRecord? = data.withUnsafeBytes { buffer in
            var reader = LittleEndianReader(buffer)
            do throws(BinaryFormatFailure) {
                guard try reader.slice(4).elementsEqual(Self.magic) else { return nil }
                var record = CommitRecord()
                record.lineage = try reader.integer(UInt64.self)
                record.generation = try reader.integer(UInt64.self)
                record.floor = try reader.integer(UInt64.self)
                record.contentSize = try reader.integer(UInt64.self)
                record.contentHash = try reader.integer(UInt64.self)
                record.previousSize = try reader.integer(UInt64.self)
                record.previousHash = try reader.integer(UInt64.self)
                for _ in 0..<(try reader.integer(UInt32.self)) {
                    let key = try reader.integer(UInt64.self)
                    record.changed[key] = try reader.integer(UInt64.self)
                }
                for _ in 0..<(try reader.integer(UInt32.self)) {
                    let key = try reader.integer(UInt64.self)
                    let time = try reader.integer(Int64.self)
                    let latest = try reader.integer(UInt64.self)
                    var earlier: [UInt64] = []
                    for _ in 0..<(try reader.integer(UInt16.self)) { earlier.append(try reader.integer(UInt64.self)) }
                    record.recent[key] = Recent(latest: latest, earlier: earlier, time: time)
                }
                return reader.remaining == 0 ? record : nil
            } catch {
                return nil
            }
        }
        guard let parsed else { return nil }
        self = parsed
    }

    init() {}

    /// The record a file without one starts with.
    init(lineage: UInt64) { self.lineage = lineage }
}

/// The file beside a store file that holds its latest commit's ``CommitRecord`` and, once a lock-less rewriter of the
/// file was seen, a copy of the bytes that commit wrote: `.<name>.commit`. Written in place under the file's lock just
/// before the rename, not synced: after a crash it may describe the commit before, or one that never reached the file
/// (``CommitRecord/describesPrevious(_:)``), or not decode; the engine then decides by comparing values, as without
/// one. Nothing in it is needed to read or write the store.
enum CommitFile {
    private static let magic: [UInt8] = Array("PRF1".utf8)

    /// Where the commit file of the store file at `path` is.
    static func path(of path: String) -> String {
        POSIX.parentPath(of: path) + "/." + POSIX.lastComponent(of: path) + ".commit"
    }

    static func encode(_ record: CommitRecord, copy: Data?) -> Data {
        let recordBytes = record.encoded()
        var bytes = magic
        bytes.appendLittleEndian(UInt32(recordBytes.count))
        var data = Data(bytes)
        data.append(recordBytes)
        if let copy { data.append(copy) }
        return data
    }

    /// The record and the copy (nil: none) in a commit file; nil when `data` is not one.
    static func decode(_ data: Data) -> (record: CommitRecord, copy: Data?)? {
        guard data.count >= 8, data.prefix(4).elementsEqual(magic) else { return nil }
        let length = data.dropFirst(4).prefix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
        guard data.count - 8 >= length else { return nil }
        let start = data.startIndex + 8
        guard let record = CommitRecord(Data(data[start..<(start + length)])) else { return nil }
        let rest = data[(start + length)...]
        return (record, rest.isEmpty ? nil : Data(rest))
    }
}

extension Optional where Wrapped == PrefValue {
    /// This value's hash as a commit record keeps it (``CommitRecord/absentHash`` for none), the same in every
    /// process: every bit of the value counts, so a `Float` and the `Double` Foundation turns it into differ.
    var recordHash: UInt64 {
        guard let self else { return CommitRecord.absentHash }
        var bytes: [UInt8] = []
        self.appendRecordBytes(to: &bytes)
        let hash = StableHash.of(bytes)
        return hash == CommitRecord.absentHash ? 1 : hash
    }
}

extension PrefValue {
    fileprivate func appendRecordBytes(to bytes: inout [UInt8]) {
        func appendText(_ text: some Collection<UInt8>) {
            bytes.appendLittleEndian(UInt64(text.count))
            bytes.append(contentsOf: text)
        }
        switch self {
        case .bool(let value): bytes += [1, value ? 1 : 0]
        case .int(let value):
            bytes.append(2)
            bytes.appendLittleEndian(value)
        case .unsignedInt(let value):
            bytes.append(3)
            bytes.appendLittleEndian(value)
        case .float(let value):
            bytes.append(4)
            bytes.appendLittleEndian(value.bitPattern)
        case .double(let value):
            bytes.append(5)
            bytes.appendLittleEndian(value.bitPattern)
        case .string(let value):
            bytes.append(6)
            appendText(value.utf8)
        case .data(let value):
            bytes.append(7)
            appendText(value)
        case .date(let value):
            bytes.append(8)
            bytes.appendLittleEndian(value.timeIntervalSinceReferenceDate.bitPattern)
        case .array(let values):
            bytes.append(9)
            bytes.appendLittleEndian(UInt64(values.count))
            for value in values { value.appendRecordBytes(to: &bytes) }
        case .dictionary(let values):
            bytes.append(10)
            bytes.appendLittleEndian(UInt64(values.count))
            for (key, value) in values.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                appendText(key.utf8)
                value.appendRecordBytes(to: &bytes)
            }
        }
    }
}
