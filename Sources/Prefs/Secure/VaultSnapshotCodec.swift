import Foundation
import Synchronization

/// Seals a store snapshot (as a ``VaultPayload``) into a vault file and opens it again, resolving the key once per vault
/// header: a passphrase is derived when the vault is opened, not on every save.
final class VaultSnapshotCodec: SnapshotCodec {
    private struct State {
        var key: VaultKey
        var resolved: (key: SecureBytes, kdf: KDFParameters)?
    }

    private let state: Mutex<State>
    private let cost: KDFParameters.Cost

    init(key: VaultKey, cost: KDFParameters.Cost) {
        state = Mutex(State(key: key))
        self.cost = cost
    }

    func decode(_ data: Data, path: String) throws -> [String: PrefValue] {
        let header = try VaultFormat.parseHeader(data)
        let key = try state.withLock { state throws(VaultError) in
            if let resolved = state.resolved, resolved.kdf == header.kdf { return resolved.key }
            let resolved = try state.key.resolve(for: header, creating: false, cost: cost)
            state.resolved = resolved
            return resolved.key
        }
        var plaintext = try VaultFormat.open(data, key: key)
        defer { plaintext.withUnsafeMutableBytes { secureZero($0) } }
        return try VaultPayload.decode(plaintext, path: path)
    }

    func encode(_ values: [String: PrefValue]) throws -> Data {
        let resolved = try state.withLock { state throws(VaultError) in
            if let resolved = state.resolved { return resolved }
            let resolved = try state.key.resolve(for: nil, creating: true, cost: cost)
            state.resolved = resolved
            return resolved
        }
        var plaintext = try VaultPayload.encode(values)
        defer { plaintext.withUnsafeMutableBytes { secureZero($0) } }
        return VaultFormat.seal(plaintext, key: resolved.key, kdf: resolved.kdf)
    }

    /// Switches to a new key, returning the previous state so a failed rekey can restore it.
    func replaceKey(with key: VaultKey) throws(VaultError) -> () -> Void {
        let resolved = try key.resolve(for: nil, creating: true, cost: cost)
        let previous = state.withLock { state in
            defer { state = State(key: key, resolved: resolved) }
            return state
        }
        return { self.state.withLock { $0 = previous } }
    }
}
