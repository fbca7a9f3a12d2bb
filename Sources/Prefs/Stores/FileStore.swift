public import Foundation

/// `try FileStore(url: configFolder.appending(path: "settings.json"))` keeps preferences in a readable JSON file.
///
/// The file is a JSON object of keys and values that people can read and diff. Writes are atomic and durable:
/// each one goes to a fresh file that is flushed to disk and renamed over the old one, so a crash or `kill -9`
/// at any moment leaves either the old or the new file, never a torn one. The file is created with mode 0600.
/// Its lock (`flock` on the file itself) makes read-modify-write updates safe across processes, and another
/// process's changes are noticed (through inotify on Linux) and announced on ``FileBackedStore/changes``.
///
/// Values JSON cannot express natively are tagged so they round-trip exactly:
/// `{"$date": 786123456.789}` (seconds since 2001-01-01), `{"$data": "base64…"}`, `{"$float": 0.1}`, and
/// `{"$double": "inf"}`, `{"$double": "-inf"}`, `{"$double": "nan"}` (or `$float`) for numbers JSON has no
/// form for.
public final class FileStore: FileBackedStore, @unchecked Sendable {
    /// `try FileStore(url: url)` opens (or, on the first write, creates) the JSON file at `url`.
    ///
    /// Stores opened on the same path in one process share their state, and the `onDamage` policy of the first of
    /// them while any is open.
    ///
    /// - Parameters:
    ///   - url: The JSON file.
    ///   - onDamage: What the store does when its file does not decode: ``DamagedFilePolicy/refuse`` (leave it and
    ///     refuse writes) unless told ``DamagedFilePolicy/keepAside``.
    /// - Throws: ``PrefsError/corruptFile(path:reason:)`` when the file exists but is not a Prefs JSON file (it is
    ///   left untouched), ``PrefsError/io(path:operation:errno:message:)`` when it cannot be read.
    public init(url: URL, onDamage: DamagedFilePolicy = .refuse) throws {
        let engine = try EngineRegistry.retainedEngine(at: url.fileSystemPath, kind: "json") {
            let engine = StoreEngine(path: url.fileSystemPath, codec: JSONSnapshotCodec(), onDamage: onDamage)
            try engine.open()
            return engine
        }
        super.init(url: url, engine: engine, retained: true)
    }

    /// A store with an engine of its own, on `fileSystem` and `clock` (for tests: two of them on one file exclude
    /// each other as two processes do).
    package init(
        url: URL, fileSystem: any FileSystem, clock: EngineClock, onDamage: DamagedFilePolicy = .refuse
    ) throws {
        let engine = StoreEngine(
            path: url.fileSystemPath, codec: JSONSnapshotCodec(), fileSystem: fileSystem, clock: clock,
            onDamage: onDamage)
        try engine.open()
        super.init(url: url, engine: engine, retained: engine.retain())
    }

    private init(url: URL, engine: StoreEngine, retained: Bool) {
        super.init(url: url, engine: engine, retained: retained)
    }

    /// `try FileStore.moveDamagedFileAside(at: url)` keeps a file that cannot be read as
    /// `<name>.damaged-<UTC date and time>` beside it and leaves the store empty, so it can be opened and saved
    /// again; it returns where the damaged file went, or nil when the file reads fine (nothing is moved).
    ///
    /// Stores of the file already open in this process recover at once. See
    /// ``FileBackedStore/moveDamagedFileAside()`` for a store you hold.
    @discardableResult
    package static func moveDamagedFileAside(at url: URL) throws -> URL? {
        let engine = EngineRegistry.retainedEngine(at: url.fileSystemPath, kind: "json") {
            let engine = StoreEngine(path: url.fileSystemPath, codec: JSONSnapshotCodec())
            try? engine.open()  // a damaged file is what this is for
            return engine
        }
        let store = FileStore(url: url, engine: engine, retained: true)
        defer { store.close() }
        return try store.moveDamagedFileAside()
    }
}
