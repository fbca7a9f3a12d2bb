import Foundation
import Prefs
import PrefsTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Commands for LayerProcessTests and StoredValueProcessTests, each through wrappers: what a setting and a secret read
/// when the command line and the environment name them, and what a wrapper reads after a write that failed.
enum WrapperCommands {
    static func run(_ arguments: [String]) -> Bool {
        if arguments.first == "promise-wrapper-write-fails" {
            wrapperWriteFails(spec: arguments[1])
            return true
        }
        guard arguments.first == "promise-vault-layers" else { return false }
        // promise-vault-layers APP [-key value …]: the standard domain and the default vault of APP, with
        // the environment prefix "PROMISE_", each read through a wrapper of the key "authToken".
        PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1], environmentPrefix: "PROMISE_"))
        let setting = StoredValue(key: "authToken", default: "none")
        let secret = SecureStoredValue<String>(key: "authToken")
        emit("setting=\(setting.wrappedValue) layer=\(setting.layer?.rawValue ?? "none")")
        emit(
            "secret=\(secret.wrappedValue ?? "nil") layer=\(PrefsConfig.secureStore.layer(ofKey: "authToken")?.rawValue ?? "none")"
        )
        return true
    }

    /// promise-wrapper-write-fails SPEC: a wrapper stores "kept", then, with RLIMIT_FSIZE lowered to 64 KiB in this
    /// process only (a full disk), assigns a 1 MiB string. Prints what the wrapper and a fresh wrapper read and
    /// the reports of the failed write.
    static func wrapperWriteFails(spec: String) {
        let reports = Mutex<[String]>([])
        PrefsConfig.errorHandler = { report in reports.withLock { $0.append("\(report.operation) \(report.key)") } }
        let store: any KeyValueStore
        do { store = try StoreSpec.open(spec) } catch { fail("open: \(error)") }
        let note = StoredValue(key: "note", default: "", store: store)
        note.wrappedValue = "kept"
        var limits = rlimit()
        guard getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits) == 0 else { fail("getrlimit") }
        let previous = limits
        limits.rlim_cur = rlim_t(64 << 10)
        guard setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limits) == 0 else { fail("setrlimit") }
        note.wrappedValue = String(repeating: "x", count: 1 << 20)  // never throws
        // The disk is "free" again before this process writes anything else, such as a coverage profile at exit.
        var restored = previous
        guard setrlimit(Int32(RLIMIT_FSIZE.rawValue), &restored) == 0 else { fail("setrlimit") }
        emit("wrapper=\(note.wrappedValue)")
        emit("fresh=\(StoredValue(key: "note", default: "", store: store).wrappedValue)")
        for report in reports.withLock({ $0 }) { emit("report: \(report)") }
    }
}
