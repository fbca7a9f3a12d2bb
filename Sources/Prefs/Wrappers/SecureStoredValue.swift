/// `@SecureStoredValue<String>(key: "authToken") var authToken` declares a secret kept in an encrypted vault.
///
/// A secret has no default: the property is `String?` and reads `nil` until something is stored. Mutations go
/// through the projected value and throw, because a secret that silently failed to save is worse than an error:
///
/// ```swift
/// @SecureStoredValue<String>(key: "authToken") var authToken
/// @SecureStoredValue<Bool>(key: "biometricsEnabled") var biometricsEnabled
///
/// try $authToken.set("eyJ…")
/// try $authToken.reset()              // same as try $authToken.set(nil)
/// try $biometricsEnabled.toggle()      // nil counts as false
/// for await token in $authToken.values { … }
/// ```
///
/// Without a `store:` argument secrets go to ``PrefsConfig/secureStore``: an ``EncryptedFileStore`` in the
/// app's data folder whose key file sits in its config folder. Reads are served from memory after the vault is
/// opened once, and reading inside `withObservationTracking` tracks the value, as with ``StoredValue``. Inside a
/// ``PrefsConfig/withDefaultSecureStore(_:operation:)`` scope (a test under `.isolatedPreferences`) a wrapper without
/// `store:`, global and `static` ones included, uses that scope's vault.
///
/// The wrapper's `description`, `debugDescription` and mirror never contain the secret.
@propertyWrapper
public struct SecureStoredValue<Value: Codable & Sendable & Equatable>: Sendable {
    /// The state this wrapper was created with.
    let declared: StoredValueBox<Value?>
    /// Declared without `store:`: inside a `withDefaultSecureStore` scope the wrapper uses that scope's vault.
    let followsSecureScope: Bool

    /// The state in use: the declared one, or for a wrapper without `store:` its stand-in in the current scope.
    var box: StoredValueBox<Value?> { followsSecureScope ? declared.inCurrentSecureScope() : declared }

    /// `@SecureStoredValue<String>(key: "authToken") var authToken` stores a secret under `key`, in the form
    /// ``PrefKey`` chooses for its type (a `String` as a string, a `Codable` struct as JSON text).
    ///
    /// - Parameters:
    ///   - key: The secret's name inside the vault (names are encrypted too).
    ///   - store: The vault to use; ``PrefsConfig/secureStore`` when nil.
    public init(key: String, store: (any KeyValueStore)? = nil) {
        followsSecureScope = store == nil
        declared = StoredValueBox(
            key: key, default: .fixed(nil),
            codec: ValueCodec(redactingErrorsOf: ValueCodec<Value?>(wrapping: ValueCodec<Value>.chosen())),
            store: store ?? DefaultStores.secureStore, isSecret: true)
    }

    /// `authToken` reads the secret, or nil when none is stored (or the vault cannot be opened, which is reported
    /// to ``PrefsConfig/errorHandler``).
    public var wrappedValue: Value? { box.value }

    /// `$authToken` gives the throwing mutations and `values`.
    public var projectedValue: SecureStoredValue<Value> { self }

    /// `$authToken.key` is the name the secret is stored under.
    public var key: String { box.key }

    /// `try $authToken.set("eyJ…")` seals a new secret into the vault; `nil` removes it.
    public func set(_ value: Value?) throws { try box.write(value) }

    /// `try $authToken.reset()` deletes the secret from the vault, as `set(nil)` does.
    public func reset() throws { try box.remove() }

    /// `try $credentials.update { $0?.refreshCount += 1 }` changes the secret atomically.
    public func update(_ transform: (inout Value?) -> Void) throws { try box.modify(transform) }

    /// `try $credentials.set(\.accessToken, to: "new-token")` changes one property of a stored secret.
    ///
    /// Does nothing while no secret is stored, since there is no value to change.
    public func set<Member>(_ keyPath: WritableKeyPath<Value, Member>, to member: Member) throws {
        try box.modify { $0?[keyPath: keyPath] = member }
    }

    /// `for await token in $authToken.values { … }` yields the current secret, then each change (nil on removal).
    public var values: AsyncStream<Value?> { box.stream() }

    /// `for await (old, new) in $authToken.changes { … }` yields each distinct change as the secret before and after
    /// it (nil while absent), starting with the first change after the call.
    public var changes: AsyncStream<(old: Value?, new: Value?)> { box.transitions() }
}

extension SecureStoredValue: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `"authToken = <redacted>"`: the key only, never the secret.
    public var description: String { "\(key) = <redacted>" }

    /// `debugPrint($authToken)` prints the key only, like ``description``: debugging output never shows the secret.
    public var debugDescription: String { "SecureStoredValue(\(key) = <redacted>)" }

    /// `dump(model)` sees a mirror without the secret, so it does not print it either.
    public var customMirror: Mirror { Mirror(self, children: ["key": key, "value": "<redacted>"]) }
}

extension ValueCodec {
    /// `codec` with decoding errors that say only the stored value's type, never the value: a secret that does not
    /// decode (an unknown raw value, malformed JSON) must not end up in an error message or a log.
    init(redactingErrorsOf codec: ValueCodec<Value>) {
        self.init(
            encode: { try codec.encode($0) },
            decode: { stored in
                do { return try codec.decode(stored) } catch {
                    if case .typeMismatch(let key, let expected, _)? = error as? PrefsError {
                        throw PrefsError.typeMismatch(key: key, expected: expected, found: stored.typeName)
                    }
                    throw RedactedDecodingError(storedType: stored.typeName, expected: "\(Value.self)")
                }
            }, route: codec.route)
    }
}

/// A decoding failure of a secret, described without anything taken from the secret.
private struct RedactedDecodingError: Error, CustomStringConvertible {
    let storedType: String
    let expected: String
    var description: String {
        "the stored \(storedType) does not decode as \(expected) (details hidden, as they could contain the secret)"
    }
}
