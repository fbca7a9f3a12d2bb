/// `PrefsConfig.errorHandler = { (report: PrefsReport) in … }` receives one of these for each reported error.
public struct PrefsReport: Sendable, CustomStringConvertible {
    /// `report.operation == .read` tells what was being done when the error happened.
    public enum Operation: String, Sendable {
        /// `.read`: a read, which returned the default value (or the last good one) instead.
        case read
        /// `.write`: a write, which left the stored value as it was.
        case write
        /// `.declaration`: a wrapper declared a key that another wrapper of the same store declared with another
        /// type or default (``PrefsError/conflictingDeclarations(key:first:second:)``); both keep working.
        case declaration
        /// `.migration`: a declared ``PrefMigration`` ran (`error` is then a ``PrefsMigrationNotice`` saying what moved
        /// where) or failed, leaving the older form where it was.
        case migration
    }

    /// `report.key` is the key of the preference involved, or empty for a report about a whole store or file.
    public let key: String
    /// `report.operation` tells whether a read, a write or a declaration failed.
    public let operation: Operation
    /// `report.error` is the error, usually a ``PrefsError`` or ``VaultError``.
    public let error: any Error
    /// `report.file` is the path of the file a report without a key is about (a preferences file or vault that
    /// cannot be read, a layer file), when the error names one.
    public let file: String?

    /// Where the value a read could not use came from, to say why in its layer's words and name a step that applies.
    let source: (any ReadSource)?

    init(key: String, operation: Operation, error: any Error, file: String? = nil, source: (any ReadSource)? = nil) {
        self.key = key
        self.operation = operation
        self.error = error
        self.file = key.isEmpty ? file ?? Self.fileError(in: error)?.filePath : nil
        self.source = source
    }

    /// `"read of \"theme\" failed: …"`, `"read of /home/me/.config/app.plist failed: …"`, and for a notice, where
    /// nothing failed, `"notice about /home/me/.config/app.plist: …"`. A read that could not use a value names where
    /// the value came from and a step that changes it there: `read of "fontSize" failed: -fontSize 73 (the command
    /// line): outside 8...72; the default 13 is read for this run`.
    public var description: String {
        if operation == .declaration { return "declaration of \(String(reflecting: key)): \(error)" }
        if operation == .migration, error is PrefsMigrationNotice {
            return "migration of \(String(reflecting: key)): \(error)"
        }
        let subject = key.isEmpty ? file : String(reflecting: key)
        if isNotice { return "notice\(subject.map { " about \($0)" } ?? ""): \(error)" }
        if operation == .read, let source, let error = error as? PrefsError, let sentence = source.sentence(for: error)
        {
            return "read of \(String(reflecting: key)) failed: \(sentence)"
        }
        return "\(operation.rawValue)\(subject.map { " of \($0)" } ?? "") failed: \(error)"
    }

    /// Whether the report tells of something to act on although nothing failed: the standard domain apart from
    /// Foundation's (``PrefsError/separateStandardDomain(appIdentifier:foundationDomain:)``), a real file used by a
    /// test (``PrefsIsolationWarning``).
    var isNotice: Bool {
        if error is PrefsIsolationWarning { return true }
        if case .separateStandardDomain? = error as? PrefsError { return true }
        return false
    }
}

/// Where a value a read could not use came from, as its report says it (the stores' layers make one).
package protocol ReadSource: Sendable {
    /// `-fontSize 73 (the command line): outside 8...72; the default 13 is read for this run`: the value, where it
    /// is, why `error` refused it and a step that applies there; nil when the report says it the plain way.
    func sentence(for error: PrefsError) -> String?
}

/// `report.error is PrefsIsolationWarning`: a default store that is a real file (``what``, such as
/// `SuiteFileStore.standard`) was used by a test that is not isolated from it.
///
/// Two cases, each reported once per file, at its first such use, so that tests do not silently share a file with
/// every other run of them (and with the developer's own preferences):
///
/// - inside a test under `.isolatedPreferences`, which cannot stand in for a store named explicitly
///   (``insideIsolatedTest`` is true): declare the wrapper without `store:` (it then uses the test's store), or give
///   it an ``InMemoryStore``;
/// - in a test process (XCTest or Swift Testing, such as `MyAppPackageTests.xctest`), outside `.isolatedPreferences`
///   and `PrefsConfig.withDefaultStore` (``insideIsolatedTest`` is false): the wrappers without `store:` of a test
///   that forgot the trait reach `<test process>.plist` and its vault. Put `.isolatedPreferences` on the suite.
public struct PrefsIsolationWarning: Error, Sendable, CustomStringConvertible {
    /// `notIsolated.path` is the real file.
    public let path: String
    /// `notIsolated.what` names the store: `"SuiteFileStore.standard"`, `"the default vault"`.
    public let what: String
    /// `notIsolated.insideIsolatedTest` is true when the store was used inside `.isolatedPreferences`, false when a
    /// test process used it with no isolation at all.
    public let insideIsolatedTest: Bool

    /// The call that gives a test a store of its own in place of this one, outside Swift Testing.
    let isolatedBy: String

    init(
        path: String, what: String, insideIsolatedTest: Bool = true,
        isolatedBy: String = "PrefsConfig.withDefaultStore(InMemoryStore())"
    ) {
        self.path = path
        self.what = what
        self.insideIsolatedTest = insideIsolatedTest
        self.isolatedBy = isolatedBy
    }

    /// `"SuiteFileStore.standard is the real file …"`, naming the call that isolates it: the vault's is
    /// `PrefsConfig.withDefaultSecureStore(InMemoryStore())`.
    public var description: String {
        guard insideIsolatedTest else {
            return "\(what) is the real file \(path), used by a test outside .isolatedPreferences: every run of the "
                + "tests shares it, with what earlier runs left there; put @Suite(.isolatedPreferences) on the tests "
                + "(from PrefsTesting), or run them inside \(isolatedBy)"
        }
        return "\(what) is the real file \(path), used inside a test under .isolatedPreferences, which does not "
            + "isolate it; declare the wrapper without store: to use the test's store"
    }
}
