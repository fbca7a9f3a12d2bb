// A child process for the PostgresStore cross-process tests. The connection string comes from the environment
// variable PREFS_PG_CONNECTION; each command prints its results line by line on standard output. PREFS_PG_WRITE_DEADLINE
// (seconds), when set, replaces the store's default write deadline.
import Foundation
import Prefs
import PrefsPostgres

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(1)
}

/// The case name of a typed error (`connectionLost`), or `untyped` for anything else.
func caseName(_ error: any Error) -> String {
    if let error = error as? PostgresStoreError { return String(describing: error).isEmpty ? "?" : label(error) }
    if error is PrefsError { return "prefsError" }
    return "untyped"
}

func label(_ error: PostgresStoreError) -> String {
    switch error {
    case .connectionLost: "connectionLost"
    case .unreachable: "unreachable"
    case .authenticationFailed: "authenticationFailed"
    case .connectionRefused: "connectionRefused"
    case .serverError: "serverError"
    case .closed: "closed"
    case .invalidConnectionString: "invalidConnectionString"
    case .invalidNamespace: "invalidNamespace"
    case .invalidSchema: "invalidSchema"
    case .unsupportedSchemaVersion: "unsupportedSchemaVersion"
    case .timedOut: "timedOut"
    case .outcomeUnknown: "outcomeUnknown"
    case .damagedSchema: "damagedSchema"
    }
}

/// Nanoseconds on the monotonic clock, which every process of the machine shares.
func monotonicNanos() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2, let connection = ProcessInfo.processInfo.environment["PREFS_PG_CONNECTION"] else {
    fail("usage: PREFS_PG_CONNECTION=… PrefsPostgresTestHelper COMMAND NAMESPACE [ARGS…]")
}
let command = arguments[0]
if command == "open-report" {
    // open-report NAMESPACE: prints each reported error, then the namespace's values as JSON.
    PrefsConfig.errorHandler = { report in emit("report \(report.key): \(report.error)") }
    do {
        let store = try PostgresStore(connection: connection, namespace: arguments[1])
        emit("values " + (try PrefValue.dictionary(store.allValues()).jsonText()))
        store.close()
    } catch {
        fail("open: \(error)")
    }
    exit(0)
}
if command == "fleet" {
    // fleet NAMESPACE COUNT FIRST POLL_MS: opens COUNT stores (instances FIRST, FIRST + 1, …), each on a client
    // connection of its own (a connection string of its own, made distinct by a `fallback_application_name`, which
    // libpq does not send when `application_name` is set: a pooler hands every instance's transactions the same
    // server settings), reading changes with .poll(every: POLL_MS ms). Prints
    // "ready", then "seen INSTANCE KEY VALUE NANOS" each time a store announces a key (NANOS on the monotonic clock,
    // which every process shares). Reads commands from standard input: "set INSTANCE KEY VALUE" writes through
    // that instance, retrying while the server or pooler is away, and prints "set KEY STARTNANOS" once it returned;
    // "quit" closes the stores and ends.
    let count = Int(arguments[2])!
    let first = Int(arguments[3])!
    let interval = Duration.milliseconds(Int(arguments[4])!)
    let separator = connection.contains("?") ? "&" : "?"
    var stores: [Int: PostgresStore] = [:]
    var watchers: [Task<Void, Never>] = []
    for instance in first..<(first + count) {
        let store: PostgresStore
        do {
            store = try PostgresStore(
                connection: connection + separator + "fallback_application_name=prefs-fleet-\(instance)",
                namespace: arguments[1],
                changeSource: .poll(every: interval))
        } catch {
            fail("open \(instance): \(error)")
        }
        stores[instance] = store
        let keys = store.changedKeys()
        watchers.append(
            Task.detached {
                for await key in keys {
                    let value = (try? store.value(forKey: key)).flatMap { $0 }.map { "\($0)" } ?? "nil"
                    emit("seen \(instance) \(key) \(value) \(monotonicNanos())")
                }
            })
    }
    emit("ready")
    while let line = readLine() {
        let words = line.split(separator: " ").map(String.init)
        if words.first == "quit" { break }
        guard words.count == 4, words[0] == "set", let store = stores[Int(words[1])!] else {
            fail("bad command \(line)")
        }
        let start = monotonicNanos()
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                try store.setValue(.int(Int64(words[3])!), forKey: words[2])
                break
            } catch {
                guard ContinuousClock.now < deadline else { fail("set \(words[2]): \(error)") }
                usleep(20_000)  // the server or pooler is restarting: try again shortly
            }
        }
        emit("set \(words[2]) \(start)")
    }
    for watcher in watchers { watcher.cancel() }
    for store in stores.values { store.close() }
    exit(0)
}

