import Foundation

/// Turns a whole store snapshot into file bytes and back: JSON, a property list, or an encrypted vault.
protocol SnapshotCodec: Sendable {
    func encode(_ values: [String: PrefValue]) throws -> Data
    func decode(_ data: Data, path: String) throws -> [String: PrefValue]
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
