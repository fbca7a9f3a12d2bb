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

/// A vault with a state folder of its own (its records folder is the test's, so it can be moved, linked and locked
/// without touching any other test), opened here and by `PrefsTestHelper` children pointed at the same folder.
private struct RecordRig {
    let directory: TempDir
    var vault: URL { directory.file("secrets.vault") }
    var keyFile: URL { directory.file("secrets.key") }
    var state: String { directory.path("state") }
    /// The records folder, as this process and the children see it.
    var records: String { state + "/prefs/vaults" }
    var record: String { VaultRecord.$scopedDirectory.withValue(records) { VaultRecord.path(forVault: vaultPath) } }
    var vaultPath: String { vault.path(percentEncoded: false) }
    var spec: String { "vault:\(vaultPath):\(keyFile.path(percentEncoded: false))" }

    init() throws {
        directory = try TempDir()
        try FileManager.default.createDirectory(atPath: records, withIntermediateDirectories: true)
    }

    /// A store of the vault whose record lives in ``records``.
    func open() throws -> EncryptedFileStore {
        try VaultRecord.$scopedDirectory.withValue(records) {
            try EncryptedFileStore(url: vault, key: .keyFile(keyFile), cost: .testing)
        }
    }

    /// A store of the vault that wrote "counter" three times, so it keeps its record open.
    func openAfterThreeWrites() throws -> EncryptedFileStore {
        let store = try open()
        for value: Int64 in 1...3 { try store.setValue(.int(value), forKey: "counter") }
        return store
    }

    /// Puts `copy` in place of the vault and says whether opening it is refused as a rollback.
    func refuses(_ copy: Data) throws -> Bool {
        try copy.write(to: vault)
        return reopenIsRollback()
    }

    /// Writes `value` through `store`, then expects the record to hold that write's generation with nothing to
    /// report, and `copy` (an older vault) to be refused.
    func expectNextWriteRecorded(
        _ value: Int64, by store: EncryptedFileStore, refusing copy: Data,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try store.setValue(.int(value), forKey: "counter")
        #expect(store.rollbackRecordProblem == nil, sourceLocation: sourceLocation)
        #expect(try recordGeneration() == vaultGeneration(), "\(recordText)", sourceLocation: sourceLocation)
        #expect(try refuses(copy), sourceLocation: sourceLocation)
    }

    /// Runs `PrefsTestHelper ARGUMENTS…` on the vault, with this rig's state folder.
    func child(_ arguments: [String]) throws -> ChildProcess.Exit {
        try ChildProcess.run(arguments, environment: ["XDG_STATE_HOME": state])
    }

    /// The generation in the vault file's header.
    func vaultGeneration() throws -> UInt64 {
        try VaultFormat.parseHeader(Data(contentsOf: vault)).identity.generation
    }

    /// The record's text, split in lines (the header, the vault's path, its id, then the generations).
    func recordLines() throws -> [Substring] {
        try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
    }

    /// The record's text, for messages.
    var recordText: String { (try? String(contentsOfFile: record, encoding: .utf8)) ?? "(no record)" }

    /// The generation on the record's last complete line.
    func recordGeneration() throws -> UInt64 {
        let lines = try recordLines()
        try #require(lines.last == "", "the record ends with a newline: \(lines)")
        return try #require(UInt64(lines[lines.count - 2]), "\(lines)")
    }

    /// Whether opening the vault as it is on disk now is refused as a rollback.
    func reopenIsRollback() -> Bool {
        do {
            _ = try open()
            return false
        } catch {
            if case .rollbackDetected? = error as? VaultError { return true }
            return false
        }
    }

    /// The record's inode.
    func recordInode() -> UInt64 {
        var info = stat()
        return lstat(record, &info) == 0 ? UInt64(info.st_ino) : 0
    }
}

/// Makes `path` (a file or a folder) unwritable for this process: `chmod a-w` for a user, the immutable flag for root
/// (which writes through any mode). Returns the undo, or nil when this system cannot do it.
private func makeUnwritable(_ path: String) -> (() -> Void)? {
    if getuid() != 0 {
        var info = stat()
        guard stat(path, &info) == 0, chmod(path, info.st_mode & 0o555) == 0 else { return nil }
        return { _ = chmod(path, info.st_mode & 0o7777) }
    }
    func chattr(_ flag: String) -> Bool {
        guard let exit = try? ChildProcess.run(URL(filePath: "/usr/bin/chattr"), [flag, path]) else { return false }
        return exit.succeeded
    }
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr"), chattr("+i") else { return nil }
    return { _ = chattr("-i") }
}

