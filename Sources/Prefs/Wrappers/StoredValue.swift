public import Foundation

/// `@StoredValue(key: "theme") var theme: Theme = .light` declares a typed, persistent preference.
///
/// Read and assign it like any property; use the projected value (`$theme`) for the helpers:
///
/// ```swift
/// @Observable
/// final class Preferences {
///     @ObservationIgnored @StoredValue(key: "hasHapticsEnabled") var hasHapticsEnabled = false
///     @ObservationIgnored @StoredValue(key: "currentTheme") var currentTheme: Theme = .light
///     @ObservationIgnored @StoredValue(.doTheThing) var doTheThing
/// }
///
/// let prefs = Preferences()
/// prefs.$currentTheme.set(.dark)
/// prefs.$hasHapticsEnabled.toggle()
/// prefs.$currentTheme.reset()
/// for await theme in prefs.$currentTheme.values { print(theme) }
/// ```
///
/// Reads come from memory: the stored value is decoded once and again only after it changes. Every wrapper of the
/// same key and store shares that state, so two wrappers never disagree, and changes made by other processes show
/// up by themselves. Reading the property inside `withObservationTracking` (or SwiftUI) tracks it.
///
/// Without a `store:` argument the wrapper uses ``PrefsConfig/defaultStore`` (the standard UserDefaults domain), and
/// inside a ``PrefsConfig/withDefaultStore(_:operation:)`` scope (a test under `.isolatedPreferences`) that scope's
/// store, also when the wrapper is a global or a `static`. The value type must be `Equatable`: `values` yields
/// distinct changes only, and two declarations of a key are compared by their defaults.
/// Writes never throw here: a failure keeps the stored value and is sent to ``PrefsConfig/errorHandler``. Use a
/// store's typed API (`try store.set(_:for:)`) when you need to handle the error yourself.
///
/// `StoredValue` itself is `Sendable` and lock-protected: pass `$theme` to any thread, task or actor and use it
/// there. A class that holds wrappers is another matter; see <doc:Concurrency> for the patterns that compile.
@propertyWrapper
public struct StoredValue<Value: Sendable & Equatable>: Sendable {
    /// The state this wrapper was created with.
    let declared: StoredValueBox<Value>
    /// Declared without `store:`: inside a `withDefaultStore` scope the wrapper uses that scope's store.
    let followsDefaultScope: Bool

    /// The state in use: the declared one, or for a wrapper without `store:` its stand-in in the current scope.
    var box: StoredValueBox<Value> {
        followsDefaultScope ? declared.inCurrentDefaultScope() : declared
    }

