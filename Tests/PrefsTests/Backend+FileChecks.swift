import Foundation
import PrefsTestSupport
import Testing

@testable import Prefs

extension Backend {
    /// The store of this backend in `directory`, with a first value (`seed`: 1) written so that its file exists.
    func seededStore(in directory: TempDir) throws -> FileBackedStore {
        let store = try #require(try open(in: directory) as? FileBackedStore)
        try store.setValue(.int(1), forKey: "seed")
        return store
    }

    /// What a fresh process reads of `key`, as an integer, from this backend's file in `directory`; a child that
    /// fails records why.
    func intReadByAnotherProcess(_ key: String, in directory: TempDir) throws -> [String] {
        let exit = try ChildProcess.run(["get-int", spec(in: directory), key])
        if exit.status != 0 { Issue.record("get-int \(key) failed: \(exit.description)") }
        return exit.lines
    }
}
