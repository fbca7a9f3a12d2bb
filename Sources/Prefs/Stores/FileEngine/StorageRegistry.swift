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

    /// The storage of the file at `url`, opened with `make` if this process has none yet. `make` runs without the
    /// registry's lock (opening reads the file and may report errors); if two threads open the same file at once,
    /// the first to finish wins and the other's storage is dropped.
    static func storage(
        at url: URL, kind: String, make: () throws -> FileBackedStorage
    ) throws -> FileBackedStorage {
        let id = kind + ":" + url.standardizedFileURL.path
        if let existing = entries.withLock({ $0[id]?.storage }), !existing.isShut { return existing }
        let made = try make()
        return entries.withLock { entries in
            if let existing = entries[id]?.storage, !existing.isShut { return existing }
            entries = entries.filter { $0.value.storage.map { !$0.isShut } ?? false }
            entries[id] = Entry(made)
            return made
        }
    }
}
