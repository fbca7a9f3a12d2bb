import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

#if canImport(Glibc)
    import Glibc
#endif

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
        try eventually("the watcher to see the folder gone") { try store.value(forKey: "k") == nil }
        let result = try runChild(["set-int", "json:\(path)", "k", "2"])
        #expect(result.lines == ["ok"], "\(result.error)")
        try eventually("the watcher to load the new folder's file") { try store.value(forKey: "k") == .int(2) }
    }
}
