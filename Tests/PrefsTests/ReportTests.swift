import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// What reaches `PrefsConfig.errorHandler`: reports name what failed and where, and a failure that repeats on every
/// write is reported once per cause.
@Suite(.ownThreads) struct ReportTests {
    @Test func aFolderThatCannotBeWrittenIsReportedOncePerCauseNotOncePerWrite() throws {
        Reports.install()
        let folder = try TempDir("prefs-reports")
        defer { folder.cleanup() }
        let storeFolder = folder.file("settings")
        let store = try FileStore(url: storeFolder.appending(path: "prefs.json"))
        let key = uniqueKey("volume")
        let volume = StoredValue(key: key, default: 0, store: store)
        volume.wrappedValue = 1

        // The folder is moved away and a file put in its place: every write fails the same way (as it does in a
        // read-only folder, which root, running these tests in CI, could still write).
        let moved = folder.file("settings-moved")
        try FileManager.default.moveItem(at: storeFolder, to: moved)
        try Data().write(to: storeFolder)
        for step in 2...61 { volume.wrappedValue = step }
        let failures = Reports.for(key).filter { $0.operation == .write }
        #expect(failures.count == 1, "60 failed writes, one cause: \(failures)")
        #expect(failures.first?.description.hasPrefix("write of \"\(key)\" failed: ") == true)
        #expect(failures.first?.description.contains(storeFolder.path(percentEncoded: false)) == true)

        // Once a write succeeds again, the next failure is news and is reported.
        try FileManager.default.removeItem(at: storeFolder)
        try FileManager.default.moveItem(at: moved, to: storeFolder)
        volume.wrappedValue = 62
        #expect(try store.value(forKey: key) == .int(62))
        try FileManager.default.moveItem(at: storeFolder, to: moved)
        try Data().write(to: storeFolder)
        volume.wrappedValue = 63
        volume.wrappedValue = 64
        #expect(Reports.for(key).filter { $0.operation == .write }.count == 2)
    }

    /// A write that succeeds because it changes nothing never reached the file, so it says nothing about the cause:
    /// on a full disk (a child process whose file size limit is below the file's), writes of five keys, each first
    /// set to the value it has, are reported once.
    @Test(arguments: [Backend.file, .userDefaults, .vault])
    func aWriteThatChangesNothingDoesNotReportTheSameCauseAgain(_ backend: Backend) throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let run = try ChildProcess.run(["full-disk-reports", backend.spec(in: directory), "5"])
        #expect(run.succeeded, "\(run)")
        #expect(run.lines == ["reports 1"], "five keys, one cause")
    }

    @Test func aDamagedFileIsReportedOnceForSixtyWritesAndNamesTheFile() throws {
        Reports.install()
        let folder = try TempDir("prefs-reports")
        defer { folder.cleanup() }
        let url = folder.file("prefs.json")
        let store = try FileStore(url: url)
        let key = uniqueKey("brightness")
        let brightness = StoredValue(key: key, default: 0, store: store)
        brightness.wrappedValue = 1

        try Data("{ not json".utf8).write(to: url)
        for step in 2...61 { brightness.wrappedValue = step }
        let failures = Reports.for(key).filter { $0.operation == .write }
        #expect(failures.count == 1, "\(failures)")
        #expect(try Data(contentsOf: url) == Data("{ not json".utf8), "the damaged file is left as it was")
        let path = url.path(percentEncoded: false)
        #expect(failures.first.map { "\($0)".contains(path) } == true)
    }

    @Test func aStoreLevelReportNamesTheOperationAndTheFile() {
        let path = "/tmp/prefs-report/app.plist"
        let report = PrefsReport(
            key: "", operation: .read, error: PrefsError.corruptFile(path: path, reason: "not a property list"))
        #expect(report.file == path)
        #expect(report.description.hasPrefix("read of \(path) failed: "))
        #expect(!report.description.contains("\"\""), "no empty key")
    }

    @Test func aConflictingDefaultIsReportedAsADeclarationAndTheFirstDefaultWins() {
        Reports.install()
        let store = InMemoryStore()
        let key = uniqueKey("fontSize")
        let first = StoredValue(key: key, default: 12, store: store)
        let second = StoredValue(key: key, default: 14, store: store)
        let reports = Reports.for(key)
        #expect(reports.count == 1)
        #expect(reports.first?.operation == .declaration)
        let text = reports.first.map(String.init(describing:)) ?? ""
        #expect(text.hasPrefix("declaration of \"\(key)\": "))
        #expect(text.contains("the first declaration's default wins") && !text.contains("disagree"), "\(text)")
        // What the report says: both read the first default while nothing is stored, and agree once it is.
        #expect(first.wrappedValue == 12)
        #expect(second.wrappedValue == 12)
        second.wrappedValue = 20
        #expect(first.wrappedValue == 20)
    }
}

