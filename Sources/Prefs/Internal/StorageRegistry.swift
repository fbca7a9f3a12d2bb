import Foundation
import Synchronization

/// One `FileBackedStorage` per file in this process, so two stores opened on the same path share their
/// snapshot and change feed and never disagree, not even for the moment an inotify event takes.
enum StorageRegistry {
    private final class Entry: Sendable {
        weak let storage: FileBackedStorage?
        init(_ storage: FileBackedStorage) { self.storage = storage }
    }

    private static let entries = Mutex<[String: Entry]>([:])

    static func storage(
        at url: URL, kind: String, make: () throws -> FileBackedStorage
    ) throws -> FileBackedStorage {
        let id = kind + ":" + url.standardizedFileURL.path
        return try entries.withLock { entries in
            if let existing = entries[id]?.storage { return existing }
            entries = entries.filter { $0.value.storage != nil }
            let storage = try make()
            entries[id] = Entry(storage)
            return storage
        }
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