/// The rollback record attacked the way another program or an unlucky user would, between two writes of a store
/// that keeps the record open: replaced, regrown in place, deleted, moved behind a link, locked, written by another
/// process in turn, or left by a process killed while it wrote. Whatever happens, the record at the record's path
/// is never ahead of its vault, and once the store writes again it holds that write's generation, so an older copy
/// of the vault is refused.
@Suite(.ownThreads) struct VaultRecordAdversarialTests {
    /// Another file of exactly the same size renamed over the record (a different inode) is not the record the store
    /// kept open: the next generation goes into the file at the record's path, not into the one that was replaced.
    @Test func aRecordRenamedOverByAFileOfTheSameSizeIsReadAgain() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let copy = try Data(contentsOf: rig.vault)
        // The same record with generation 1 as its last line, padded with zeros to the same size.
        var lines = try rig.recordLines()
        let width = lines[lines.count - 2].count
        lines[lines.count - 2] = Substring(String(repeating: "0", count: width - 1) + "1")
        let lowered = Data(lines.joined(separator: "\n").utf8)
        let before = try Data(contentsOf: URL(filePath: rig.record))
        #expect(lowered.count == before.count && lowered != before)
        let inode = rig.recordInode()
        try lowered.write(to: URL(filePath: rig.record + ".tmp"))
        #expect(rename(rig.record + ".tmp", rig.record) == 0)
        #expect(rig.recordInode() != inode)
        try rig.expectNextWriteRecorded(4, by: store, refusing: copy)
    }

    /// The record truncated and written again in place to the same size (same inode), ending with a line cut short:
    /// the store must not append its generation to that cut-short line, which would make a record far ahead of its
    /// vault (and the vault refused as an older copy of itself).
    @Test func aRecordRegrownInPlaceToTheSameSizeIsReadAgain() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let lines = try rig.recordLines()
        let head = lines.prefix(3).joined(separator: "\n") + "\n"
        let size = try Data(contentsOf: URL(filePath: rig.record)).count
        // "1\n" then nines without a newline: the last complete line is 1, the nines a line cut short.
        let regrown = head + "1\n" + String(repeating: "9", count: size - head.utf8.count - 2)
        #expect(regrown.utf8.count == size)
        let inode = rig.recordInode()
        let fd = open(rig.record, O_WRONLY | O_TRUNC)
        try #require(fd >= 0)
        let written = regrown.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, size) }
        close(fd)
        #expect(written == size && rig.recordInode() == inode)

        try store.setValue(.int(4), forKey: "counter")
        #expect(try rig.recordGeneration() == rig.vaultGeneration(), "\(rig.recordText)")
        #expect(try rig.open().value(forKey: "counter") == .int(4), "the vault opens: its record is not ahead")
    }

    /// The records folder moved and replaced by a symbolic link, to the moved folder (the same record file) or to a
    /// copy of it (another file of the same size): the next write lands in the record found through the link.
    @Test(arguments: [false, true]) func aRecordsFolderReplacedByALinkIsFollowed(toACopy: Bool) throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let copy = try Data(contentsOf: rig.vault)
        let moved = rig.records + ".moved"
        try FileManager.default.moveItem(atPath: rig.records, toPath: moved)
        var target = moved
        if toACopy {
            target = rig.records + ".copy"
            try FileManager.default.copyItem(atPath: moved, toPath: target)
        }
        #expect(symlink(target, rig.records) == 0)
        try rig.expectNextWriteRecorded(4, by: store, refusing: copy)
    }

    /// A record deleted between two writes is written again by the next one, which an older copy then meets.
    @Test func aRecordDeletedBetweenTwoWritesIsWrittenAgain() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let copy = try Data(contentsOf: rig.vault)
        try FileManager.default.removeItem(atPath: rig.record)
        try rig.expectNextWriteRecorded(4, by: store, refusing: copy)
    }

    /// This process and child processes write the same vault in turn, each appending to the record: a store keeping
    /// the record open appends only while nobody else did, so the record moves forward line by line, always ends
    /// at the vault's generation, and every copy of the vault older than it is refused.
    @Test func twoProcessesWritingInTurnKeepTheRecordInStep() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.open()
        var copies: [Data] = []
        for round in 0..<4 {
            try store.setValue(.int(Int64(2 * round)), forKey: "counter")
            // A second write: appended through the record this store kept open.
            try store.setValue(.int(Int64(2 * round + 100)), forKey: "other")
            #expect(try rig.recordGeneration() == rig.vaultGeneration())
            copies.append(try Data(contentsOf: rig.vault))
            let child = try rig.child(["set-int", rig.spec, "counter", String(2 * round + 1)])
            #expect(child.status == 0, "\(child)")
            #expect(try rig.recordGeneration() == rig.vaultGeneration())
        }
        try store.setValue(.int(8), forKey: "counter")
        #expect(try rig.recordGeneration() == rig.vaultGeneration())
        let generations = try rig.recordLines().dropFirst(3).dropLast().map { try #require(UInt64($0)) }
        #expect(generations == generations.sorted(), "a record only moves forward: \(generations)")
        #expect(Set(generations).count == generations.count, "each generation recorded once: \(generations)")
        let latest = try Data(contentsOf: rig.vault)
        for copy in copies {
            #expect(try rig.refuses(copy))
        }
        try latest.write(to: rig.vault)
        #expect(try rig.open().value(forKey: "counter") == .int(8))
    }

    /// A child killed while it writes the vault over and over leaves a record at or behind the vault, never ahead:
    /// the vault opens with every value the child reported written, and an older copy is still refused.
    @Test(arguments: [3, 17, 40]) func aWriterKilledMidWriteLeavesARecordAtOrBehindItsVault(writes: Int) throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.open()
        try store.setValue(.int(0), forKey: "n")
        try store.setValue(.int(0), forKey: "n2")
        let copy = try Data(contentsOf: rig.vault)
        store.close()
        let child = try ChildProcess.start(["count-up", rig.spec, "n"], environment: ["XDG_STATE_HOME": rig.state])
        var reported = 0
        while reported < writes, let line = child.readLine() { reported = Int(line) ?? reported }
        child.kill()
        #expect(reported == writes, "\(child.wait())")
        #expect(try rig.recordGeneration() <= rig.vaultGeneration(), "\(rig.recordText)")
        let reopened = try rig.open()
        #expect(try reopened.value(for: PrefKey("n", default: 0)) >= writes)
        try reopened.setValue(.int(-1), forKey: "n")
        #expect(try rig.recordGeneration() == rig.vaultGeneration())
        #expect(try rig.refuses(copy))
    }

    /// The record made read-only between two writes: the vault write still succeeds and keeps its value, the store
    /// says why its record is not kept (a typed error naming the record), the record is left at the generation it
    /// had; once it is writable again, the next write records that write and the problem clears.
    @Test func aRecordMadeReadOnlyBetweenWritesIsReportedAndNothingIsLost() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let before = try Data(contentsOf: URL(filePath: rig.record))
        let undo = try #require(makeUnwritable(rig.record), "this system can make a file unwritable")
        var undone = false
        defer { if !undone { undo() } }

        try store.setValue(.int(4), forKey: "counter")
        guard case .rollbackRecordUnavailable(let path, _)? = store.rollbackRecordProblem else {
            Issue.record("no problem reported: \(String(describing: store.rollbackRecordProblem))")
            return
        }
        #expect(path == rig.record)
        #expect(try Data(contentsOf: URL(filePath: rig.record)) == before, "left as it was")
        #expect(try rig.open().value(forKey: "counter") == .int(4), "a record behind its vault is accepted")

        undo()
        undone = true
        try rig.expectNextWriteRecorded(5, by: store, refusing: try Data(contentsOf: rig.vault))
    }

    /// The records folder made read-only between two writes: the record is replaced by a rename, which needs the
    /// folder, so the next write says the record cannot be kept (the vault itself is written) and leaves it as it
    /// was; once the folder is writable again, the next write takes its generation and an older copy is refused.
    @Test func aRecordsFolderMadeReadOnlyBetweenWritesIsReportedAndTakesTheNextGenerationOnceWritable() throws {
        let rig = try RecordRig()
        defer { rig.directory.cleanup() }
        let store = try rig.openAfterThreeWrites()
        let before = try Data(contentsOf: URL(filePath: rig.record))
        let undo = try #require(makeUnwritable(rig.records), "this system can make a folder unwritable")
        var undone = false
        defer { if !undone { undo() } }
        try store.setValue(.int(4), forKey: "counter")
        guard case .rollbackRecordUnavailable(let path, _)? = store.rollbackRecordProblem else {
            Issue.record("no problem reported: \(String(describing: store.rollbackRecordProblem))")
            return
        }
        #expect(path == rig.record)
        #expect(try Data(contentsOf: URL(filePath: rig.record)) == before, "left as it was")
        undo()
        undone = true
        try rig.expectNextWriteRecorded(5, by: store, refusing: try Data(contentsOf: rig.vault))
    }
}
