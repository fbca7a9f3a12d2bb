public import Foundation
import Synchronization

/// `UserDefaultsBridgeStore(UserDefaults(suiteName: "group.example")!)` keeps preferences in a Foundation
/// `UserDefaults` instance, through that instance's own API.
///
/// Every read is `object(forKey:)`, every write `set(_:forKey:)` or `removeObject(forKey:)`, and ``allValues()``
/// is `dictionaryRepresentation()`. So code that still calls the instance directly and code that uses Prefs agree
/// at once, in both directions, in one process: the way to adopt Prefs one key at a time beside old code. This is
/// also the store `@StoredValue(key:storage:)` uses for the instance it is given.
///
/// ```swift
/// let legacy = UserDefaults(suiteName: "group.example")!
/// let store = UserDefaultsBridgeStore(legacy)
/// legacy.set(3, forKey: "volume")
/// try store.value(forKey: "volume")       // .int(3)
/// try store.set(true, for: .doTheThing)   // legacy.bool(forKey: "doTheThing") is now true
/// ```
///
/// On Linux every write ends with `synchronize()`, the only way swift-corelibs-foundation saves a suite (it saves
/// nothing at exit); a batch saves once, when it ends. Foundation rewrites the file in place and without a lock,
/// so this store has none of ``SuiteFileStore``'s file guarantees: use it where old code shares the domain.
///
/// Stored forms: values are given to Foundation natively (a `Bool` as a bool, an `Int` as an integer, `UInt64`
/// as an unsigned integer, a `Float` as a float, which reads back exactly after Foundation saved it as a double),
/// a `URL` as its full text (Foundation itself keeps only the path), a `Date` as a date: Foundation's file keeps
/// whole seconds, so the sub-second part of a date lasts only as long as the process.
///
/// Changes other code makes through the instance: `UserDefaults.didChangeNotification`, which Apple's Foundation
/// posts on the thread that changed the instance, makes the store compare the values it has seen and announce those
/// that changed. swift-corelibs-foundation (Linux) posts none for `set` and `removeObject`: there a change is noticed
/// at the next Prefs read of that key (a wrapper's read, or ``value(forKey:)``), which announces it to `values`
/// streams and Observation, or when you call ``checkForChanges()``. Prefs' own writes are announced at once.
///
/// `UserDefaults` is not marked `Sendable`, but it is thread-safe (Apple's documentation says so; on Linux it keeps
/// its values in CFPreferences, under CFPreferences' lock), so this store is `Sendable` and calls the instance from
/// any thread. It never calls it while holding a lock of its own: Foundation runs the notification's observers
/// from inside `set`, and one of them is this store. Registered defaults and typed reads convert stored values as
/// Foundation's typed getters do (see <doc:StoresAndBackends>).
public final class UserDefaultsBridgeStore: KeyValueStore, OwnImplementation, @unchecked Sendable {
    // @unchecked Sendable: `defaults` is thread-safe though not marked Sendable; `observer` is set once, in `init`.
    private struct State {
        /// The value last read or written through this store for each key it has met (nil: absent).
        var seen: [String: PrefValue?] = [:]
        /// How many times each key's value was noted: a read notes the value it read only if its key's value was
        /// not noted meanwhile.
        var notes: [String: UInt64] = [:]
        /// The keys a write through this store is changing in the instance: only that write notes their values.
        var writing: Set<String> = []
        /// Keys of `writing` that a read met: the write reads them again once it has noted its own values.
        var missed: Set<String> = []
        /// The batches running, outermost first (empty: none): for each, the value each key it wrote had before
        /// that batch first wrote it.
        var batches: [[String: PrefValue?]] = []
    }

    nonisolated(unsafe) private let defaults: UserDefaults
    private let state = Mutex(State())
    nonisolated(unsafe) private var observer: (any NSObjectProtocol)?

    /// `store.hub` is Prefs' side of the store: its announcements, registered defaults and layers.
    public let hub = StoreHub(feed: ChangeFeed())
    /// Where this store announces the changes it sees and makes.
    private var changes: ChangeFeed { hub.feed }

