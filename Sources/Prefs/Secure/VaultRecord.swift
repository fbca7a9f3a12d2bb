import CSodium
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The last identity (vault id and generation) seen of each vault, remembered between processes so that a vault
/// replaced by an older copy of itself, or by another vault, is refused when it is opened again.
///
/// One small text file per vault in `$XDG_STATE_HOME/prefs/vaults/` (or `~/.local/state/prefs/vaults/`), named by
/// a hash of the vault's absolute path, replaced whole through the file-system seam. Records only ever move
/// forward, and are written after the vault itself, so a crash can leave a record behind its vault (harmless) but
/// never ahead of it. A record that cannot be read or written is never skipped silently: the store reports why.
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

    /// One vault's record: the vault's canonical path and the record's path, worked out once (resolving the
    /// vault's folder is most of it).
    struct Location: Sendable {
        /// The vault's ``VaultRecord/canonicalPath(_:)``, written into the record.
        let canonicalVaultPath: String
        let path: String

        init(forVault vaultPath: String) {
            canonicalVaultPath = VaultRecord.canonicalPath(vaultPath)
            path = VaultRecord.path(forCanonical: canonicalVaultPath)
        }
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

    /// The system's file system, through which records are read and replaced.
    private static let fileSystem = POSIXFileSystem()

    /// The remembered identity, nothing, or why the record cannot be used.
    static func read(_ record: Location) -> Reading {
        let found: Data?
        do { found = try fileSystem.read(record.path, through: nil)?.data } catch  where error.errno == ENOTDIR {
            found = nil  // something other than a folder on the way: no record (``problem(keeping:)`` says what)
        } catch {
            return .unusable(reason: "cannot be read (\(error.prefsError))")
        }
        guard let found, !found.isEmpty else { return .none }
        guard let identity = parse(found) else { return .unusable(reason: unparsable) }
        return .identity(identity)
    }

    /// Why a record that exists does not count: it is left as it is, never rewritten to a lower generation.
    private static let unparsable =
        "does not parse (its last line is not a generation); it was left as it is: delete it once you trust the "
        + "vault as it is now"

    /// Why the record could not be kept, found without writing anything: nil when it reads and its folder (or the
    /// nearest one that exists) is a folder this process can write.
    static func problem(keeping record: Location) -> String? {
        if case .unusable(let reason) = read(record) { return reason }
        var folder = POSIX.parentPath(of: record.path)
        while true {
            var info = stat()
            if stat(folder, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    return "cannot be created: \(folder) is \(POSIX.kindName(info.st_mode)), not a folder"
                }
                guard access(folder, W_OK) == 0 else {
                    return "cannot be written in \(folder): \(POSIX.message(for: errno))"
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
    /// The record is replaced whole by a rename, not synced: a record lost in a crash only lags behind its vault,
    /// which is safe. Two processes remembering at once need no lock: each writes an identity its vault had, so the
    /// record can lag behind the vault, never lead it.
    @discardableResult
    static func remember(_ identity: VaultIdentity, in record: Location, replacing: Bool) -> String? {
        switch read(record) {
        case .unusable(let reason): return reason
        case .identity(let current):
            if current.id == identity.id, current.generation >= identity.generation { return nil }
            if !replacing, current.id != identity.id { return nil }
        case .none: break
        }
        let text = "\(header)\n\(record.canonicalVaultPath)\n\(identity.idText)\n\(identity.generation)\n"
        do throws(SystemCallError) {
            try fileSystem.replace(record.path, with: Data(text.utf8))
            return nil
        } catch {
            return problem(keeping: record) ?? "cannot be written (\(error.prefsError))"
        }
    }

    /// The first line of the records this version writes; version 1 records still read. A record written by an
    /// earlier version may hold several generation lines: the last complete one counts.
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
