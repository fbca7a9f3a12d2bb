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
    /// `key.defaultValue` is the value read when nothing is stored, or when what is stored cannot be decoded.
    public let defaultValue: Value
    /// The codec of the declared type, checking what ``schema`` allows.
    let codec: ValueCodec<Value>
    /// Run when a wrapper declares the key on a store (see ``migrating(_:)``).
    var migrations: [PrefMigration<Value>] = []
    let declaredSchema: Schema
    /// The codec without the schema's checks, which describes the key in stored form.
    let uncheckedCodec: ValueCodec<Value>

    /// `PrefKey("theme", default: Theme.light)` declares a key for any `Codable` value.
    ///
    /// A type with a stored form of its own (`String`, `Int`, `Date`, `[String]`, an optional of one, any
    /// ``PrefValueConvertible`` type) keeps that form even when the key is declared in code generic over `Codable`
    /// (`final class Model<Value: Codable>`): the form is chosen from the value's type at run time, so generic and
    /// concrete code store the same thing. Other types are stored as JSON text.
    ///
    /// A stored struct that lacks fields added to the type later reads with those fields taken from
    /// `defaultValue`, and keeps every field it has (see <doc:EvolvingModels>).
    ///
    /// - Parameters:
    ///   - name: The name the value is stored under.
    ///   - defaultValue: The value read while nothing is stored.
    ///   - schema: What the key means and which values it allows (see ``Schema``); nothing by default.
    @_disfavoredOverload  // the optionals' and raw values' own forms win over JSON
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init()) where Value: Codable {
        self.init(
            name: name, defaultValue: defaultValue, codec: ValueCodec.codable.fillingMissingFields(from: defaultValue),
            schema: schema)
    }

    /// `PrefKey("version", default: Version(1, 0))` declares a key for a type that chooses its own stored form
    /// through ``PrefValueConvertible`` and need not be `Codable`.
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init())
    where Value: PrefValueConvertible {
        self.init(name: name, defaultValue: defaultValue, codec: .native, schema: schema)
    }

    /// `PrefKey("count", default: 0)` for a type that is both `Codable` and ``PrefValueConvertible`` (every
    /// built-in type): its own stored form wins.
    public init(_ name: String, default defaultValue: Value, schema: Schema = .init())
    where Value: PrefValueConvertible & Codable {
        self.init(
            name: name, defaultValue: defaultValue, codec: ValueCodec.native.readingForeignForms(hasNativeForm: true),
            schema: schema)
    }

    /// `PrefKey<User?>("owner")` declares an optional key for a ``PrefValueConvertible`` type: it reads nil until
    /// something is stored, and storing nil removes the key.
    public init<Wrapped: PrefValueConvertible>(
        _ name: String, default defaultValue: Value = nil, schema: Schema = .init()
    )
    where Value == Wrapped? {
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(wrapping: .native), schema: schema)
    }

    /// `PrefKey<Int?>("limit")` for an optional of a type that is both `Codable` and ``PrefValueConvertible``:
    /// its own stored form wins.
    public init<Wrapped: PrefValueConvertible & Codable>(
        _ name: String, default defaultValue: Value = nil, schema: Schema = .init()
    )
    where Value == Wrapped? {
        let wrapped = ValueCodec<Wrapped>.native.readingForeignForms(hasNativeForm: true)
        self.init(name: name, defaultValue: defaultValue, codec: ValueCodec(wrapping: wrapped), schema: schema)
    }

    init(name: String, defaultValue: Value, codec: ValueCodec<Value>, schema: Schema = .init()) {
        self.name = name
        self.defaultValue = defaultValue
        self.codec = codec.checking(schema, default: defaultValue)
        self.declaredSchema = schema
        self.uncheckedCodec = codec
    }
}