    /// `UserDefaultsBridgeStore(.standard)` or `UserDefaultsBridgeStore(UserDefaults(suiteName: "g")!)`
    /// keeps preferences in `defaults`.
    ///
    /// Prefs keeps a strong reference to the instance and calls it from any thread.
    public init(_ defaults: UserDefaults) {
        self.defaults = defaults
        hub.bind(self)
        observer = NotificationCenter.default.addObserver(
            forName: UserDefaults.didChangeNotification, object: defaults, queue: nil
        ) { [weak self] _ in
            self?.compareSeenValues()
        }
    }

    deinit {
        if let observer { NotificationCenter.default.removeObserver(observer) }
    }

    // MARK: Reads

    /// `try store.read("volume")` is what `object(forKey:)` returns, as a ``PrefValue``: the instance's value, its
    /// argument domain's or a default registered with Foundation. ``KeyValueStore/value(forKey:)`` reads it too,
    /// under the defaults registered with Prefs.
    ///
    /// A value that changed since this store last saw it is announced, so observers learn of changes made by
    /// other code through the instance.
    ///
    /// - Throws: ``PrefsError/decodingFailed(key:reason:)`` for an object that is not a property-list value.
    public func read(_ key: String) throws -> PrefValue? {
        let (value, announced) = try look(at: key)
        if announced { changes.deliverAnnouncements() }
        return value
    }

    /// `try store.readAll()` is `dictionaryRepresentation()`: the instance's values and the defaults registered with
    /// Foundation (which registers them for every instance of the process); ``KeyValueStore/allValues()`` too.
    public func readAll() throws -> [String: PrefValue] {
        var values: [String: PrefValue] = [:]
        for (key, object) in defaults.dictionaryRepresentation() {
            if let value = try Self.prefValue(object, key: key) { values[key] = value }
        }
        return values
    }

    /// `store.checkForChanges()` compares every key this store has read or written with the instance and
    /// announces those that changed; on Linux it first calls `synchronize()`, which also takes in what other
    /// processes saved.
    ///
    /// Call it where other code may have changed the instance, for example after running old code that writes
    /// it, so `values` streams and Observation hear of the change without waiting for the next read.
    public func checkForChanges() {
        #if !canImport(Darwin)
            defaults.synchronize()
        #endif
        compareSeenValues()
    }

    /// Compares every key this store has seen with the instance and delivers the changes: ``checkForChanges()``,
    /// and Foundation's `didChangeNotification`, on the thread that changed the instance (this store's own write
    /// among them: the keys it is writing are left to it).
    private func compareSeenValues() {
        var announced = false
        for key in state.withLock({ Array($0.seen.keys) }) where (try? look(at: key).announced) == true {
            announced = true
        }
        if announced { changes.deliverAnnouncements() }
    }

    /// Reads `key` from the instance so that a change other code made there is announced: what a wrapper does before
    /// each read of a store that cannot tell when its values change.
    package func noticeChange(forKey key: String) {
        _ = try? read(key)
    }

    /// Reads `key` from the instance, outside the lock, and notes the value as seen, announcing it when it differs
    /// from the one seen before. The value is noted only if no value of the key was noted since the read began
    /// (else it is read again), so announcements follow the order in which the instance's values were read. A key a write
    /// of this store is changing is left to that write, which reads it again once it has noted its own value.
    private func look(at key: String) throws(PrefsError) -> (value: PrefValue?, announced: Bool) {
        while true {
            let notes = state.withLock { $0.notes[key, default: 0] }
            let value = try Self.prefValue(defaults.object(forKey: key), key: key)
            let announced = state.withLock { state -> Bool? in
                if state.writing.contains(key) {
                    state.missed.insert(key)
                    return false
                }
                return state.notes[key, default: 0] == notes ? noteSeen(key, value, in: &state) : nil
            }
            if let announced { return (value, announced) }
        }
    }

    /// Records the value of `key` as seen, announcing it when it differs from the one seen before. Called holding
    /// the lock, so announcements follow the order in which values are noted.
    private func noteSeen(_ key: String, _ value: PrefValue?, in state: inout State) -> Bool {
        guard let previous = state.seen[key] else {
            state.seen[key] = .some(value)
            state.notes[key, default: 0] += 1
            return false
        }
        guard previous != value else { return false }
        state.seen[key] = .some(value)
        state.notes[key, default: 0] += 1
        changes.announce([key: value])
        return true
    }