    /// `@StoredValue(key: "theme") var theme: Theme = .light` stores any `Codable` value under `key`, defaulting to
    /// the initial value, in the form ``PrefKey`` chooses for its type: a built-in type natively, an enum with raw
    /// values as its raw value, an optional as its wrapped type (nil removes the key), anything else as JSON text.
    ///
    /// - Parameters:
    ///   - wrappedValue: The default, read while nothing is stored.
    ///   - key: The name the value is stored under.
    ///   - schema: What the key means and which values it allows (see ``PrefKey/Schema``); nothing by default.
    ///   - store: Where to keep it; ``PrefsConfig/defaultStore`` when nil.
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    ) where Value: Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "shared", storage: UserDefaults(suiteName: "group.x")!) var shared = false` stores in
    /// that `UserDefaults` instance, given the way Boutique and `@AppStorage` take it.
    ///
    /// Reads and writes go through the instance's own API (see ``UserDefaultsBridgeStore``), so code that
    /// calls the instance directly sees the wrapper's writes at once, and the wrapper sees that code's writes at
    /// its next read. Wrappers given the same instance share one store. Under `.isolatedPreferences` the wrapper
    /// uses an in-memory stand-in for the instance instead, one per instance for the test.
    public init(wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults)
    where Value: Codable {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), storage: storage)
    }

    /// `@StoredValue(key: "profile") var profile: Profile?` declares an optional preference without `= nil`: it reads
    /// nil until something is stored, as with `@AppStorage`.
    public init<Wrapped: Codable & Sendable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: nil, schema: schema), store: store)
    }

    /// `@StoredValue(key: "profile", storage: defaults) var profile: Profile?`: the same, in a `UserDefaults`
    /// instance.
    public init<Wrapped: Codable & Sendable>(
        key: String, schema: PrefKey<Value>.Schema = .init(), storage: UserDefaults
    )
    where Value == Wrapped? {
        self.init(PrefKey(key, default: nil, schema: schema), storage: storage)
    }

    /// `StoredValue(key: "volume", default: 0.5)` creates the wrapper without property syntax.
    public init(
        key: String, default defaultValue: Value, schema: PrefKey<Value>.Schema = .init(),
        store: (any KeyValueStore)? = nil
    ) where Value: Codable {
        self.init(PrefKey(key, default: defaultValue, schema: schema), store: store)
    }

    /// `@StoredValue(key: "version") var version = Version(1, 0)` stores a type that chooses its own stored form
    /// through ``PrefValueConvertible`` and need not be `Codable`.
    @_disfavoredOverload  // a `Codable` type that is convertible too goes through the `Codable` form, to the same form
    public init(
        wrappedValue: Value, key: String, schema: PrefKey<Value>.Schema = .init(), store: (any KeyValueStore)? = nil
    ) where Value: PrefValueConvertible {
        self.init(PrefKey(key, default: wrappedValue, schema: schema), store: store)
    }

    /// `StoredValue(PrefKey("volume", default: 0.5), storage: defaults)` keeps a typed key in a `UserDefaults`
    /// instance (see ``init(wrappedValue:key:schema:storage:)``).
    public init(_ key: PrefKey<Value>, storage: UserDefaults) {
        self.init(key, store: SuiteFileStore.store(for: storage))
    }

    /// `@StoredValue(.doTheThing) var doTheThing` uses a typed key that carries its name, type and default.
    ///
    /// - Parameters:
    ///   - key: A ``PrefKey``, usually a static member declared once in an extension.
    ///   - store: Where to keep it; ``PrefsConfig/defaultStore`` when nil.
    public init(_ key: PrefKey<Value>, store: (any KeyValueStore)? = nil) {
        declared = StoredValueBox(
            key: key.name, default: key.defaultSource, codec: key.codec, store: store ?? DefaultStores.defaultStore,
            migrations: key.migrations, describe: key.describe)
        followsDefaultScope = store == nil
    }

    /// `theme` reads the current value; `theme = .dark` stores a new one.
    public var wrappedValue: Value {
        // Not through `box`, whose result the reader would retain and release.
        get { followsDefaultScope ? declared.inCurrentDefaultScope().value : declared.value }
        nonmutating set { set(newValue) }
    }

    /// `$theme` gives the helpers: `set`, `reset`, `toggle`, `append`, `values`, …
    public var projectedValue: StoredValue<Value> { self }

    /// `$theme.key` is the name the value is stored under.
    public var key: String { box.key }

    /// `$theme.defaultValue` is the value read while nothing is stored (a computed default's answer now).
    public var defaultValue: Value { box.defaultValue }

    /// `$theme.store` is the store the value lives in.
    public var store: any KeyValueStore { box.store }

    /// `$theme.isForced` is true when an administrator forced the value (managed preferences): grey the setting
    /// out, since writes are refused and reported. Tracked by Observation like the value itself.
    public var isForced: Bool {
        box.cell.trackAccess()
        return box.store.isForced(box.key)
    }

    /// `$theme.layer` says where the current value comes from: `.user`, `.arguments`, `.registered`, …
    /// (see <doc:LayeredPreferences>).
    public var layer: PreferenceLayer? {
        box.cell.trackAccess()
        return box.store.layer(ofKey: box.key)
    }

    /// `$theme.set(.dark)` stores a new value.
    public func set(_ value: Value) {
        box.reportingWrite { try $0.write(value) }
    }

    /// `$theme.reset()` removes the stored value, so the property reads as the next layer's value again: usually
    /// its declared default, or a system-wide default or a command-line argument where one applies.
    public func reset() {
        box.reportingWrite { try $0.remove() }
    }

    /// `$counter.update { $0 += 1 }` reads, changes and writes the value as one atomic step.
    ///
    /// The update is atomic against other threads and, for file-backed stores, other processes: concurrent
    /// updates never lose each other's changes. If the stored value cannot be decoded, nothing is written and the
    /// error is reported.
    public func update(_ transform: (inout Value) -> Void) {
        box.reportingWrite { try $0.modify(transform) }
    }

    /// `$preferences.set(\.prefersDarkMode, to: true)` changes one property of a stored value, atomically.
    public func set<Member>(_ keyPath: WritableKeyPath<Value, Member>, to member: Member) {
        update { $0[keyPath: keyPath] = member }
    }

    /// `for await theme in $theme.values { … }` yields the current value, then every distinct change.
    ///
    /// Changes from any source arrive: this wrapper, another wrapper of the same key, a direct store write, or
    /// another process. Equal consecutive values are not repeated. Each call returns an independent stream; it is
    /// released as soon as the iterating task is cancelled or the stream is dropped.
    public var values: AsyncStream<Value> { box.stream() }

    /// `for await (old, new) in $theme.changes { … }` yields each distinct change as the value before and after it,
    /// from any source, starting with the first change after the call (not the current value).
    public var changes: AsyncStream<(old: Value, new: Value)> { box.transitions() }
}

extension StoredValue: CustomStringConvertible {
    /// `"theme = dark"`: the key and its current value.
    public var description: String { "\(key) = \(wrappedValue)" }
}
