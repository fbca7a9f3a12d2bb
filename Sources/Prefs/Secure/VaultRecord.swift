import CSodium
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The last identity (vault id and generation) seen of each vault, remembered between processes so that a vault
/// replaced by an older copy of itself, or by another vault, is refused when it is opened again.
///
/// One small text file per vault in `$XDG_STATE_HOME/prefs/vaults/` (or `~/.local/state/prefs/vaults/`), named by
/// a hash of the vault's absolute path. Records only ever move forward, and are written after the vault itself, so
/// a crash can leave a record behind its vault (harmless) but never ahead of it. A record that cannot be read or
/// written is never skipped silently: its reads and writes say why, and the store reports it.
enum VaultRecord {
    /// The folder of the records: `$XDG_STATE_HOME/prefs/vaults`, falling back to `$HOME/.local/state/prefs/vaults`,
    /// resolved once per process like every other folder Prefs uses (`Locations`); inside a test under
    /// `.isolatedPreferences`, the test's own folder. A vault keeps the folder it was opened with.
    static var directory: String { scopedDirectory ?? processDirectory }

    /// The folder of the records of vaults opened inside a test under `.isolatedPreferences`.
    @TaskLocal static var scopedDirectory: String?

    private static let processDirectory = Locations.current.stateHome.appending(path: "prefs/vaults").path(
        percentEncoded: false)

    /// The record file of the vault at `vaultPath`.
    static func path(forVault vaultPath: String) -> String { path(forCanonical: canonicalPath(vaultPath)) }

