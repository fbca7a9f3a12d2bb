import Foundation

/// Turns a whole store snapshot into file bytes and back: JSON, a property list, or an encrypted vault.
protocol SnapshotCodec: Sendable {
    func encode(_ values: [String: PrefValue]) throws -> Data
    func decode(_ data: Data, path: String) throws -> [String: PrefValue]
    /// Called once the bytes of the last `encode` are in place (renamed over the file), even when their
    /// durability could not be confirmed; still holding the file's lock.
    func didCommit()
    /// A key's hash in the file's commit record: the same in every process that opens the file.
    func recordHash(_ key: String) -> UInt64
    /// The values of an empty file at `path`: none, unless the format says an empty file cannot be (a vault once
    /// written).
    func decodeEmpty(path: String) throws -> [String: PrefValue]
}

extension SnapshotCodec {
    func didCommit() {}
    func decodeEmpty(path: String) throws -> [String: PrefValue] { [:] }
    func recordHash(_ key: String) -> UInt64 { StableHash.of(key.utf8) }
}

extension Error {
    /// Whether this is the error of a write that took effect although it reports a failure.
    var isCommitted: Bool {
        if case .durabilityNotConfirmed? = self as? PrefsError { return true }
        return false
    }
}

/// One per file: it keeps the base64 texts of the large `Data` values it last wrote (``JSONFormat/Base64Memo``).
struct JSONSnapshotCodec: SnapshotCodec {
    let base64 = JSONFormat.Base64Memo()
    func encode(_ values: [String: PrefValue]) throws -> Data { try JSONFormat.encode(values, base64: base64) }
    func decode(_ data: Data, path: String) throws -> [String: PrefValue] { try JSONFormat.decode(data, path: path) }
}

struct PropertyListSnapshotCodec: SnapshotCodec {
    func encode(_ values: [String: PrefValue]) throws -> Data { try PropertyListFormat.encode(values) }
    func decode(_ data: Data, path: String) throws -> [String: PrefValue] {
        try PropertyListFormat.decode(data, path: path)
    }
}
