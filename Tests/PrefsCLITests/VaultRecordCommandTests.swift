import Foundation
import TestThreads
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A vault's rollback record that cannot be kept, as `prefs` users meet it: a warning on stderr from
/// every command, and `prefs secure verify` exiting 3. Each test gives `prefs` a state folder of its own.
@Suite(.ownThreads) struct VaultRecordCommandTests {
    struct Secured {
        let sandbox: Sandbox
        let state: URL
        var vault: [String] { ["--vault", sandbox.path("v.vault"), "--key-file", sandbox.path("v.key")] }

        init(state: (Sandbox) throws -> URL) throws {
            sandbox = try Sandbox()
            self.state = try state(sandbox)
        }

        @discardableResult
        func prefs(_ arguments: [String], stdin: String? = nil) throws -> PrefsResult {
            try sandbox.prefs(
                ["secure"] + arguments + vault, stdin: stdin,
                environment: ["XDG_STATE_HOME": state.path(percentEncoded: false)])
        }

        /// Writes `old`, then `new`, then puts the vault holding `old` back.
        func restoreOlderCopy() throws {
            try prefs(["set", "token"], stdin: "old")
            let old = try Data(contentsOf: sandbox.file("v.vault"))
            try prefs(["set", "token"], stdin: "new")
            try old.write(to: sandbox.file("v.vault"))
        }
    }

    @Test func withAWorkingStateFolderAnOlderCopyIsRefused() throws {
        let secured = try Secured { $0.file("state") }
        defer { secured.sandbox.cleanup() }
        #expect(try secured.prefs(["init"]).error.isEmpty)
        try secured.restoreOlderCopy()
        let refused = try secured.prefs(["get", "token", "--reveal"])
        #expect(refused.status == 3 && refused.error.contains("older copy"), "\(refused)")
    }

    @Test func aStateFolderThatCannotBeCreatedIsReportedAndVerifyFails() throws {
        // A regular file where the state folder's parent should be: stops root as well as anyone.
        let secured = try Secured { sandbox in
            try Data("not a folder".utf8).write(to: sandbox.file("home-file"))
            return sandbox.file("home-file/state")
        }
        defer { secured.sandbox.cleanup() }
        let created = try secured.prefs(["init"])
        #expect(created.status == 0 && created.error.contains("rollback protection is off"), "\(created)")
        #expect(created.error.contains("is a regular file, not a folder"), "\(created)")
        try secured.restoreOlderCopy()
        let opened = try secured.prefs(["get", "token", "--reveal"])
        #expect(opened.output == "old\n", "the older copy opens (nothing can tell it apart), but not silently")
        let warnings = opened.error.split(separator: "\n").filter { $0.contains("rollback protection is off") }
        #expect(warnings.count == 1, "told once: \(opened)")
        let verify = try secured.prefs(["verify"])
        #expect(verify.status == 3 && verify.output.isEmpty, "\(verify)")
        #expect(verify.error.contains("rollback protection is off"), "\(verify)")
    }

    @Test func aRecordWhoseLastLineIsGarbageFailsVerify() throws {
        let secured = try Secured { $0.file("state") }
        defer { secured.sandbox.cleanup() }
        try secured.prefs(["init"])
        try secured.prefs(["set", "token"], stdin: "value")
        let folder = secured.state.appending(path: "prefs/vaults")
        let name = try #require(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).first { $0.hasSuffix(".record") })
        let record = folder.appending(path: name)
        let handle = try FileHandle(forWritingTo: record)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("12x\n".utf8))
        try handle.close()
        let damaged = try Data(contentsOf: record)
        let verify = try secured.prefs(["verify"])
        #expect(verify.status == 3 && verify.error.contains("does not parse"), "\(verify)")
        try secured.prefs(["set", "token"], stdin: "next")
        #expect(try Data(contentsOf: record) == damaged, "never rewritten")
    }

    @Test(.enabled(if: getuid() != 0, "root writes into a 0500 folder, so a read-only state folder stops only others"))
    func aReadOnlyStateFolderIsReportedAndVerifyFails() throws {
        let secured = try Secured { sandbox in
            let state = sandbox.file("state")
            try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
            return state
        }
        defer {
            chmod(secured.state.path, 0o700)
            secured.sandbox.cleanup()
        }
        #expect(chmod(secured.state.path, 0o500) == 0)
        try secured.prefs(["init"])
        try secured.restoreOlderCopy()
        let opened = try secured.prefs(["get", "token", "--reveal"])
        #expect(opened.output == "old\n" && opened.error.contains("rollback protection is off"), "\(opened)")
        #expect(try secured.prefs(["verify"]).status == 3)
    }
}
