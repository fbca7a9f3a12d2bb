import EngineTestSupport
// The child-process side of EngineProcessTests (Tests/PrefsProcessTests): a writer stopped inside its commit, and
// writers that stay open beside Foundation's UserDefaults.
import Foundation
import Prefs
import PrefsTestSupport

#if canImport(Glibc)
    import Glibc
#endif

enum EngineCommands {
    /// Runs `arguments` if they name one of these commands; returns false otherwise.
    static func run(_ arguments: [String]) -> Bool {
        switch arguments.first {
        case "stop-in-commit":
            stopInCommit(spec: arguments[1], key: arguments[2], value: Int64(arguments[3])!)
        case "append-and-stay":
            appendAndStay(spec: arguments[1], key: arguments[2], count: Int(arguments[3])!, tag: arguments[4])
        default: return false
        }
        return true
    }

    /// stop-in-commit SPEC KEY INT: sets KEY to INT through a store that stops this process (SIGSTOP, as Ctrl-Z or
    /// a debugger does) inside its commit, holding the file's lock, just before the rename. Prints "stopping" first
    /// and, once continued, "done".
    static func stopInCommit(spec: String, key: String, value: Int64) {
        let fileSystem = SteppingFileSystem()
        fileSystem.run(at: .beforeRename) {
            emit("stopping")
            raise(SIGSTOP)
        }
        do {
            let store = try StoreSpec.open(spec, fileSystem: fileSystem, clock: .system)
            try store.setValue(.int(value), forKey: key)
        } catch {
            fail("set: \(error)")
        }
        emit("done")
    }

    /// append-and-stay SPEC KEY COUNT TAG: appends "TAG-0" … "TAG-(COUNT-1)" to the array at KEY through
    /// `updateValue`, prints "appended", and keeps the store open (so it keeps seeing the file, and restoring what a
    /// stale rewrite puts back) until standard input closes; then prints "closed".
    static func appendAndStay(spec: String, key: String, count: Int, tag: String) {
        do {
            let store = try StoreSpec.open(spec)
            for index in 0..<count {
                try store.updateValue(forKey: key) { old in
                    guard case .array(let items)? = old else { return .array([.string("\(tag)-\(index)")]) }
                    return .array(items + [.string("\(tag)-\(index)")])
                }
            }
            emit("appended")
            _ = FileHandle.standardInput.readDataToEndOfFile()
            (store as? FileBackedStore)?.close()
            emit("closed")
        } catch {
            fail("append: \(error)")
        }
    }
}
