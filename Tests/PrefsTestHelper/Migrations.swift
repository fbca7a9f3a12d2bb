// The child-process side of MigrationProcessTests (Tests/PrefsProcessTests): processes that declare a migrating key
// at the same moment.
import Foundation
import Prefs
import PrefsTestSupport
import Synchronization

enum MigrationCommands {
    /// Runs `arguments` if they name a migration command; returns false otherwise.
    static func run(_ arguments: [String]) -> Bool {
        guard arguments.first == "migrate-on-go" else { return false }
        migrateOnGo(spec: arguments[1])
        return true
    }

    /// migrate-on-go SPEC: prints "ready", waits for a line on standard input, then declares the key `size` with a
    /// migration converting the old key `fontSize` (an `Int`) to a `String`. Prints "converted" each time the
    /// closure runs, then "reports N" with the number of migration reports this process received.
    static func migrateOnGo(spec: String) {
        let reports = Mutex(0)
        PrefsConfig.errorHandler = { report in
            if report.operation == .migration { reports.withLock { $0 += 1 } }
        }
        do {
            let store = try StoreSpec.open(spec)
            emit("ready")
            _ = readLine()
            let key = PrefKey("size", default: "")
                .migrating(
                    .converted(from: "fontSize", as: Int.self) { size in
                        emit("converted")
                        return "\(size)pt"
                    })
            let wrapper = StoredValue(key, store: store)
            let value = wrapper.wrappedValue
            emit("value \(value)")
            emit("reports \(reports.withLock { $0 })")
        } catch {
            fail("migrate-on-go: \(error)")
        }
    }
}
