public import Foundation

/// `let store: FileBackedStore = try FileStore(url: url)`: what ``FileStore``, ``UserDefaultsStore`` and
/// ``EncryptedFileStore`` share, the store kept in one file.
///
/// All three run on one engine, so they behave alike:
/// - reads are served from an in-memory snapshot of the file, decoded once;
/// - each write goes to a fresh private file that is flushed and renamed over the old one, and the folder is
///   flushed too, so once a write returns it survives a crash, and a crash at any moment leaves either the old
///   or the new file, never a torn one (a store from ``deferringWrites(window:)`` returns first and writes within
///   its window);
/// - writes and read-modify-write updates hold a lock file beside the data file (`flock`), so processes sharing
///   the file never lose each other's updates;
/// - another process's changes are noticed (inotify on Linux) and announced on ``changes``, key by key;
/// - a file that cannot be decoded is never overwritten: reads and writes throw until it is repaired. A
///   UserDefaults suite that another writer is rewriting in place (Foundation's `synchronize()` truncates and
///   rewrites the file) is given half a second: meanwhile reads keep the last values read, writes wait for the
///   file to become readable, and nothing is reported or announced; only a file still unreadable after that is
///   treated as damaged, and reported once;
/// - stores opened on the same file in one process share one snapshot, so they never disagree.
///
/// The class cannot be subclassed outside Prefs; use it as a type when code works with any of the three.
public class FileBackedStore: KeyValueStore, @unchecked Sendable {
    // Sendable: every stored property is an immutable reference to a Sendable object.

    /// `store.url` is the file this store reads and writes.
    public let url: URL
    let storage: FileBackedStorage

    init(url: URL, storage: FileBackedStorage) {
        self.url = url
        self.storage = storage
    }

    /// `store.changes` announces every change, including those made by other processes.
    public var changes: ChangeFeed { storage.changes }

    /// `try store.value(forKey: "theme")` returns the stored value, served from memory.
    ///
    /// - Throws: the file's decoding error while the file on disk cannot be read.
    public func value(forKey key: String) throws -> PrefValue? { try storage.value(forKey: key) }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value (nil removes it) durably before returning.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try storage.update(forKey: key) { _ in value }
    }

    /// `try store.updateValue(forKey: "count") { … }` reads, transforms and writes one value while holding the
    /// file's cross-process lock, so concurrent updates from any process never lose each other's changes.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try storage.update(forKey: key, transform)
    }

    /// `try store.allValues()` returns every key and value in the file.
    public func allValues() throws -> [String: PrefValue] { try storage.allValues() }

    /// `try store.replaceAll(values)` replaces the whole content in one atomic, durable write, announcing exactly
    /// the keys whose values changed.
    public func replaceAll(_ values: [String: PrefValue]) throws { try storage.replaceAll(values) }

    /// `try store.batch { settings.theme = .dark; settings.fontSize = 14 }` applies every write inside `body` in
    /// memory at once and writes the file once, durably and atomically, when `body` returns; observers hear of
    /// each changed key once, afterwards. If `body` or the write throws, nothing is written and the values go back
    /// to what they were. Other writers, in this process or another, wait for the batch to end. See
    /// ``KeyValueStore/batch(_:)``.
    public func batch<T>(_ body: () throws -> T) throws -> T { try storage.batch(body) }

    /// `try store.removeValues(forKeys: ["theme", "zoom"])` removes several keys in one atomic, durable write.
    public func removeValues(forKeys keys: some Sequence<String>) throws { try storage.removeValues(forKeys: keys) }
}
