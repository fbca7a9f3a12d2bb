import Foundation

/// Turns a whole store snapshot into file bytes and back: JSON, a property list, or an encrypted vault.
protocol SnapshotCodec: Sendable {
    func encode(_ values: [String: PrefValue]) throws -> Data
    func decode(_ data: Data, path: String) throws -> [String: PrefValue]
    /// Called once the bytes of the last `encode` are in place (renamed over the file), even when their
    /// durability could not be confirmed; still holding the file's lock.
    func didCommit()
    /// The values of an empty file at `path`: none, unless the format says an empty file cannot be (a vault once
    /// written).
    func decodeEmpty(path: String) throws -> [String: PrefValue]
}

extension SnapshotCodec {
    func didCommit() {}
    func decodeEmpty(path: String) throws -> [String: PrefValue] { [:] }
}

extension Error {
    /// Whether this is the error of a write that took effect although it reports a failure.
    var isCommitted: Bool {
        if case .durabilityNotConfirmed? = self as? PrefsError { return true }
        return false
    }
}

struct JSONSnapshotCodec: SnapshotCodec {
    func encode(_ values: [String: PrefValue]) throws -> Data { try JSONFormat.encode(values) }
    func decode(_ data: Data, path: String) throws -> [String: PrefValue] { try JSONFormat.decode(data, path: path) }
}

struct PropertyListSnapshotCodec: SnapshotCodec {
    func encode(_ values: [String: PrefValue]) throws -> Data { try PropertyListFormat.encode(values) }
    func decode(_ data: Data, path: String) throws -> [String: PrefValue] {
        try PropertyListFormat.decode(data, path: path)
    }
}
