public import Foundation

/// `try FileStore(url: configFolder.appending(path: "settings.json"))` keeps preferences in a readable JSON file.
///
/// The file is a JSON object of keys and values that people can read and diff. Writes are atomic and durable:
/// each one goes to a fresh file that is flushed to disk and renamed over the old one, so a crash or `kill -9`
/// at any moment leaves either the old or the new file, never a torn one. The file is created with mode 0600.
/// A lock file beside it (`settings.json.lock`) makes read-modify-write updates safe across processes, and
/// another process's changes are noticed (through inotify on Linux) and announced on ``changes``.
///
/// Values JSON cannot express natively are tagged so they round-trip exactly:
/// `{"$date": 786123456.789}` (seconds since 2001-01-01), `{"$data": "base64…"}` and `{"$float": 0.1}`.
public final class FileStore: KeyValueStore {
    /// `store.url` is the JSON file this store reads and writes.
    public let url: URL
    let storage: FileBackedStorage

    /// `store.changes` announces every change, including those made by other processes.
    public var changes: ChangeFeed { storage.changes }

    /// `try FileStore(url: url)` opens (or, on the first write, creates) the JSON file at `url`.
    ///
    /// Stores opened on the same path in one process share their state.
    ///
    /// - Throws: ``PrefsError/corruptFile(path:reason:)`` when the file exists but is not a Prefs JSON file (it is
    ///   left untouched), ``PrefsError/io(path:operation:errno:message:)`` when it cannot be read.
    public init(url: URL) throws {
        self.url = url
        storage = try StorageRegistry.storage(at: url, kind: "json") {
            let storage = FileBackedStorage(url: url, codec: JSONSnapshotCodec())
            try storage.open()
            return storage
        }
    }

    /// `try store.value(forKey: "theme")` returns the stored value, served from memory.
    public func value(forKey key: String) throws -> PrefValue? { try storage.value(forKey: key) }

    /// `try store.setValue(.bool(true), forKey: "flag")` stores a value (nil removes it) durably before returning.
    public func setValue(_ value: PrefValue?, forKey key: String) throws {
        try storage.update(forKey: key) { _ in value }
    }

    /// `try store.updateValue(forKey: "count") { … }` reads, transforms and writes one value while holding the
    /// file's cross-process lock.
    @discardableResult
    public func updateValue(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try storage.update(forKey: key, transform)
    }

    /// `try store.allValues()` returns every key and value in the file.
    public func allValues() throws -> [String: PrefValue] { try storage.allValues() }

    /// `try store.replaceAll(values)` replaces the whole content in one atomic, durable write.
    public func replaceAll(_ values: [String: PrefValue]) throws { try storage.replaceAll(values) }
}
