public import Foundation
import Synchronization

/// `let store: FileBackedStore = try FileStore(url: url)`: what ``FileStore``, ``SuiteFileStore`` and
/// ``EncryptedFileStore`` share, the store kept in one file.
///
/// All three run on one engine, so they behave alike:
/// - reads are served from an in-memory snapshot of the file, decoded once;
/// - each write goes to a fresh private file that is flushed and renamed over the old one, and the folder is
///   flushed too, so once a write returns it survives a crash, and a crash at any moment leaves either the old
///   or the new file, never a torn one (a store from ``deferringWrites(window:)`` returns first and writes within
///   its window);
/// - writes and read-modify-write updates hold the file's lock (`flock` on the file itself), so Prefs processes
///   sharing the file never lose each other's updates (beside a Foundation writer of a suite,
///   <doc:StoresAndBackends> says what holds);
/// - another process's changes are noticed (inotify on Linux) and announced on ``changes``, key by key;
/// - a file that cannot be decoded is never overwritten: reads and writes throw until it is repaired. A
///   UserDefaults suite that another writer is rewriting in place (Foundation's `synchronize()` truncates and
///   rewrites the file) is given half a second: meanwhile reads keep the last values read, writes wait for the
///   file to become readable, and nothing is reported or announced; only a file still unreadable after that is
///   treated as damaged, and reported once;
/// - stores opened on the same file in one process share one snapshot, so they never disagree;
/// - a write whose file would be larger than the 64 MiB every open accepts is refused with
///   ``PrefsError/tooLarge(path:size:limit:)``, before anything changes;
/// - a file that is a symbolic link is replaced where it points, so the link stays a link;
/// - ``close()`` releases the file; a damaged file can be kept aside with ``moveDamagedFileAside()``.
///
/// The class cannot be subclassed outside Prefs; use it as a type when code works with any of the three.
public class FileBackedStore: KeyValueStore, OwnImplementation, @unchecked Sendable {
    // Sendable: every stored property is immutable and Sendable.

    /// `store.url` is the file this store reads and writes.
    public let url: URL
    let engine: StoreEngine
    private let closed: Atomic<Bool>
    /// `store.hub` is Prefs' side of the store: its announcements and layers, the engine's.
    public let hub: StoreHub
    /// The window within which this store's plain writes are committed, for a store from
    /// ``deferringWrites(window:)``; nil: each write is durable when it returns.
    let window: Duration?
    /// The domain a ``SuiteFileStore`` is, whose values convert as Foundation's typed getters convert them.
    package let domainName: String?
    /// The domain of the preferences folder the store is, whose declared keys are published in its schema.
    package let schemaDomain: String?

    /// A handle on `engine`, which the caller has retained for it (false: the engine had shut, so this store is
    /// closed from the start).
    init(
        url: URL, engine: StoreEngine, retained: Bool, window: Duration? = nil, domainName: String? = nil,
        schemaDomain: String? = nil
    ) {
        self.url = url
        self.engine = engine
        closed = Atomic(!retained)
        self.window = window.map { $0 < .zero ? .zero : $0 }
        self.domainName = domainName
        self.schemaDomain = schemaDomain
        hub = StoreHub(feed: engine.changes, layers: engine.layers)
        hub.bind(self)
    }

    deinit {
        if !closed.load(ordering: .relaxed) { engine.release() }
    }

    /// `store.close()` stops watching the file and releases it: afterwards every operation on this store throws
    /// ``PrefsError/storeClosed(path:)``.
    ///
    /// Stores opened on the same file in this process share one open file: it is released when the last of them
    /// is closed (or deinitialised), after any write in progress has finished and with the deferred writes still
    /// in memory committed, and nothing of it then touches the file or its folder, so the folder can be deleted. A
    /// store opened on the file later starts afresh from the file. Closing twice does nothing.
    ///
    /// Nothing found by the store's own work in the background (a look at the file another process changed, a
    /// timed commit of deferred writes) reaches ``PrefsConfig/errorHandler`` once the last close has returned: a
    /// report of it being handled on another thread at that moment is waited for, so an error handler must not wait
    /// for the thread that closes the store.
    public func close() {
        if !closed.exchange(true, ordering: .relaxed) { engine.release() }
    }

