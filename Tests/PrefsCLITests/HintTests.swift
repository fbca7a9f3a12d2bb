import Foundation
import PostgresTestServer
import Prefs
import PrefsTestSupport
import TestThreads
import Testing

/// What `prefs` tells a user who got something slightly wrong, run as the real binary: each hint leads to the
/// command that works, and each form `defaults` users bring along is taken or refused, never silently ignored.
@Suite(.ownThreads) struct HintTests {
    /// The `prefs secure list` a missing secret suggests opens the same vault with the same key as the command did.
    @Test func aMissingSecretSuggestsListingTheSameVault() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("secure", "init", "--app", "com.example.notes").expectSuccess()
        let missing = try sandbox.prefs("secure", "get", "tokn", "--app", "com.example.notes")
        #expect(missing.status == 1 && missing.isOneLineFailure, "\(missing)")
        #expect(missing.error.contains("run `prefs secure list --app com.example.notes` for the names"), "\(missing)")

        let vault = ["--vault", sandbox.path("my vault"), "--key-file", sandbox.path("k")]
        try sandbox.prefs(["secure", "init"] + vault).expectSuccess()
        let elsewhere = try sandbox.prefs(["secure", "delete", "tokn"] + vault)
        let suggested = "prefs secure list --vault '\(sandbox.path("my vault"))' --key-file \(sandbox.path("k"))"
        #expect(elsewhere.error.contains("run `\(suggested)`"), "\(elsewhere)")
        // The suggestion, pasted into a shell, lists that vault.
        try sandbox.prefs(["secure", "set", "token"] + vault, stdin: "t").expectSuccess()
        let pasted = String(suggested.dropFirst("prefs".count))
        let listed = PrefsResult(
            try ChildProcess(
                URL(filePath: "/bin/sh"), ["-c", PrefsProcess.binary.path(percentEncoded: false) + pasted],
                environment: sandbox.environment
            ).wait())
        #expect(listed.status == 0 && listed.output == "token\n", "\(listed)")
    }

    /// A secret asked for in the app's domain, where secrets never are, is pointed at the app's vault; a key of an
    /// app without a vault is not.
    @Test func aSecretReadFromTheDomainPointsAtTheVault() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "com.example.notes", "theme", "dark").expectSuccess()
        let before = try sandbox.prefs("read", "com.example.notes", "token")
        #expect(before.status == 1 && !before.error.contains("prefs secure"), "\(before)")

        try sandbox.prefs("secure", "init", "--app", "com.example.notes").expectSuccess()
        try sandbox.prefs(["secure", "set", "token", "--app", "com.example.notes"], stdin: "t").expectSuccess()
        let missing = try sandbox.prefs("read", "com.example.notes", "token")
        #expect(missing.status == 1 && missing.isOneLineFailure, "\(missing)")
        #expect(missing.error.contains("prefs secure get token --app com.example.notes"), "\(missing)")
        let got = try sandbox.prefs("secure", "get", "token", "--app", "com.example.notes", "--reveal")
        #expect(got.status == 0 && got.output == "t\n", "\(got)")
    }

    /// With `--type` given, a value that does not parse asks for another value, not for `--type`.
    @Test func aValueThatDoesNotParseAsTheTypeGivenDoesNotAskForTheType() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let given = try sandbox.prefs("write", "app", "opened", "yesterday", "--type", "date")
        #expect(given.status == 2 && given.isOneLineFailure, "\(given)")
        #expect(given.error.contains("\"yesterday\" is not a date: expected "), "\(given)")
        #expect(!given.error.contains("pass --type"), "\(given)")
        // Without --type, the stored type decided: another type may be asked for.
        try sandbox.prefs("write", "app", "count", "1", "--type", "int").expectSuccess()
        let kept = try sandbox.prefs("write", "app", "count", "many")
        #expect(kept.error.contains("(the type stored under \"count\")") && kept.error.contains("pass --type"))
    }

    /// `--type integer` and `--type boolean` are the types `-integer` and `-boolean` write.
    @Test func theLongTypeNamesOfDefaultsAreTypes() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "a", "5", "--type", "integer").expectSuccess()
        try sandbox.prefs("write", "app", "b", "-integer", "5").expectSuccess()
        try sandbox.prefs("write", "app", "c", "YES", "--type", "boolean").expectSuccess()
        let store = try SuiteFileStore(suiteName: "app", directory: sandbox.config)
        #expect(try store.value(forKey: "a") == .int(5) && store.value(forKey: "b") == .int(5))
        #expect(try store.value(forKey: "c") == .bool(true))
        let unknown = try sandbox.prefs("write", "app", "d", "5", "--type", "number")
        #expect(unknown.status == 2 && unknown.error.contains("unknown type \"number\""), "\(unknown)")
    }

    /// `--types` with a KEY prints that key's line of the listing.
    @Test func typesWithAKeyPrintsThatKeysLine() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "app", "fontSize", "0.5", "--type", "float").expectSuccess()
        try sandbox.prefs("write", "app", "theme", "dark").expectSuccess()
        let line = try sandbox.prefs("read", "app", "fontSize", "--types")
        #expect(line.status == 0 && line.output == "fontSize  double  0.5\n", "\(line)")
    }

    @Test func aMistypedDomainOrKeyGetsTheClosestName() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        try sandbox.prefs("write", "com.example.notes", "fontSize", "13").expectSuccess()
        try sandbox.prefs("write", "com.example.mail", "theme", "dark").expectSuccess()
        let domain = try sandbox.prefs("read", "com.exmaple.notes")
        #expect(domain.status == 1 && domain.isOneLineFailure, "\(domain)")
        #expect(domain.error.contains(" (did you mean \"com.example.notes\"?);"), "\(domain)")
        for arguments in [
            ["read", "com.example.notes", "fontsize"], ["read-type", "com.example.notes", "fontSiz"],
            ["delete", "com.example.notes", "fontSise"], ["rename", "com.example.notes", "fontsize", "size"],
        ] {
            let key = try sandbox.prefs(arguments)
            #expect(key.status == 1 && key.isOneLineFailure, "\(key)")
            #expect(key.error.contains(" (did you mean \"fontSize\"?);"), "\(arguments): \(key)")
        }
        // Nothing close: no guess.
        let far = try sandbox.prefs("read", "com.example.notes", "volume")
        #expect(far.status == 1 && !far.error.contains("did you mean"), "\(far)")
    }

    /// As `defaults read PATH` does, a DOMAIN with a `/` is a property list to read (`.plist` may be left out),
    /// and the file is not written.
    @Test func aPathIsReadAsThePropertyListItNames() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let folder = sandbox.file("exported")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let plist = folder.appending(path: "x.plist")
        try PropertyListSerialization.data(
            fromPropertyList: ["theme": "dark", "count": 3], format: .binary, options: 0
        ).write(to: plist)
        let before = try Data(contentsOf: plist)
        let path = plist.path(percentEncoded: false)
        #expect(try sandbox.prefs("read", path, "theme").output == "dark\n")
        #expect(try sandbox.prefs("read", String(path.dropLast(".plist".count)), "count").output == "3\n")
        let whole = try sandbox.prefs("read", path, "--types")
        #expect(whole.output == "count  int     3\ntheme  string  dark\n", "\(whole)")
        #expect(try sandbox.prefs("read-type", path, "count").output == "Type is integer\n")
        #expect(try Data(contentsOf: plist) == before)
        let absent = try sandbox.prefs("read", folder.appending(path: "nope.plist").path(percentEncoded: false))
        #expect(absent.status == 1 && absent.isOneLineFailure && absent.error.contains("no file at"), "\(absent)")
    }

}

