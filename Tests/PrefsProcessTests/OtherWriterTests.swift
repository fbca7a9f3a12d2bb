import Foundation
import PrefsTestSupport
import Synchronization
import TestThreads
import Testing

@testable import Prefs

/// Another process writing a suite without Prefs' lock: rewriting it in place (as Foundation's `synchronize()` does)
/// never makes the store serve a default, fail or report damage.
@Suite(.serialized, .ownThreads)
struct OtherWriterTests {
    @Test func aSuiteRewrittenInPlaceByAnotherProcessKeepsServingItsValues() async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "shared", directory: directory.url)
        try store.setValue(.int(0), forKey: "theirs")
        let theirs = StoredValue(key: "theirs", default: -1, store: store)
        let stream = theirs.values
        let rounds = 25
        let child = try ChildProcess.start([
            "rewrite-in-place", directory.file("shared.plist").path, "theirs", String(rounds), "15",
        ])
        // Meanwhile this process writes its own key and reads theirs, many times per rewrite.
        var writeErrors: [String] = []
        var readErrors: [String] = []
        var mine = 0
        while child.isRunning {
            mine += 1
            do { try store.setValue(.int(Int64(mine)), forKey: "mine") } catch { writeErrors.append("\(error)") }
            do {
                if try store.value(forKey: "theirs") == nil { readErrors.append("theirs read as absent") }
            } catch { readErrors.append("\(error)") }
        }
        let ended = child.wait()
        #expect(ended.status == 0, "\(ended)")
        #expect(writeErrors.isEmpty, "\(writeErrors.prefix(3))")
        #expect(readErrors.isEmpty, "\(readErrors.prefix(3))")
        // Their last round is read eventually (their last rewrite may have replaced one of ours, or the reverse,
        // since they take no lock: wait for the file to settle, then for the value the file holds).
        let settled =
            try PropertyListSerialization.propertyList(
                from: Data(contentsOf: directory.file("shared.plist")), format: nil) as? [String: Any]
        let last = settled?["theirs"] as? Int ?? -2
        var seen: [Int] = []
        for await value in stream {
            seen.append(value)
            if value == last { break }
        }
        #expect(!seen.contains(-1), "an observer saw the default, a value that was never stored: \(seen)")
        #expect(seen.allSatisfy { (0...rounds).contains($0) })
        #expect(Reports.naming(directory).isEmpty, "\(Reports.naming(directory).prefix(2).map(\.description))")
        #expect(try store.value(forKey: "mine") != nil)
    }

    @Test func foundationSynchronizingTheSameSuiteIsNeverReportedAsDamage() async throws {
        Reports.install()
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "shared", directory: directory.url)
        try store.setValue(.string("kept"), forKey: "ours")
        let counter = StoredValue(key: "count", default: -1, store: store)
        let stream = counter.values
        let result = try ChildProcess.run(
            ["foundation-count", "shared", "count", "200"], environment: ["XDG_CONFIG_HOME": directory.url.path])
        #expect(result.lines == ["done"], "\(result.error)")
        try await waitUntil(stream) { $0 == 200 }
        #expect(try store.value(forKey: "ours") == .string("kept"))
        #expect(Reports.naming(directory).isEmpty, "\(Reports.naming(directory).prefix(2).map(\.description))")
    }
}