    /// `try store.moveDamagedFileAside()` keeps a file that cannot be read (``PrefsError/corruptFile(path:reason:)``)
    /// beside the original as `<name>.damaged-<UTC date and time>` and starts afresh with no values, so the app can
    /// save again; it returns where the damaged file went.
    ///
    /// When the file reads fine, nothing is moved and it returns nil. Observers hear of every key whose value
    /// changed (back to its default). `prefs repair DOMAIN` does the same from the command line.
    @discardableResult
    public func moveDamagedFileAside() throws -> URL? { try open().moveDamagedFileAside() }

    /// `try store.removeFile()` deletes the store's file under its lock, so the store (and every store of the file)
    /// reads empty: what `prefs delete DOMAIN` does. Observers hear of every key whose value changed.
    package func removeFile() throws { try open().deleteFile() }

    /// The engine, unless this store was closed.
    func open() throws -> StoreEngine {
        if closed.load(ordering: .relaxed) { throw PrefsError.storeClosed(path: url.path) }
        return engine
    }

    /// `if let damage = store.damage { … }` tells whether the store's file cannot be read: while it is damaged,
    /// reads through wrappers give their defaults and writes are refused, and this is the error they meet; nil
    /// while the file reads (and during the grace given to a suite another writer is rewriting in place).
    ///
    /// Check it before acting on values that must not be defaults by mistake (deriving a secret from a setting,
    /// for example). ``moveDamagedFileAside()`` or a repaired file clears it.
    public var damage: (any Error)? { engine.damage }

    /// `for await damage in store.damageValues { … }` yields the store's ``damage`` now, then each time the file
    /// becomes damaged or readable again (nil), whoever damaged or repaired it: ``damage`` as a stream, as a
    /// wrapper's `values` is its value as a stream.
    public var damageValues: AsyncStream<(any Error)?> { engine.damageUpdates() }

    /// Whether ``close()`` was called on this store.
    public var isClosed: Bool { closed.load(ordering: .relaxed) }

    /// `try store.read("theme")` is the file's value of the key, layers aside, served from memory.
    ///
    /// - Throws: the file's decoding error while the file on disk cannot be read.
    public func read(_ key: String) throws -> PrefValue? { try open().value(forKey: key, throughLayers: false) }

    /// `try store.readAll()` is every key and value in the file.
    public func readAll() throws -> [String: PrefValue] { try open().allValues() }

    package func ownValue(forKey key: String) throws -> PrefValue? { try open().value(forKey: key) }

    /// `try store.write(["theme": .string("dark"), "zoom": nil])` sets and removes several keys in one atomic
    /// write of the file.
    public func write(_ changes: [String: PrefValue?]) throws { try ownWrite(changes) }

    /// `try store.replaceAllAsImported(values)` is ``replaceAll(_:)`` for a whole file a tool imports: it also takes
    /// the keys a store file can hold but an app cannot write (empty, or containing NUL), which files written by
    /// Foundation or other tools may have, so that export followed by import keeps them.
    package func replaceAllAsImported(_ values: [String: PrefValue]) throws { try open().replaceAll(values) }

    package func ownSet(_ value: PrefValue?, forKey key: String) throws {
        if let window { return try open().setDeferred(value, forKey: key, within: window) }
        try open().set(value, forKey: key)
    }

    package func ownUpdate(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try open().update(forKey: key, transform)
    }

    /// A deferring store's whole-store writes are a deferred batch: durable within the window, as its `set` is.
    package func ownReplaceAll(_ values: [String: PrefValue]) throws {
        let engine = try open()
        guard let window else { return try engine.replaceAll(values) }
        try engine.batch(deferring: window) { try engine.replaceAll(values) }
    }

    package func ownRemoveValues(forKeys keys: [String]) throws {
        let engine = try open()
        guard let window else { return try engine.removeValues(forKeys: keys) }
        try engine.batch(deferring: window) { try engine.removeValues(forKeys: keys) }
    }

    package func ownBatch<T>(_ body: () throws -> T) throws -> T { try open().batch(deferring: window, body) }

    package var convertsLikeFoundation: Bool { domainName != nil }
    package var fileURL: URL? { url }
}
