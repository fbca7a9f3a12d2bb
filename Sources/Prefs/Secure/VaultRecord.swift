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
/// a hash of the vault's absolute path. Records only ever move forward, and are written after the vault itself, so
/// a crash can leave a record behind its vault (harmless) but never ahead of it.
enum VaultRecord {
    /// The folder of the records: `$XDG_STATE_HOME/prefs/vaults`, falling back to `$HOME/.local/state/prefs/vaults`,
    /// resolved once per process like every other folder Prefs uses (`Locations`).
    static var directory: String {
        Locations.current.stateHome.appending(path: "prefs/vaults").path(percentEncoded: false)
    }

    /// The record file of the vault at `vaultPath`.
    static func path(forVault vaultPath: String) -> String {
        let canonical = canonicalPath(vaultPath)
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

    /// The remembered identity, or nil when there is none (or it cannot be read: the check is then skipped).
    static func read(forVault vaultPath: String) -> VaultIdentity? {
        guard let (data, _) = try? LockedFile(url: URL(filePath: path(forVault: vaultPath))).read() else { return nil }
        return parse(data)
    }

    /// Remembers `identity` for the vault. Unless `replacing` (a vault this process has just written), an existing
    /// record of the same vault with a newer generation is kept. Best effort: a record that cannot be written
    /// weakens the next check but must not fail the store.
    static func remember(_ identity: VaultIdentity, forVault vaultPath: String, replacing: Bool) {
        let file = LockedFile(url: URL(filePath: path(forVault: vaultPath)))
        try? file.withLock(.exclusive) {
            let current = (try? file.read()).flatMap { parse($0.data) }
            if let current, current == identity { return }
            if !replacing, let current, current.id == identity.id, current.generation >= identity.generation { return }
            let text = "prefs vault record 1\n\(canonicalPath(vaultPath))\n\(identity.idText)\n\(identity.generation)\n"
            // Not synced: a record lost in a crash only lags behind its vault, which is safe (and saves two fsyncs
            // on every vault write).
            _ = try? file.writeAtomically(Data(text.utf8), durable: false)
        }
    }

    private static func parse(_ data: Data) -> VaultIdentity? {
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count >= 4, lines[0] == "prefs vault record 1", lines[2].utf8.count == 2 * VaultIdentity.idCount,
            let generation = UInt64(lines[3])
        else { return nil }
        var id: [UInt8] = []
        var hex = Substring(lines[2])
        while !hex.isEmpty {
            guard let byte = UInt8(hex.prefix(2), radix: 16) else { return nil }
            id.append(byte)
            hex = hex.dropFirst(2)
        }
        return VaultIdentity(id: id, generation: generation)
    }
}
