// A child process for the cross-process and crash tests. Each command opens a store from a spec and prints
// results line by line on standard output, flushing after each line.
import Foundation
import Prefs
import PrefsTestSupport

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
// PREFS_TEST_LOCK_TIMEOUT_MS: how long this child's writes wait for a lock held elsewhere (0: not at all).
if let limit = ProcessInfo.processInfo.environment["PREFS_TEST_LOCK_TIMEOUT_MS"].flatMap({ Int($0) }) {
    PrefsConfig.lockTimeout = .milliseconds(limit)
}
if await ReliabilityCommands.run(arguments) { exit(0) }
if DefaultStoreCommands.run(arguments) { exit(0) }
if await LayerCommands.run(arguments) { exit(0) }
if CompatibilityCommands.run(arguments) { exit(0) }
if OpenAndAppendCommands.run(arguments) { exit(0) }
if WrapperCommands.run(arguments) { exit(0) }
if DeferredCommands.run(arguments) { exit(0) }
if MigrationCommands.run(arguments) { exit(0) }
if EngineCommands.run(arguments) { exit(0) }
if CredentialCommands.run(arguments) { exit(0) }
if SchemaAppCommands.run(arguments) { exit(0) }
if SchemaCostCommand.run(arguments) { exit(0) }
if await NewcomerAppCommands.run(arguments) { exit(0) }
if arguments.first == "foundation-read" {
    // foundation-read SUITE KEY: what Foundation's own UserDefaults reads from the suite file.
    let defaults = UserDefaults(suiteName: arguments[1])!
    let value = defaults.object(forKey: arguments[2])
    emit(value.map { "\(type(of: $0)) \($0)" } ?? "nil")
    exit(0)
}
if arguments.first == "foundation-write" {
    // foundation-write SUITE KEY INT: writes an integer through Foundation's UserDefaults and synchronises.
    let defaults = UserDefaults(suiteName: arguments[1])!
    defaults.set(Int(arguments[3])!, forKey: arguments[2])
    defaults.synchronize()
    emit("ok")
    exit(0)
}
if arguments.first == "instance-read" {
    // instance-read SUITE KEY: the value a UserDefaultsBridgeStore over the suite reads, with its kind.
    let store = UserDefaultsBridgeStore(UserDefaults(suiteName: arguments[1])!)
    do {
        emit(try store.value(forKey: arguments[2]).map { "\($0.typeName) \($0)" } ?? "nil")
    } catch {
        fail("\(error)")
    }
    exit(0)
}
if arguments.first == "standard-moved" {
    // standard-moved APP KEY: the standard domain under another app identifier: its reports, then the value of KEY
    // before and after importing the domain UserDefaults.standard uses.
    PrefsConfig.errorHandler = { report in emit("report: \(report.error)") }
    PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1]))
    let key = PrefKey(arguments[2], default: 0)
    do {
        emit("before \(try SuiteFileStore.standard.value(for: key))")
        let old = try SuiteFileStore(suiteName: ProcessInfo.processInfo.processName)
        emit("copied \(try SuiteFileStore.standard.importValues(from: old))")
        emit("after \(try SuiteFileStore.standard.value(for: key))")
    } catch {
        fail("\(error)")
    }
    exit(0)
}
if arguments.first == "standard-set" || arguments.first == "standard-get" {
    // standard-set KEY INT / standard-get KEY: the process's standard domain, through Prefs or Foundation.
    let key = PrefKey(arguments[1], default: 0)
    do {
        if arguments[0] == "standard-set" {
            UserDefaults.standard.set(Int(arguments[2])!, forKey: arguments[1])
            UserDefaults.standard.synchronize()
            emit("ok")
        } else {
            emit(String(try SuiteFileStore.standard.value(for: key)))
        }
    } catch {
        fail("\(error)")
    }
    exit(0)
}
if arguments.first == "default-secure-set" {
    // default-secure-set KEY VALUE: stores a secret in the default vault (located through XDG variables).
    PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.helper"))
    let secret = SecureStoredValue<String>(key: arguments[1])
    do { try secret.set(arguments[2]) } catch { fail("set: \(error)") }
    emit(SecureStoredValue<String>(key: arguments[1]).wrappedValue ?? "nil")
    exit(0)
}
if arguments.first == "default-secure-get" {
    // default-secure-get KEY: reads a secret from the default vault, as a wrapper declared without `store:` does.
    PrefsConfig.configure(PrefsConfiguration(appIdentifier: "com.example.helper"))
    emit(SecureStoredValue<String>(key: arguments[1]).wrappedValue ?? "nil")
    exit(0)
}
if arguments.first == "write-hostile-files" {
    // write-hostile-files FOLDER: the shared-reference and deep-array files, for the fuzz corpus.
    do { try HostileFiles.write(into: URL(filePath: arguments[1])) } catch { fail("write: \(error)") }
    emit("ok")
    exit(0)
}
guard arguments.count >= 2 else { fail("usage: PrefsTestHelper COMMAND SPEC [ARGS…]") }
let command = arguments[0]
let store: any KeyValueStore
do { store = try StoreSpec.open(arguments[1]) } catch { fail("open: \(error)") }

do {
    switch command {
    case "write-fixtures":
        try Fixtures.write(to: store)
        emit("ok")
    case "verify-fixtures":
        let mismatches = Fixtures.mismatches(in: store)
        emit(mismatches.isEmpty ? "ok" : "mismatch " + mismatches.joined(separator: ","))
    case "set-string":
        try store.set(arguments[3], for: PrefKey(arguments[2], default: ""))
        emit("ok")
    case "fill":
        // fill SPEC COUNT: one replaceAll of COUNT keys, key0 = 0 … (an import of a large domain).
        let count = Int(arguments[2])!
        try store.replaceAll(Dictionary(uniqueKeysWithValues: (0..<count).map { ("key\($0)", .int(Int64($0))) }))
        emit("ok")
    case "set-int":
        try store.set(Int(arguments[3])!, for: PrefKey(arguments[2], default: 0))
        emit("ok")
    case "get-int":
        emit(String(try store.value(for: PrefKey(arguments[2], default: 0))))
    case "append":
        // append KEY COUNT TAG: COUNT atomic appends of "TAG-i" through a wrapper.
        let tags = StoredValue(key: arguments[2], default: [String](), store: store)
        for index in 0..<Int(arguments[3])! { tags.append("\(arguments[4])-\(index)") }
        emit("ok")
    case "count-up":
        // count-up KEY: sets 1, 2, 3, … forever, printing each value once its set has returned.
        var value = 0
        while true {
            value += 1
            try store.set(value, for: PrefKey(arguments[2], default: 0))
            emit(String(value))
        }
    case "watch":
        // watch KEY COUNT: prints the key's value for the current value and the next COUNT-1 changes.
        let value = StoredValue(key: arguments[2], default: 0, store: store)
        emit("ready")
        var seen = 0
        for await current in value.values {
            emit(String(current))
            seen += 1
            if seen == Int(arguments[3])! { break }
        }
    default:
        fail("unknown command \(command)")
    }
} catch {
    fail("\(command): \(error)")
}
// Stop watching the file before exiting, so no reload thread is at work while the process ends (under
// AddressSanitizer, LeakSanitizer examines every thread at exit, and a helper exiting mid-reload failed once).
(store as? FileBackedStore)?.close()