    /// The record file of the vault whose ``canonicalPath(_:)`` is `canonical`.
    private static func path(forCanonical canonical: String) -> String {
        var digest = [UInt8](repeating: 0, count: 16)
        Sodium.ensureInitialized()
        _ = crypto_generichash(&digest, digest.count, Array(canonical.utf8), UInt64(canonical.utf8.count), nil, 0)
        let digits = Array("0123456789abcdef".utf8)
        var name = [UInt8]()
        name.reserveCapacity(digest.count * 2)
        for byte in digest { name += [digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]] }
        return directory + "/" + String(decoding: name, as: UTF8.self) + ".record"
    }

    /// The vault's absolute path with its folder's symbolic links resolved, so two spellings share one record.
    static func canonicalPath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let folder = POSIX.parentPath(of: absolute)
        guard let resolved = realpath(folder, nil) else { return absolute }
        defer { free(resolved) }
        let base = String(cString: resolved)
        return (base == "/" ? "" : base) + "/" + POSIX.lastComponent(of: absolute)
    }

    /// One vault's record, as a store uses it for as long as it is open: the vault's canonical path and the record's
    /// path, worked out once (resolving the vault's folder is most of it); after an append, the record itself, kept
    /// open (see ``Appendable``).
    final class Location: Sendable {
        /// The vault's ``VaultRecord/canonicalPath(_:)``, written into the record.
        let canonicalVaultPath: String
        let path: String
        /// The record as this store last appended to it; only used holding the record's lock.
        fileprivate let kept = Mutex<Appendable?>(nil)

        init(forVault vaultPath: String) {
            canonicalVaultPath = VaultRecord.canonicalPath(vaultPath)
            path = VaultRecord.path(forCanonical: canonicalVaultPath)
        }

        deinit { forget() }

        /// Closes the kept record, if any: the next write reads the record again.
        fileprivate func forget() {
            if let fd = kept.withLock({ $0.take() })?.fd { close(fd) }
        }

        /// Keeps `fd` (just appended to, holding `identity` last) open for the next append, or closes it once the
        /// record is due to be rewritten whole.
        fileprivate func keep(_ fd: Int32, holding identity: VaultIdentity) {
            var info = stat()
            let next =
                fstat(fd, &info) == 0 && info.st_size < 4096
                ? Appendable(fd: fd, file: FileIdentity(info), identity: identity) : nil
            let previous = kept.withLock { kept in
                defer { kept = next }
                return kept
            }
            if let previous, previous.fd != fd { close(previous.fd) }
            if next == nil { close(fd) }
        }
    }

    /// A record this store appended to last, kept open so that the next generation is appended without reading the
    /// record again: while the file at the record's path is exactly the one left then (same inode, size and times),
    /// it still holds `identity` last, in this version's format, under 4 KiB, ending with a newline. Any other file
    /// there (another process appended, rewrote, replaced or removed it) is read again in full.
    fileprivate struct Appendable {
        var fd: Int32
        var file: FileIdentity
        var identity: VaultIdentity
    }

    /// What a vault's record says when it is read.
    enum Reading: Equatable {
        /// No record (or an empty one): the vault has not been seen here, and is trusted on first use.
        case none
        /// The last identity seen.
        case identity(VaultIdentity)
        /// A record that cannot be read or does not parse (`reason` says why): the check cannot run.
        case unusable(reason: String)
    }

    /// The remembered identity, nothing, or why the record cannot be used; and whether the record is a file this
    /// process opened for writing as ``remember(_:in:replacing:)`` does, so ``problem(keeping:)`` has nothing to add.
    static func read(_ record: Location) -> (reading: Reading, writable: Bool) {
        // Read through the descriptor a write would use; anything else (missing, a link, no permission) as before.
        if let found = try? readForWriting(record) { return (reading(found), true) }
        let found: Data?
        do { found = try fileSystem.read(record.path, through: nil)?.data } catch {
            return (.unusable(reason: "cannot be read (\(error.prefsError))"), false)
        }
        return (reading(found), false)
    }

    /// The record's contents, read through a descriptor opened for writing; nil when it does not exist.
    private static func readForWriting(_ record: Location) throws(SystemCallError) -> Data? {
        guard
            let (fd, info) = try POSIX.openRegularFile(
                atPath: record.path, access: O_RDWR, followingSymlinks: false, maximumSize: 1 << 20)
        else { return nil }
        defer { close(fd) }
        return try POSIX.readAll(fd, path: record.path, expectedSize: Int(info.st_size))
    }

    /// What the record's contents `found` say.
    private static func reading(_ found: Data?) -> Reading {
        guard let found, !found.isEmpty else { return .none }
        guard let identity = parse(found) else { return .unusable(reason: unparsable) }
        return .identity(identity)
    }

    /// Why a record that exists does not count: it is left as it is, never rewritten to a lower generation.
    private static let unparsable =
        "does not parse (its last line is not a generation); it was left as it is: delete it once you trust the "
        + "vault as it is now"

    /// Why the record could not be kept once it is written, found without writing anything: nil when it exists and
    /// parses and can be written, or when it does not exist yet and its folder (or the nearest one that exists) is
    /// a folder this process can write.
    static func problem(keeping record: Location) -> String? {
        do throws(SystemCallError) {
            if let (fd, info) = try POSIX.openRegularFile(
                atPath: record.path, access: O_RDWR, followingSymlinks: false, maximumSize: 1 << 20)
            {
                defer { close(fd) }
                let data = try POSIX.readAll(fd, path: record.path, expectedSize: Int(info.st_size))
                return data.isEmpty || parse(data) != nil ? nil : unparsable
            }
        } catch  where error.errno == ENOTDIR {
            // Something other than a folder on the way: found below.
        } catch {
            return "cannot be written (\(error.prefsError))"
        }
        var folder = POSIX.parentPath(of: record.path)
        while true {
            var info = stat()
            if stat(folder, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    return "cannot be created: \(folder) is \(POSIX.kindName(info.st_mode)), not a folder"
                }
                guard access(folder, W_OK) == 0 else {
                    return "cannot be created in \(folder): \(POSIX.message(for: errno))"
                }
                return nil
            }
            guard errno == ENOENT || errno == ENOTDIR, folder != "/" else {
                return "cannot be created in \(folder): \(POSIX.message(for: errno))"
            }
            folder = POSIX.parentPath(of: folder)
        }
    }

    /// Remembers `identity` for the vault, and returns why it could not (nil when the record is up to date). A
    /// record of the same vault at the same or a newer generation is kept; unless `replacing` (a vault this process
    /// has just written), so is a record of another vault. A record that does not parse is never rewritten, so it is
    /// never lowered.
    ///
    /// A new generation of the same vault is appended as one more line: replacing the file by a rename on every
    /// vault write made the file system flush the new file at once, which cost a third of a secure write. The
    /// record is rewritten whole (still by rename) for another vault, once it passes 4 KiB, or when its last line
    /// is incomplete. The record is read and appended to through one descriptor.
    ///
    /// A store that appended the last line keeps the record open (``Appendable``): its next generation of the same
    /// vault is appended after one `lstat` shows the record untouched since, without opening or reading it.
    ///
    /// `replacing` is a commit's, made holding the vault's own lock, which every process committing this vault
    /// takes: the record needs no lock of its own then. Only a first open (which takes no lock of the vault) locks
    /// the record by `flock` on itself; such a writer racing a commit can at worst leave the record behind the
    /// vault, never ahead of it, as it writes only an identity it read from the vault.
    @discardableResult
    static func remember(_ identity: VaultIdentity, in record: Location, replacing: Bool) -> String? {
        do {
            if replacing { return try rememberLocked(identity, in: record, replacing: true) }
            let lock = try fileSystem.lock(record.path, timeout: LockWait.timeout, clock: .system)
            defer { lock.release() }
            return try rememberLocked(identity, in: record, replacing: false)
        } catch let error as SystemCallError {
            return "cannot be written (\(error.prefsError))"
        } catch {
            return "cannot be written (\(error))"
        }
    }

    /// The system's file system, through which records are read, locked and replaced.
    private static let fileSystem = POSIXFileSystem()

    /// ``remember(_:in:replacing:)`` holding the record's lock, or the vault's.
    private static func rememberLocked(_ identity: VaultIdentity, in record: Location, replacing: Bool) throws
        -> String?
    {
        do {
            return try { () throws -> String? in
                if replacing, appendKnown(identity, to: record) { return nil }
                func open(_ access: Int32) throws(SystemCallError) -> (fd: Int32, info: stat)? {
                    try POSIX.openRegularFile(
                        atPath: record.path, access: access, followingSymlinks: false, maximumSize: 1 << 20)
                }
                var opened: (fd: Int32, info: stat)?
                var readOnly: SystemCallError?
                do throws(SystemCallError) {
                    opened = try open(O_RDWR | O_APPEND)
                } catch  where error.errno == EACCES || error.errno == EROFS {
                    // A record that cannot be written to still says which generation must not be undone.
                    readOnly = error
                    do throws(SystemCallError) { opened = try open(O_RDONLY) } catch {
                        return "cannot be read (\(error.prefsError))"
                    }
                } catch {
                    return "cannot be opened (\(error.prefsError))"
                }
                var keeping = false
                defer { if let opened, !keeping { close(opened.fd) } }
                var existing: Data?
                if let opened {
                    do throws(SystemCallError) {
                        existing = try POSIX.readAll(
                            opened.fd, path: record.path, expectedSize: Int(opened.info.st_size))
                    } catch {
                        return "cannot be read (\(error.prefsError))"
                    }
                }
                if existing?.isEmpty == true { existing = nil }
                var current: VaultIdentity?
                if let existing {
                    guard let parsed = parse(existing) else { return unparsable }
                    current = parsed
                }
                if let current, current == identity { return nil }
                if let current, current.id == identity.id, current.generation >= identity.generation { return nil }
                if !replacing, current != nil { return nil }
                if let readOnly { return "cannot be written (\(readOnly.prefsError))" }
                // Not synced: a record lost in a crash only lags behind its vault, which is safe (and saves two
                // fsyncs on every vault write).
                if let existing, let current, current.id == identity.id, existing.count < 4096, existing.last == 0x0A,
                    existing.starts(with: Array(header.utf8)), let opened,
                    append(identity, to: opened.fd, record: record)
                {
                    keeping = true
                    record.keep(opened.fd, holding: identity)
                    return nil
                }
                let text = "\(header)\n\(record.canonicalVaultPath)\n\(identity.idText)\n\(identity.generation)\n"
                // Not synced: a record lost in a crash only lags behind its vault, which is safe.
                let temporary = try fileSystem.writeTemporary(
                    beside: record.path, data: Data(text.utf8), mode: 0o600, durable: false)
                _ = try fileSystem.commit(temporary, to: record.path)
                return nil
            }()
        }
    }

    /// Appends `identity`'s generation to the record this store appended to last, if that is still the file at the
    /// record's path and `identity` is a later generation of the same vault; false when the record must be read
    /// (having closed the kept one).
    private static func appendKnown(_ identity: VaultIdentity, to record: Location) -> Bool {
        guard let kept = record.kept.withLock({ $0 }) else { return false }
        var info = stat()
        guard lstat(record.path, &info) == 0, FileIdentity(info) == kept.file, kept.identity.id == identity.id,
            kept.identity.generation < identity.generation, append(identity, to: kept.fd, record: record)
        else {
            record.forget()
            return false
        }
        record.keep(kept.fd, holding: identity)
        return true
    }

    /// Appends `identity`'s generation as one line to the record open as `fd` (for appending); false if it failed.
    private static func append(_ identity: VaultIdentity, to fd: Int32, record: Location) -> Bool {
        var line = "\(identity.generation)\n"
        return line.withUTF8 { (try? POSIX.writeAll(fd, UnsafeRawBufferPointer($0), path: record.path)) != nil }
    }

    /// The first line of the records this version writes; version 1 records (a single generation line) still read.
    private static let header = "prefs vault record 2"

    /// The identity in a record: a header line, the vault's path, its id in hex, then one generation per line; the
    /// last complete line is the newest (a line cut short by a crash, without its newline, is ignored). Read byte by
    /// byte, as it is on every open of a vault.
    private static func parse(_ data: Data) -> VaultIdentity? {
        let bytes = [UInt8](data)
        // The three header lines, then the generations: only the last complete one is read.
        let lines = bytes.split(separator: 0x0A, maxSplits: 3, omittingEmptySubsequences: false)
        guard lines.count == 4,
            lines[0].elementsEqual(header.utf8) || lines[0].elementsEqual("prefs vault record 1".utf8),
            lines[2].count == 2 * VaultIdentity.idCount,
            let end = lines[3].lastIndex(of: 0x0A)  // what follows the last newline: nothing, or a cut-short line
        else { return nil }
        let start = lines[3][..<end].lastIndex(of: 0x0A).map { $0 + 1 } ?? lines[3].startIndex
        let last = lines[3][start..<end]
        guard !last.isEmpty, last.count <= 20 else { return nil }
        var id: [UInt8] = []
        id.reserveCapacity(VaultIdentity.idCount)
        var hex = lines[2].makeIterator()
        while let high = hex.next(), let low = hex.next() {
            guard let high = high.asciiHexDigit, let low = low.asciiHexDigit else { return nil }
            id.append(high << 4 | low)
        }
        var generation: UInt64 = 0
        for byte in last {
            guard let value = byte.asciiHexDigit, value < 10 else { return nil }
            let (times, overflowTimes) = generation.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(UInt64(value))
            guard !overflowTimes, !overflowSum else { return nil }
            generation = sum
        }
        return VaultIdentity(id: id, generation: generation)
    }
}
