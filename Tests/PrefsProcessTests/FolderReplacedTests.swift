import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
private func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}

/// A store whose folder is moved away and replaced follows the folder's path, not the moved folder.
@Suite(.ownThreads) struct FolderReplacedTests {
    @Test func aWatcherFollowsTheFolderPathAfterTheFolderIsReplaced() throws {
        let root = try TempDir()
        defer { root.cleanup() }
        let folder = root.file("prefs")
        let path = folder.appending(path: "store.json").path(percentEncoded: false)
        let store = try FileStore(url: URL(filePath: path))
        try store.setValue(.int(1), forKey: "k")
        #expect(rename(folder.path(percentEncoded: false), root.file("prefs.old").path(percentEncoded: false)) == 0)
        #expect(mkdir(folder.path(percentEncoded: false), 0o700) == 0)
        // The store now reads the (missing) file at its path, not the moved one.
        #expect(try eventually { try store.value(forKey: "k") == nil })
        let result = try runChild(["set-int", "json:\(path)", "k", "2"])
        #expect(result.lines == ["ok"], "\(result.error)")
        #expect(try eventually { try store.value(forKey: "k") == .int(2) })
    }
}