extension ReportTests {
    /// A notice tells of something to act on where nothing failed: it says so, not "read failed".
    @Test func aNoticeIsNotLabelledAFailure() {
        let separate = PrefsReport(
            key: "", operation: .read,
            error: PrefsError.separateStandardDomain(appIdentifier: "com.example.app", foundationDomain: "app"))
        #expect(separate.description.hasPrefix("notice: the standard domain is com.example.app.plist"))
        let real = PrefsReport(
            key: "", operation: .read,
            error: PrefsIsolationWarning(
                path: "/h/.config/T.xctest.plist", what: "the standard domain", insideIsolatedTest: false))
        #expect(
            real.description.hasPrefix("notice about /h/.config/T.xctest.plist: the standard domain is the real file"))
        let failure = PrefsReport(
            key: "", operation: .read, error: PrefsError.corruptFile(path: "/h/a.plist", reason: "x"))
        #expect(failure.description.hasPrefix("read of /h/a.plist failed: "))
    }

    @Test func theRealStandardDomainUsedInsideAnIsolatedTestSaysSoOnce() async throws {
        Reports.install()
        let folder = try TempDir("prefs-reports")
        defer { folder.cleanup() }
        // What `.isolatedPreferences` sets around each test.
        await PrefsConfig.withIsolatedTest(stateFolder: folder.path) {
            _ = SuiteFileStore.standard
            _ = SuiteFileStore.standard
        }
        // Other tests of this process (a test process) may use the standard domain outside the trait: another notice.
        let reports = Reports.everything().filter { ($0.error as? PrefsIsolationWarning)?.insideIsolatedTest == true }
        #expect(reports.count == 1)
        #expect(reports.first?.file?.hasSuffix(".plist") == true)
        #expect(reports.first?.description.hasPrefix("notice about ") == true)
        #expect(reports.first?.description.contains("SuiteFileStore.standard is the real file") == true)
    }
}

/// The gate of a store's background reports (looks at its file, timed commits, reloads of system-wide files): once
/// the store's file is closed nothing more reaches the handler, and closing waits for a report being delivered.
@Suite(.ownThreads) struct BackgroundReportTests {
    @Test func closingWaitsForAReportBeingDeliveredOnAnotherThread() {
        let ledger = ReportLedger()
        let events = Mutex<[String]>([])
        let entered = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let closing = DispatchSemaphore(value: 0)
        let closed = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            ledger.fromBackground {
                entered.signal()
                go.wait()
                events.withLock { $0.append("delivered") }
            }
        }
        #expect(entered.wait(timeout: .now() + 10) == .success, "the report's delivery began")
        Thread.detachNewThread {
            closing.signal()
            ledger.close()
            events.withLock { $0.append("closed") }
            closed.signal()
        }
        #expect(closing.wait(timeout: .now() + 10) == .success, "the closing thread started")
        go.signal()
        #expect(closed.wait(timeout: .now() + 10) == .success, "close() returned")
        #expect(events.withLock { $0 } == ["delivered", "closed"])
    }

    @Test func nothingIsDeliveredOnceClosedAndAHandlerMayCloseItsOwnStore() {
        let ledger = ReportLedger()
        var ran = 0
        ledger.fromBackground {
            ran += 1
            ledger.close()  // on the delivering thread: does not wait for itself
        }
        ledger.fromBackground { ran += 1 }
        #expect(ran == 1)
    }

    @Test func aStoreThatClosedDeliversNoReportOfItsBackgroundWork() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let store = try FileStore(url: folder.file("settings.json"))
        let other = try FileStore(url: folder.file("settings.json"))
        try store.setValue(.int(1), forKey: "a")
        var delivered = 0
        store.close()
        store.hub.feed.reported.fromBackground { delivered += 1 }
        #expect(delivered == 1, "another store still has the file open: its looks still report")
        other.close()
        store.hub.feed.reported.fromBackground { delivered += 1 }
        #expect(delivered == 1, "the file's last store closed: nothing more is reported")
    }
}
