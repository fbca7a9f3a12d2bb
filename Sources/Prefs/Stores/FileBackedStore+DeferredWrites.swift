import Foundation

extension FileBackedStore {
    /// `let quick = store.deferringWrites()` is the same store, whose writes return at once and reach the file
    /// within `window`.
    ///
    /// ```swift
    /// let settings = try UserDefaultsStore(suiteName: "com.example.app")
    /// let quick = settings.deferringWrites()                         // 50 ms
    /// @StoredValue(key: "volume", store: quick) var volume = 0.5
    /// volume = 0.7          // in memory now: every reader and observer in the process sees 0.7
    /// try quick.flush()     // on disk now (or wait: it is there within 50 ms)
    /// ```
    ///
    /// Both stores read and write the same values: a write through either is seen at once through the other, by
    /// every wrapper of the key and by every observer in this process. Writes through the returned store
    /// (`set`, `reset`, `setValue(_:forKey:)`, `removeValues(forKeys:)`, `replaceAll(_:)`, `batch(_:)`) change
    /// memory and return; a background commit then writes every change made within the window in one durable,
    /// atomic write of the file, in the order they were made, on top of the file's latest values under its
    /// cross-process lock. Other processes see a change once it is committed. A commit is a write like a durable
    /// one, with the same checks (see ``FileBackedStore``).
    ///
    /// - A change not committed yet gives way to a later write of the same key by another process: that write,
    ///   which its writer was told is stored, is what the file keeps and what this process's readers and observers
    ///   end on. The commit compares the file's value of the key with the value the change replaced; another write
    ///   that left that same value there (set and set back) is not told apart, and the change is written.
    /// - A batch is one commit: its changes reach the file together, or, if its body throws, not at all.
    /// - Read-modify-write helpers (`update`, `toggle`, `append`, `set(_:to:)`, `updateValue(forKey:_:)`) stay
    ///   durable and atomic across processes: they run under the file's lock and write before they return, taking
    ///   every deferred change along in the same write.
    /// - `flush()` returns once every change deferred so far is in the file; a normal exit
    ///   (`exit`, or returning from `main`) and releasing the last reference to the store flush too. A crash or
    ///   `kill -9` loses the changes not committed yet: at most those of the last window and of a commit in
    ///   progress.
    /// - A commit that fails (a full disk, a folder that cannot be written) keeps the values in memory, is
    ///   reported to ``PrefsConfig/errorHandler`` once while it keeps failing, and is tried again a second later,
    ///   at the next change and at a flush; `flush()` throws its error.
    /// - A file that cannot be read is never overwritten: writes throw its error, as durable ones do.
    /// - Once the store, or the store it was made from, is closed, writes and `flush()` throw
    ///   ``PrefsError/storeClosed(path:)``, and nothing of it touches the file or its folder again.
    ///
    /// - Parameter window: How long a change may wait in memory; changes within one window share one write. Zero
    ///   commits as soon as the background thread gets to it.
    public func deferringWrites(window: Duration = .milliseconds(50)) -> FileBackedStore {
        DeferredWriteStore(engine: engine, url: url, window: window)
    }
}

/// A view of a file store whose plain writes are deferred (see ``FileBackedStore/deferringWrites(window:)``).
final class DeferredWriteStore: FileBackedStore, @unchecked Sendable {
    // Sendable: like its superclass, only immutable properties.
    let window: Duration

    init(engine: StoreEngine, url: URL, window: Duration) {
        self.window = window < .zero ? .zero : window
        // A store made from a closed one is closed too.
        super.init(url: url, engine: engine, retained: engine.retain())
    }

    override func setValue(_ value: PrefValue?, forKey key: String) throws {
        try open().setDeferred(value, forKey: key, within: window)
    }

    override func replaceAll(_ values: [String: PrefValue]) throws {
        for key in values.keys { try validateKey(key) }
        try batch { try engine.replaceAll(values) }
    }

    override func removeValues(forKeys keys: some Sequence<String>) throws {
        try batch { try engine.removeValues(forKeys: keys) }
    }

    override func batch<T>(_ body: () throws -> T) throws -> T {
        try open().batch(deferring: window, body)
    }
}

extension FileBackedStore {
    /// `try store.flush()` returns once every write deferred so far (see ``deferringWrites(window:)``) is durably in
    /// the file; see `KeyValueStore.flush()`.
    public func flush() throws {
        try open().commitDeferred()
    }

    /// `try await store.flush()` returns once every write deferred so far is durably in the file, writing on a
    /// background thread rather than the caller's.
    public func flush() async throws {
        let engine = try open()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            engine.backgroundQueue.async {
                continuation.resume(with: Result { try engine.commitDeferred() })
            }
        }
    }

    /// `let quick: any KeyValueStore = store.deferringWrites(window: window)`: the view above where the caller asks
    /// for any store, as ``KeyValueStore/deferringWrites(window:)`` does. Left out of the documentation, where it
    /// would make links to the view ambiguous.
    @_disfavoredOverload @_documentation(visibility: internal)
    public func deferringWrites(window: Duration) -> any KeyValueStore {
        deferringWrites(window: window) as FileBackedStore
    }
}