    // MARK: Writes

    /// `try store.write(["volume": .int(3), "zoom": nil])` is `set(_:forKey:)` for each value and
    /// `removeObject(forKey:)` for each nil, then on Linux one `synchronize()`, unless a batch runs.
    public func write(_ changes: [String: PrefValue?]) throws {
        for key in changes.keys { try validateKey(key) }
        try self.changes.withUpdateLock { try edit(changes) }
        deliverUnlessBatching()
    }

    package func ownSet(_ value: PrefValue?, forKey key: String) throws { try write([key: value]) }

    package var resolvesLayers: Bool { false }
    package var convertsLikeFoundation: Bool { true }
    package var looksBeforeReading: Bool { true }

    /// An update, atomic among the callers that go through Prefs in this process (Foundation itself takes no lock).
    package func ownUpdate(forKey key: String, _ transform: (PrefValue?) throws -> PrefValue?) throws -> PrefValue? {
        try validateKey(key)
        let updated = try changes.withUpdateLock {
            let updated = try transform(try look(at: key).value)
            try edit([key: updated])
            return updated
        }
        deliverUnlessBatching()
        return updated
    }

    /// Removes several keys and saves once.
    package func ownRemoveValues(forKeys keys: [String]) throws {
        try write(Dictionary(keys.map { ($0, nil) }) { first, _ in first })
    }

    /// Makes `values` the instance's whole content (keys registered with Foundation stay readable as its defaults)
    /// and saves once.
    package func ownReplaceAll(_ values: [String: PrefValue]) throws {
        try changes.withUpdateLock {
            var edits: [String: PrefValue?] = values.mapValues { .some($0) }
            for key in try allValues().keys where values[key] == nil { edits[key] = .some(nil) }
            try edit(edits)
        }
        deliverUnlessBatching()
    }

    /// A batch saves every write inside `body` with one `synchronize()` when it returns. Each write
    /// takes effect in the instance as it is made; observers hear of each key that changed once, when the batch
    /// ends. If `body` throws, the keys it wrote get their values from before the batch back, observers hear
    /// nothing, and the error is rethrown. A batch inside a batch of the same store joins it; if the inner one
    /// throws, only its own writes are undone. Writes through Prefs from other threads wait until it ends.
    package func ownBatch<T>(_ body: () throws -> T) throws -> T {
        let (result, isOutermost) = try changes.withUpdateLock { () throws -> (Result<T, any Error>, Bool) in
            // Only the thread holding the update lock touches the batch state, so it is this thread's batch.
            let isOutermost = state.withLock { state in
                state.batches.append([:])
                return state.batches.count == 1
            }
            do {
                let result = try body()
                state.withLock { state in
                    let written = state.batches.removeLast()
                    if state.batches.isEmpty {
                        announce(written, in: &state)
                    } else {
                        // The outer batch now answers for these keys, with their values from before this one.
                        state.batches[state.batches.count - 1].merge(written) { outer, _ in outer }
                    }
                }
                if isOutermost { try synchronize() }
                return (.success(result), isOutermost)
            } catch {
                restore(state.withLock { $0.batches.removeLast() })
                if isOutermost { try? synchronize() }
                return (.failure(error), isOutermost)
            }
        }
        // What the batch announced, or (even when it threw) what its reads found changed by other code.
        if isOutermost { changes.deliverAnnouncements() }
        return try result.get()
    }

    /// Announces the keys a batch wrote whose values differ from those before it. Called holding the lock.
    private func announce(_ written: [String: PrefValue?], in state: inout State) {
        var announced: [String: PrefValue?] = [:]
        for (key, before) in written {
            let current = state.seen[key] ?? nil
            if current != before { announced[key] = .some(current) }
        }
        changes.announce(announced)
    }

    /// Puts back the values a batch that threw had overwritten, announcing nothing (they are the values observers
    /// last heard of).
    private func restore(_ undo: [String: PrefValue?]) {
        let keys = Set(undo.keys)
        state.withLock { $0.writing.formUnion(keys) }
        apply(undo)
        let missed = state.withLock { state in
            for (key, before) in undo { state.seen[key] = .some(before) }
            return endWriting(keys, in: &state)
        }
        changes.invalidate(keys)
        for key in missed { _ = try? look(at: key) }
    }

