/// `PrefKey("doTheThing", default: false)` declares a preference's name, type and default once.
///
/// Declare keys as static members so every use agrees on all three:
///
/// ```swift
/// extension PrefKey where Value == Bool {
///     static let doTheThing = PrefKey("doTheThing", default: false)
/// }
///
/// @StoredValue(.doTheThing) var doTheThing          // in a model
/// try store.set(true, for: .doTheThing)             // or straight through a store
/// ```
public struct PrefKey<Value: Sendable & Equatable>: Sendable {
    /// `key.name` is the name the value is stored under.
    public let name: String
    /// `key.defaultValue` is the value read when nothing is stored, or when what is stored cannot be decoded; for a
    /// key declared with `default: { … }`, the closure's answer now.
    public var defaultValue: Value { defaultSource.value }
    /// The declared default, or the closure that computes it.
    let defaultSource: DefaultSource<Value>
    /// The codec of the declared type, checking what ``schema`` allows.
    let codec: ValueCodec<Value>
    /// Run when a wrapper declares the key on a store (see ``migrating(_:)``).
    var migrations: [PrefMigration<Value>] = []
    let declaredSchema: Schema
    /// The codec without the schema's checks, which describes the key in stored form.
    let uncheckedCodec: ValueCodec<Value>

    /// `PrefKey("theme", default: Theme.light)` declares a key for any `Codable` value.
    ///
    /// The stored form is chosen once, from the type, in the same way for every declaration of every key: a type
    /// with a form of its own (`Bool`, every integer, `String`, `Date`, `[String]`, any ``PrefValueConvertible``
    /// type) in that form, a `RawRepresentable` type (an enum with `String` or `Int` raw values) as its raw value,
    /// an optional of one as its wrapped type (nil removes the key), any other type as JSON text. Code generic over
    /// `Codable` (`final class Model<Value: Codable>`) stores the same thing as code naming the type.
    ///
    /// A stored struct that lacks fields added to the type later reads with those fields taken from
    /// `defaultValue`, and keeps every field it has (see <doc:EvolvingModels>).
    ///
    /// - Parameters:
    ///   - name: The name the value is stored under.
    ///   - defaultValue: The value read while nothing is stored.
    ///   - schema: What the key means and which values it allows (see ``Schema``); nothing by default.
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init()) where Value: Codable {
        self.init(name: name, defaultValue: defaultValue, codec: .chosen(filling: defaultValue), schema: schema)
    }

    /// `PrefKey<User?>("owner")` declares an optional key: it reads nil until something is stored, and storing nil
    /// removes the key.
    public init<Wrapped: Codable & Sendable>(
        _ name: String, default defaultValue: Value = nil, schema: Schema = .init()
    )
    where Value == Wrapped? {
        self.init(name: name, defaultValue: defaultValue, codec: .chosen(filling: defaultValue), schema: schema)
    }

    /// `PrefKey("version", default: Version(1, 0))` declares a key for a type that chooses its own stored form
    /// through ``PrefValueConvertible`` and need not be `Codable` (an enum with raw values declares the
    /// conformance alone: `extension SortOrder: PrefValueConvertible {}`).
    @_disfavoredOverload  // a `Codable` type that is convertible too goes through the first, to the same form
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init())
    where Value: PrefValueConvertible {
        self.init(name: name, defaultValue: defaultValue, codec: .native, schema: schema)
    }

    init(name: String, defaultValue: Value, codec: ValueCodec<Value>, schema: Schema = .init()) {
        self.init(name: name, default: .fixed(defaultValue), codec: codec, schema: schema)
    }

    init(name: String, default source: DefaultSource<Value>, codec: ValueCodec<Value>, schema: Schema) {
        self.name = name
        self.defaultSource = source
        self.codec = codec.checking(schema, default: source.fixed)
        self.declaredSchema = schema
        self.uncheckedCodec = codec
    }

    /// The declared default, when it is not computed (for an optional key, `.some(nil)` when it is nil).
    var fixedDefault: Value? { defaultSource.fixed }
    /// The closure that computes the default, when the key was declared with one.
    var computeDefault: (@Sendable () -> Value)? { defaultSource.compute }
}

// MARK: Defaults computed when read

extension PrefKey {
    /// `PrefKey("columns", default: { ProcessInfo.processInfo.activeProcessorCount > 8 ? 3 : 2 })` declares a key
    /// whose default is computed when it is read, for a default that depends on the machine, the locale or another
    /// setting.
    ///
    /// The closure runs each time the key is read while no layer holds a value (nothing stored, no argument, no
    /// system-wide default), and when what is stored cannot be read; its answer is never stored, registered or
    /// published (`prefs describe` says the default is computed). It runs in the reader's context, never while
    /// Prefs holds a lock, so it may read other preferences.
    ///
    /// Observers (`values`, `changes`, Observation) are told of changes to what is stored, never of a change in the
    /// closure's answer: when the answer changes while nothing is stored, a read returns the new answer, and
    /// observers see it only with the next change of the stored value (a removal that brings the default back
    /// yields the answer at that moment). A `values` stream starts with the answer when it is made.
    ///
    /// - Parameters:
    ///   - name: The name the value is stored under.
    ///   - compute: The default, computed when it is read.
    ///   - schema: What the key means and which values it allows (see ``Schema``); the computed answer is not
    ///     checked against it.
    public init(_ name: String, default compute: @escaping @Sendable () -> Value, schema: Schema = .init())
    where Value: Codable {
        self.init(name: name, default: .computed(compute), codec: .chosen(), schema: schema)
    }
}

/// Where a key's default comes from: a value declared once, or a closure run when the default is read.
enum DefaultSource<Value: Sendable>: Sendable {
    case fixed(Value)
    case computed(@Sendable () -> Value)

    var fixed: Value? {
        if case .fixed(let value) = self { return value }
        return nil
    }

    var compute: (@Sendable () -> Value)? {
        if case .computed(let compute) = self { return compute }
        return nil
    }

    /// The default now: the declared value, or the closure's answer.
    var value: Value {
        switch self {
        case .fixed(let value): value
        case .computed(let compute): compute()
        }
    }
}
