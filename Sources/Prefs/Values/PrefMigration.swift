/// `.renamed(from: "editorSettings")`, `.converted(from: "fontSize", as: Int.self) { Editor(fontSize: $0) }`: how an
/// older version of the app stored a key's value, given to ``PrefKey/migrating(_:)``.
///
/// ```swift
/// extension PrefKey where Value == EditorSettings {
///     static let editor = PrefKey("editor", default: EditorSettings())
///         .migrating(.renamed(from: "editorSettings"), .converted(from: "fontSize", as: Int.self) { size in
///             EditorSettings(fontSize: size)
///         })
/// }
/// ```
///
/// When a wrapper declares the key on a store (`@StoredValue(.editor)`), each migration whose older form is
/// stored there, and whose key has no value stored yet, is run: the old value is read, converted, stored under the
/// key and, for another key, removed, in one write that re-checks the old value under the store's lock. So one
/// result is stored and what it did is reported once to ``PrefsConfig/errorHandler`` as a ``PrefsReport`` of
/// operation `.migration`; processes declaring the key at the same moment may each run the conversion closure
/// (it runs outside every lock), so keep it free of side effects. An old value that does not read as
/// the older form is reported and left where it is.
public struct PrefMigration<Value: Sendable & Equatable>: Sendable {
    /// The key the older form is stored under; nil for the key itself (its type changed).
    let oldKey: String?
    /// The older form, for reports: `Int`, or "the same form" for a renamed key.
    let oldForm: String
    /// Reads the stored older form (given the key's own codec) and converts it; runs outside every lock.
    let convert: @Sendable (PrefValue, ValueCodec<Value>) throws -> Value

    /// `.renamed(from: "editorSettings")`: the value stored under `oldKey`, in the form this key reads, moves here.
    public static func renamed(from oldKey: String) -> Self {
        Self(
            oldKey: oldKey, oldForm: "\(Value.self)",
            convert: { stored, codec in try codec.decode(stored, key: oldKey) })
    }

    /// `.converted(from: "fontSize", as: Int.self) { EditorSettings(fontSize: $0) }`: the value stored under
    /// `oldKey` as `Old`, converted by `convert`, moves here.
    public static func converted<Old: Codable & Sendable>(
        from oldKey: String, as old: Old.Type, _ convert: @escaping @Sendable (Old) -> Value
    ) -> Self {
        let codec = ValueCodec<Old>.json
        return Self(
            oldKey: oldKey, oldForm: "\(Old.self)",
            convert: { stored, _ in convert(try codec.decode(stored, key: oldKey)) })
    }

    /// `.converted(as: Int.self) { EditorSettings(fontSize: $0) }`: the key itself held an `Old` before its type
    /// changed; a stored value that does not read as the current type but reads as `Old` is converted in place.
    public static func converted<Old: Codable & Sendable>(
        as old: Old.Type, _ convert: @escaping @Sendable (Old) -> Value
    ) -> Self {
        let codec = ValueCodec<Old>.json
        return Self(oldKey: nil, oldForm: "\(Old.self)", convert: { stored, _ in convert(try codec.decode(stored)) })
    }
}

extension PrefKey {
    /// `PrefKey("editor", default: EditorSettings()).migrating(.renamed(from: "editorSettings"))` is the key with
    /// migrations from the forms older versions stored, run when a wrapper declares it (see ``PrefMigration``).
    public func migrating(_ migrations: PrefMigration<Value>...) -> PrefKey {
        var key = self
        key.migrations += migrations
        return key
    }
}

/// `report.error` of a `.migration` report that succeeded: what was moved where.
public struct PrefsMigrationNotice: Error, Sendable, CustomStringConvertible {
    /// `migrated.key` is the key the value now lives under.
    public let key: String
    /// `migrated.oldKey` is the key the older form was stored under (the same as `key` for a changed type).
    public let oldKey: String
    /// `"moved the Int stored under \"fontSize\" to \"editor\""`.
    public var description: String {
        oldKey == key
            ? "converted the older form stored under \(String(reflecting: key)) to its current type"
            : "moved the value stored under \(String(reflecting: oldKey)) to \(String(reflecting: key))"
    }
}