/// The hints of `--postgres-env`, against a real server.
@Suite(.ownThreads) struct PostgresHintTests {
    @Test func domainsListsTheNamespacesOfTheDatabase() throws {
        let target = try PostgresCommandTests.Target()
        defer { target.sandbox.cleanup() }
        let empty = try target.prefs("domains")
        #expect(empty.status == 0 && empty.output.isEmpty, "a database without the tables has none: \(empty)")
        try target.prefs("write", "com.example.app", "theme", "dark").expectSuccess()
        try target.prefs("write", "com.example.mail", "count", "1").expectSuccess()
        try target.prefs("write", "removed", "k", "v").expectSuccess()
        try target.prefs("delete", "removed", "k").expectSuccess()
        #expect(try target.prefs("domains").output == "com.example.app\ncom.example.mail\n")
        #expect(try target.prefs("domains", "--json").output == #"["com.example.app", "com.example.mail"]"# + "\n")
        let mistyped = try target.prefs("read", "com.exampel.app")
        #expect(mistyped.status == 1 && mistyped.error.contains("did you mean \"com.example.app\"?"), "\(mistyped)")
    }

    /// A connection error keeps the socket libpq tried, which says where the server was looked for.
    @Test func aConnectionErrorNamesTheSocketItTried() throws {
        let sandbox = try Sandbox()
        defer { sandbox.cleanup() }
        let result = try sandbox.prefs(
            ["read", "app", "--postgres-env", "PG"],
            environment: ["PG": "postgresql:///app?host=/nonexistent/prefs-socket&password=hunter2"])
        #expect(result.status == 1 && result.isOneLineFailure, "\(result)")
        #expect(
            result.error.contains(#"server on socket "/nonexistent/prefs-socket/.s.PGSQL.5432": "#), "\(result)")
        #expect(!result.error.contains("hunter2"))
    }
}
