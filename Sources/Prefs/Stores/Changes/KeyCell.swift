import Observation
import Synchronization

/// One key of one store: a version counter advanced on every announced change, and the Observation registrar that
/// lets `withObservationTracking` see reads of this key. (The listeners that feed `values` streams are the feed's.)
final class KeyCell: Observable, Sendable {
    let key: String
    let versionCounter = Atomic<UInt64>(1)
    let registrar = ObservationRegistrar()
    /// The first declaration of the key by a wrapper, and the conflicting ones already reported.
    let declarations = Mutex<(first: KeyDeclaration?, reported: Set<String>)>((nil, []))
    // Key paths are immutable; the stored one only avoids re-forming it on every read. An instance constant, not a
    // static one, whose every read went through `swift_once` (7% of a cached read).
    nonisolated(unsafe) let versionPath: KeyPath<KeyCell, UInt64> = \KeyCell.version

    init(key: String) { self.key = key }

    /// Increases with every change of the key's value; starts at 1.
    var version: UInt64 { versionCounter.load(ordering: .acquiring) }

    /// The version a failed read of this key was last reported at (0: never), so a failure of the same stored
    /// value is reported once, however often it is read.
    private let reportedVersion = Atomic<UInt64>(0)

    /// Whether a read failure at `version` is the first one reported for it; marks it reported.
    func shouldReportFailure(at version: UInt64) -> Bool {
        reportedVersion.exchange(version, ordering: .relaxed) != version
    }

    /// Tells Observation that the current tracking scope read this key.
    func trackAccess() { registrar.access(self, keyPath: versionPath) }

    /// Moves to the next version when a change is announced, while the store still holds the lock under which
    /// it applied the change: a read after the write returns sees the new version and decodes the new value.
    /// Returns the new version.
    func advance() -> UInt64 {
        let version = versionCounter.add(1, ordering: .releasing).newValue
        return version
    }

    /// Tells Observation about one announced change, after the store released its locks.
    func deliver() {
        registrar.withMutation(of: self, keyPath: versionPath) {}
    }
}

/// How one wrapper declared a key: its type and default, so two declarations of one key on one store that would
/// disagree can be told apart and reported.
struct KeyDeclaration: Sendable {
    let type: ObjectIdentifier
    /// Whether another declaration's default equals this one's (false when the types differ).
    let hasSameDefault: @Sendable (KeyDeclaration) -> Bool
    let defaultValue: any Sendable
    /// The type's full name and the default's description, made only for a conflict to report: naming a type
    /// demangles it, a noticeable part of declaring a preference at launch.
    private let describe: @Sendable () -> (typeName: String, defaultDescription: String)

    var typeName: String { describe().typeName }
    var defaultDescription: String { describe().defaultDescription }

    init<Value: Sendable & Equatable>(type: Value.Type, default source: DefaultSource<Value>) {
        self.type = ObjectIdentifier(Value.self)
        guard case .fixed(let defaultValue) = source else {
            // Two computed defaults cannot be compared: they agree with each other, never with a declared value.
            self.defaultValue = ComputedDefault()
            self.hasSameDefault = { other in other.defaultValue is ComputedDefault }
            self.describe = { (String(reflecting: Value.self), "a computed default") }
            return
        }
        self.defaultValue = defaultValue
        self.hasSameDefault = { other in (other.defaultValue as? Value) == defaultValue }
        self.describe = { (String(reflecting: Value.self), String(describing: defaultValue)) }
    }

    /// The default of a declaration that computes it.
    private struct ComputedDefault: Sendable {}

    /// How this declaration differs from `other`, as the two descriptions to report; nil when they agree.
    func conflict(with other: KeyDeclaration) -> (String, String)? {
        if type != other.type { return (other.typeName, typeName) }
        if !hasSameDefault(other) {
            return ("\(other.typeName) = \(other.defaultDescription)", "\(typeName) = \(defaultDescription)")
        }
        return nil
    }
}

extension KeyCell {
    /// Records how a wrapper declares this key. Returns the conflict with the first declaration, once per distinct
    /// conflicting declaration, so it is reported once however many wrappers repeat it.
    func declare(_ declaration: KeyDeclaration) -> (first: String, second: String)? {
        let first = declarations.withLock { state -> KeyDeclaration? in
            if let first = state.first { return first }
            state.first = declaration
            return nil
        }
        // Comparing defaults runs the value type's `==`, which is user code: never under the lock.
        guard let first, let conflict = declaration.conflict(with: first) else { return nil }
        let isNew = declarations.withLock { $0.reported.insert(conflict.1).inserted }
        return isNew ? (conflict.0, conflict.1) : nil
    }
}