var limits = PostgresStore.Limits()
if let seconds = ProcessInfo.processInfo.environment["PREFS_PG_WRITE_DEADLINE"].flatMap(Int.init) {
    limits.writeDeadline = .seconds(seconds)
}
if let bytes = ProcessInfo.processInfo.environment["PREFS_PG_LARGEST_VALUE"].flatMap(Int.init) {
    limits.largestValue = bytes
}
let store: PostgresStore
do { store = try PostgresStore(connection: connection, namespace: arguments[1], limits: limits) } catch {
    fail("open: \(error)")
}

do {
    switch command {
    case "append":
        // append KEY COUNT TAG: COUNT appends of "TAG-i" through a wrapper (each one an updateValue).
        PrefsConfig.errorHandler = { report in fail("reported: \(report)") }
        let tags = StoredValue(key: arguments[2], default: [String](), store: store)
        for index in 0..<Int(arguments[3])! { tags.append("\(arguments[4])-\(index)") }
        emit("ok")
    case "set-int":
        try store.set(Int(arguments[3])!, for: PrefKey(arguments[2], default: 0))
        emit("ok")
    case "count-up":
        // count-up KEY: sets 1, 2, 3, … forever. Prints `N` once set(N) has returned, `error CASE` for each failed
        // attempt (then retries the same N).
        var value = 1
        while true {
            do {
                try store.set(value, for: PrefKey(arguments[2], default: 0))
                emit(String(value))
                value += 1
            } catch {
                emit("error \(caseName(error))")
                usleep(10_000)
            }
        }
    case "distinct-keys":
        // distinct-keys: writes key w-N = N for N = 1, 2, 3, … forever, each key once, with set for odd N and with
        // updateValue (a transform in a transaction) for even N. Prints `ack N` once the write returned, `not N`
        // when the error says nothing was written, `unknown N REASON` when it says the outcome is unknown (then
        // goes on with N + 1).
        var value = 1
        while true {
            do {
                if value.isMultiple(of: 2) {
                    try store.updateValue(forKey: "w-\(value)") { [value] _ in .int(Int64(value)) }
                } else {
                    try store.set(value, for: PrefKey("w-\(value)", default: 0))
                }
                emit("ack \(value)")
            } catch PostgresStoreError.outcomeUnknown(let reason) {
                emit("unknown \(value) \(reason.split(whereSeparator: \.isNewline).joined(separator: " "))")
            } catch {
                emit("not \(value) \(caseName(error))")
                usleep(5_000)
            }
            value += 1
        }
    case "listen-report":
        // listen-report MARKER: prints each reported error and "ready", waits until the key `marker` reads MARKER,
        // then prints the namespace's values as JSON.
        PrefsConfig.errorHandler = { report in emit("report \(report.key): \(report.error)") }
        let marker = StoredValue(key: "marker", default: 0, store: store)
        emit("ready")
        for await current in marker.values where current == Int(arguments[2])! { break }
        emit("values " + (try PrefValue.dictionary(store.allValues()).jsonText()))
    case "watch":
        // watch KEY: prints "ready", then the key's value now and after each change.
        let value = StoredValue(key: arguments[2], default: 0, store: store)
        emit("ready")
        for await current in value.values { emit(String(current)) }
    default:
        fail("unknown command \(command)")
    }
} catch {
    fail("\(command): \(error)")
}
