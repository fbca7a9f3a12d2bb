import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// `SuiteFileStore` and Foundation's `UserDefaults` in a child process reading and writing the same suite.
@Suite(.ownThreads)
struct SuiteFileStoreProcessTests {
    @Test func foundationReadsWhatPrefsWrites() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "group.interop", directory: directory.url)
        try store.set(true, for: PrefKey("flag", default: false))
        try store.set(URL(string: "https://example.com/a?b=c")!, for: PrefKey("url", default: URL(string: "x:")!))
        try store.set(Theme.dark, for: PrefKey("theme", default: Theme.light))
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let flag = try ChildProcess.run(["foundation-read", "group.interop", "flag"], environment: environment)
        #expect(flag.lines == ["Bool true"])
        let url = try ChildProcess.run(["foundation-read", "group.interop", "url"], environment: environment)
        #expect(url.lines == ["String https://example.com/a?b=c"])
        let theme = try ChildProcess.run(["foundation-read", "group.interop", "theme"], environment: environment)
        #expect(theme.lines == ["String dark"])
        // Non-ASCII text is written as UTF-16, counts of 15 and more with an extended length, big integers wide.
        let text = "héllo wörld, 👋🏽 中文"
        try store.set(text, for: PrefKey("text", default: ""))
        try store.set(Array(0..<20), for: PrefKey("list", default: [Int]()))
        try store.set(70_000, for: PrefKey("number", default: 0))
        let read = try ChildProcess.run(["foundation-read", "group.interop", "text"], environment: environment)
        #expect(read.lines == ["String \(text)"])
        let number = try ChildProcess.run(["foundation-read", "group.interop", "number"], environment: environment)
        #expect(number.lines.first?.hasSuffix(" 70000") == true, "\(number.lines)")
        let list = try ChildProcess.run(["foundation-read", "group.interop", "list"], environment: environment)
        // All 20 elements, the last one 19.
        #expect(list.lines.first.map { $0.hasSuffix("19]") || $0.hasSuffix("19)]") } == true, "\(list.lines)")
    }

    /// An app that keeps its `UserDefaults` open sees each Prefs write at its next `synchronize()`, however soon
    /// after its last read (a committed suite's modification time is set back, and Foundation's `synchronize()`
    /// reads the file whatever its time).
    @Test func foundationKeptOpenSeesEachPrefsWriteAtItsNextSynchronize() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "group.interop", directory: directory.url)
        try store.setValue(.int(1), forKey: "count")
        let foundation = try ChildProcess.start(
            ["foundation-watch", "group.interop", "count"], environment: ["XDG_CONFIG_HOME": directory.url.path],
            input: .pipe)
        defer { foundation.kill() }
        #expect(foundation.readLine() == "1")
        for value in 2...4 {
            try store.setValue(.int(Int64(value)), forKey: "count")
            foundation.write("\n")
            #expect(foundation.readLine() == String(value))
        }
        foundation.closeInput()
        #expect(foundation.wait().succeeded)
    }

    @Test func prefsReadsWhatFoundationWrites() async throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let store = try SuiteFileStore(suiteName: "group.interop", directory: directory.url)
        let count = StoredValue(key: "count", default: 0, store: store)
        let stream = count.values
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let result = try ChildProcess.run(
            ["foundation-write", "group.interop", "count", "7"], environment: environment)
        #expect(result.lines == ["ok"])
        try await waitUntil(stream) { $0 == 7 }
    }

    @Test func theStandardStoreIsFoundationsStandardDomain() throws {
        let directory = try TempDir()
        defer { directory.cleanup() }
        let environment = ["XDG_CONFIG_HOME": directory.url.path]
        let written = try ChildProcess.run(["standard-set", "launches", "3"], environment: environment)
        #expect(written.lines == ["ok"])
        #expect(FileManager.default.fileExists(atPath: directory.file("PrefsTestHelper.plist").path))
        let read = try ChildProcess.run(["standard-get", "launches"], environment: environment)
        #expect(read.lines == ["3"], "\(read.error)")
    }
}