    private func deliverUnlessBatching() {
        if state.withLock({ $0.batches.isEmpty }) { changes.deliverAnnouncements() }
    }

    /// Applies `edits` to the instance and notes the values it then holds, announcing them, then saves unless a
    /// batch runs; inside a batch, records the values they replace and announces them when the batch ends. Called
    /// holding the feed's update lock. The lock of this store is taken before and after Foundation is called,
    /// never across it: Foundation may post its notification on this thread from inside `set`.
    private func edit(_ edits: [String: PrefValue?]) throws {
        guard !edits.isEmpty else { return }
        let keys = Set(edits.keys)
        // Decided under the lock: the keys are this write's to note, and which of them the running batch first
        // writes now.
        let firstInBatch = state.withLock { state -> Set<String>? in
            state.writing.formUnion(keys)
            return state.batches.last.map { batch in keys.filter { batch[$0] == nil } }
        }
        var before: [String: PrefValue?] = [:]
        for key in firstInBatch ?? [] {
            before[key] = .some(try? Self.prefValue(defaults.object(forKey: key), key: key))
        }
        apply(edits)
        // What Foundation now returns for each key: a registered default where the value was removed.
        var current: [String: PrefValue?] = [:]
        for key in keys { current[key] = .some(try? Self.prefValue(defaults.object(forKey: key), key: key)) }
        let missed = state.withLock { state -> Set<String> in
            var announced: [String: PrefValue?] = [:]
            for (key, value) in current where state.seen[key] != .some(value) {
                announced[key] = .some(value)
                state.seen[key] = .some(value)
            }
            if firstInBatch != nil {
                state.batches[state.batches.count - 1].merge(before) { earlier, _ in earlier }
                changes.invalidate(Set(announced.keys))
            } else {
                changes.announce(announced)
            }
            return endWriting(keys, in: &state)
        }
        for key in missed { _ = try? look(at: key) }
        if firstInBatch == nil { try synchronize() }
    }

    /// Sets each value of `edits` in the instance, or removes it where nil. Called without this store's lock.
    private func apply(_ edits: [String: PrefValue?]) {
        for (key, value) in edits {
            if let value {
                defaults.set(Self.object(value), forKey: key)
            } else {
                defaults.removeObject(forKey: key)
            }
        }
    }

    /// Gives `keys` back to reads once their write has noted them (a read that began before the write then reads
    /// again); returns those a read met meanwhile, which the write reads again (the value it read back may be older
    /// than one another thread has set since).
    private func endWriting(_ keys: Set<String>, in state: inout State) -> Set<String> {
        for key in keys { state.notes[key, default: 0] += 1 }
        state.writing.subtract(keys)
        let missed = state.missed.intersection(keys)
        state.missed.subtract(missed)
        return missed
    }

    /// Saves on Linux, where nothing else does; on Apple platforms the system saves by itself.
    private func synchronize() throws {
        #if !canImport(Darwin)
            let saved = defaults.synchronize()
            if saved { changes.reported.writeReachedTheFile() }
            if !saved {
                throw PrefsError.io(
                    path: "UserDefaults", operation: "synchronize", errno: 0,
                    message: "Foundation could not save the suite (UserDefaults.synchronize() returned false)")
            }
        #endif
    }

    // MARK: Conversions

    /// A value as the object Foundation stores (``FoundationBridge/object(_:fractionalDatesAsText:)``).
    static func object(_ value: PrefValue) -> Any { FoundationBridge.object(value, fractionalDatesAsText: true) }

    /// An object Foundation returned, as a value (a `Float` its file widened to a `Double` restored); nil stays nil.
    static func prefValue(_ object: Any?, key: String) throws(PrefsError) -> PrefValue? {
        guard let object else { return nil }
        guard let value = FoundationBridge.value(object) else {
            throw .decodingFailed(
                key: key, reason: "UserDefaults holds a \(type(of: object)), which is not a property-list value")
        }
        return FoundationBridge.restoringFloats(value)
    }
}
