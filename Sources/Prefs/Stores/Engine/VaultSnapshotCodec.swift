import CSodium
import Foundation
import Synchronization

/// Seals a store snapshot (as a ``VaultPayload``) into a vault file and opens it again, resolving the key once per vault
/// header: a passphrase is derived when the vault is opened, not on every save.
///
/// It also keeps the vault from moving backwards: every vault it writes carries the vault's id and a generation one
/// above the last it saw, and a vault it opens must have the id and at least the generation last seen, both in this
/// process and as remembered in the ``VaultRecord``. Otherwise opening throws ``VaultError/rollbackDetected(reason:)``.
final class VaultSnapshotCodec: SnapshotCodec {
    private struct State {
        var key: VaultKeyMaterial
        /// Counts the key's replacements, so that a key resolved outside the lock is kept only if still current.
        var keyVersion = 0
        var resolved: (key: SecureBytes, kdf: KDFParameters)?
        /// The identity of the newest version of this vault this process has opened or written.
        var seen: VaultIdentity?
        /// The identity of the write being made, until it is committed.
        var pending: VaultIdentity?
        /// Why the record could not be read or written the last time it was used, if it could not.
        var recordProblem: String?
        /// Whether ``recordProblem`` has been reported (once per store).
        var recordReported = false
    }

    private let state: Mutex<State>
    private let cost: KDFParameters.Cost
    /// Where the vault's identity is remembered between processes.
    private let record: VaultRecord.Location
    private let vaultPath: String

    init(key: VaultKey, cost: KDFParameters.Cost, vaultPath: String) {
        state = Mutex(State(key: VaultKeyMaterial(key, vaultPath: vaultPath)))
        self.cost = cost
        record = VaultRecord.Location(forVault: vaultPath)
        self.vaultPath = vaultPath
    }

    /// An empty vault is no values (a writer stopped before its first commit left it), unless this vault's record
    /// remembers a version of it: then it was cut, and it is refused as truncated.
    func decodeEmpty(path: String) throws -> [String: PrefValue] {
        guard case .identity = VaultRecord.read(record) else { return [:] }
        return try decode(Data(), path: path)
    }

    func decode(_ data: Data, path: String) throws -> [String: PrefValue] {
        let header = try VaultFormat.parseHeader(data)
        let key = try resolvedKey(for: header).key
        // The plaintext lives in a buffer wiped as soon as its values are decoded.
        let values = try VaultFormat.withPlaintext(of: data, key: key) { (bytes) throws(PrefsError) in
            try VaultPayload.decode(bytes, path: path)
        }
        // Authenticated: the identity in the header is the writer's. Check it before using anything inside.
        let reading = VaultRecord.read(record)
        var remembered: VaultIdentity?
        var usable = true
        switch reading {
        case .none: noteRecord(nil)
        case .identity(let known):
            remembered = known
            noteRecord(nil)
        case .unusable(let reason):
            usable = false
            noteRecord(reason)
        }
        if let known = remembered {
            do {
                try Self.check(
                    header.identity, against: known,
                    source: "before (remembered in \(record.path); if you restored an "
                        + "older copy or replaced the vault on purpose, delete that file)")
            } catch {
                // The first load of a store takes no lock: another process may have committed a newer vault (and
                // its record) after `data` was read. Then `data` is simply out of date, and the store reloads the
                // new file under the lock, where this check runs again. Only a file still on disk is refused.
                let current = try? POSIXFileSystem().read(path, through: nil)?.data
                guard current == data else { return values }
                throw error
            }
        }
        try state.withLock { state throws(VaultError) in
            if let seen = state.seen { try Self.check(header.identity, against: seen, source: "in this process") }
            state.seen = header.identity
        }
        // A record that cannot be used is left as it is: rewriting it could lower it.
        if usable, header.identity != remembered {
            noteRecord(VaultRecord.remember(header.identity, in: record, replacing: false))
        }
        return values
    }

    /// The key for a vault with `header` (nil: the key of a vault to write, created if the source has none yet),
    /// resolved once per key-derivation parameters. Resolved holding no lock: a key source is the app's code, or a
    /// call to the desktop keyring.
    private func resolvedKey(for header: VaultHeader?) throws -> (key: SecureBytes, kdf: KDFParameters) {
        let (current, material, version) = state.withLock { ($0.resolved, $0.key, $0.keyVersion) }
        if let current, header.map({ $0.kdf == current.kdf }) ?? true { return current }
        let resolved = try material.resolve(for: header, creating: header == nil, cost: cost)
        state.withLock { if $0.keyVersion == version { $0.resolved = resolved } }
        return resolved
    }

    /// Notes the outcome of the last use of the record: nil when it worked.
    private func noteRecord(_ problem: String?) {
        state.withLock { $0.recordProblem = problem }
    }

    /// Why this vault's rollback record cannot be kept (so an older copy of the vault would not be noticed), or nil.
    /// Checks the record without writing it when its last use worked, so a store that opened no vault yet knows too.
    func recordProblem() -> VaultError? {
        let noted = state.withLock { $0.recordProblem }
        guard let problem = noted ?? VaultRecord.problem(keeping: record) else { return nil }
        return .rollbackRecordUnavailable(path: record.path, reason: problem)
    }

    /// Reports ``recordProblem()`` once per store; call holding no lock.
    func reportRecordProblem() {
        guard let problem = recordProblem() else { return }
        let isFirst = state.withLock { state in
            defer { state.recordReported = true }
            return !state.recordReported
        }
        if isFirst { ErrorReporter.report(problem, key: "", operation: .read) }
    }

    /// Refuses `found` unless it is the vault `known` describes, at the same or a later generation.
    private static func check(
        _ found: VaultIdentity, against known: VaultIdentity, source: @autoclosure () -> String
    ) throws(VaultError) {
        guard found.id == known.id else {
            throw .rollbackDetected(
                reason: "it is another vault (id \(found.idText)) than the one (id \(known.idText)) seen \(source())")
        }
        guard found.generation >= known.generation else {
            throw .rollbackDetected(
                reason: "it is an older copy (generation \(found.generation)) of the vault whose generation "
                    + "\(known.generation) was seen \(source())")
        }
    }

    func encode(_ values: [String: PrefValue]) throws -> Data {
        let resolved = try resolvedKey(for: nil)
        let identity = state.withLock { state in
            let identity = state.seen?.next ?? VaultIdentity.fresh()
            state.pending = identity
            return identity
        }
        var plaintext = try VaultPayload.encode(values)
        defer { plaintext.withUnsafeMutableBytes { secureZero($0) } }
        return VaultFormat.seal(plaintext, key: resolved.key, kdf: resolved.kdf, identity: identity)
    }

    /// The last encoded vault is in place: it is now the newest version, here and in the record.
    func didCommit() {
        let committed = state.withLock { state in
            defer { state.pending = nil }
            if let pending = state.pending { state.seen = pending }
            return state.pending
        }
        if let committed { noteRecord(VaultRecord.remember(committed, in: record, replacing: true)) }
    }

    /// Switches to a new key, returning the previous state so a failed rekey can restore it.
    func replaceKey(with key: VaultKey) throws -> () -> Void {
        let material = VaultKeyMaterial(key, vaultPath: vaultPath)
        let resolved = try material.resolve(for: nil, creating: true, cost: cost)
        let previous = state.withLock { state in
            defer {
                state.key = material
                state.keyVersion += 1
                state.resolved = resolved
            }
            return (state.key, state.resolved)
        }
        return {
            self.state.withLock { state in
                state.key = previous.0
                state.keyVersion += 1
                state.resolved = previous.1
            }
        }
    }
}
