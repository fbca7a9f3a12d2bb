import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// `PrefsConfig.appIdentifier` moves Prefs' standard domain away from the file `UserDefaults.standard` keeps.
@Suite(.ownThreads)
struct SeparateStandardDomainTests {
    @Test func aMovedStandardDomainIsReportedOnceAndOldValuesMoveOver() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        // Old code: Foundation's standard domain, the process's own name.
        #expect(try ChildProcess.run(["standard-set", "volume", "7"], environment: environment).lines == ["ok"])
        let moved = try ChildProcess.run(["standard-moved", "com.example.moved", "volume"], environment: environment)
        #expect(moved.status == 0, "\(moved.error)")
        let reports = moved.lines.filter { $0.hasPrefix("report: ") }
        #expect(reports.count == 1, "\(moved.lines)")
        #expect(reports.first?.contains("PrefsTestHelper.plist") == true)
        #expect(reports.first?.contains("UserDefaults(suiteName: \"com.example.moved\")") == true)
        #expect(moved.lines.filter { !$0.hasPrefix("report: ") } == ["before 0", "copied [\"volume\"]", "after 7"])
        // The next launch: the value is in the new domain, and nothing is copied over it again.
        let again = try ChildProcess.run(["standard-moved", "com.example.moved", "volume"], environment: environment)
        #expect(again.lines.filter { !$0.hasPrefix("report: ") } == ["before 7", "copied []", "after 7"])
    }

    @Test func noReportWithoutAnOldDomainOrWithTheSameName() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let fresh = try ChildProcess.run(["standard-moved", "com.example.fresh", "volume"], environment: environment)
        #expect(fresh.lines.filter { $0.hasPrefix("report: ") }.isEmpty, "\(fresh.lines)")
        #expect(try ChildProcess.run(["standard-set", "volume", "7"], environment: environment).lines == ["ok"])
        let same = try ChildProcess.run(["standard-moved", "PrefsTestHelper", "volume"], environment: environment)
        #expect(same.lines.filter { $0.hasPrefix("report: ") }.isEmpty, "\(same.lines)")
        #expect(same.lines.first == "before 7", "one domain: Prefs reads what UserDefaults.standard wrote")
    }
}
