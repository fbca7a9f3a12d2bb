import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A rollback record that cannot be read or written: the app is told once, through the error handler and
/// `rollbackRecordProblem`, and a record that does not parse is never rewritten. Serialized: one test turns the
/// process-wide opt-in on. A state folder that cannot be created and a read-only one need a state folder of their
/// own, so they run through `prefs` (VaultRecordCommandTests).
@Suite(.serialized, .ownThreads) struct VaultRecordTests {
    /// The reports about `vault`'s record, by their text.
    static func recordReports(_ vault: Vault) -> [VaultError] {
        let record = record(of: vault)
        return Reports.for("").compactMap { report in
            guard case .rollbackRecordUnavailable(let path, _)? = report.error as? VaultError, path == record else {
                return nil
            }
            return report.error as? VaultError
        }
    }

    static func record(of vault: Vault) -> String { VaultRecord.path(forVault: vault.url.path(percentEncoded: false)) }

    /// Writes "old-token", then "new-token", and returns the vault file as it was with "old-token".
    static func olderCopy(of vault: Vault) throws -> Data {
        try vault.store.setValue(.string("old-token"), forKey: "token")
        let old = try Data(contentsOf: vault.url)
        try vault.store.setValue(.string("new-token"), forKey: "token")
        return old
    }

    /// Replaces the vault's record with an empty folder.
    static func putFolderInPlaceOfRecord(of vault: Vault) throws {
        try FileManager.default.removeItem(atPath: record(of: vault))
        try FileManager.default.createDirectory(atPath: record(of: vault), withIntermediateDirectories: false)
    }

    @Test func aRecordThatKeepsWorkingReportsNothing() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        try vault.store.setValue(.string("token"), forKey: "token")
        let reopened = try vault.reopen()
        try reopened.setValue(.string("next"), forKey: "token")
        #expect(reopened.rollbackRecordProblem == nil && vault.store.rollbackRecordProblem == nil)
        #expect(Self.recordReports(vault).isEmpty)
    }

    @Test func aRecordWhoseLastLineIsGarbageIsReportedOnceAndNeverRewritten() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = Self.record(of: vault)
        let old = try Self.olderCopy(of: vault)
        let handle = try #require(FileHandle(forWritingAtPath: record))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("garbage\n".utf8))
        try handle.close()
        let damaged = try Data(contentsOf: URL(filePath: record))

        try old.write(to: vault.url)
        let store = try vault.reopen()
        #expect(try store.value(forKey: "token") == .string("old-token"), "the check cannot run")
        try store.setValue(.string("written"), forKey: "other")
        _ = try vault.reopen()  // another store: told once more, by that store
        let reports = Self.recordReports(vault)
        #expect(reports.count == 2, "once per store, however many reads and writes: \(reports)")
        #expect(
            reports.allSatisfy { "\($0)".contains("does not parse") && "\($0)".contains("rollback protection is off") })
        #expect(store.rollbackRecordProblem == reports.first)
        #expect(try Data(contentsOf: URL(filePath: record)) == damaged, "never rewritten, so never lowered")
    }

    /// The store that appended the last line appends the next one without reading the record, but not once the
    /// record changed since: garbage appended in between is seen, reported, and left as it is.
    @Test func garbageAppendedBetweenTwoWritesOfAStoreIsSeenAndNeverRewritten() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = Self.record(of: vault)
        try vault.store.setValue(.int(1), forKey: "counter")
        try vault.store.setValue(.int(2), forKey: "counter")
        let handle = try #require(FileHandle(forWritingAtPath: record))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("garbage\n".utf8))
        try handle.close()
        let damaged = try Data(contentsOf: URL(filePath: record))
        try vault.store.setValue(.int(3), forKey: "counter")
        try vault.store.setValue(.int(4), forKey: "counter")
        #expect(try Data(contentsOf: URL(filePath: record)) == damaged, "never rewritten, so never lowered")
        let problem = try #require(vault.store.rollbackRecordProblem)
        #expect("\(problem)".contains("does not parse"), "\(problem)")
    }

    @Test func aDirectoryInPlaceOfTheRecordIsReportedAndAnOlderCopyDoesNotOpenSilently() throws {
        Reports.install()
        let vault = try Vault()
        defer { vault.directory.cleanup() }
        let record = Self.record(of: vault)
        let old = try Self.olderCopy(of: vault)
        try Self.putFolderInPlaceOfRecord(of: vault)
        defer { try? FileManager.default.removeItem(atPath: record) }

        try old.write(to: vault.url)
        let store = try vault.reopen()
        #expect(try store.value(forKey: "token") == .string("old-token"))
        let problem = try #require(store.rollbackRecordProblem)
        #expect("\(problem)".contains("is a directory, not a regular file"), "\(problem)")
        #expect(Self.recordReports(vault) == [problem], "reported when it opened")
        try store.setValue(.string("written"), forKey: "token")
        var info = stat()
        #expect(lstat(record, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR, "left as it is")
        #expect(Self.recordReports(vault).count == 1)
    }
}
