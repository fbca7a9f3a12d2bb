import EngineTestSupport
// The child-process side of the reliability suite (Tests/PrefsReliabilityTests): crash loops, multi-process
// load, hostile files, resource limits and memory measurements, each in its own process so a crash or a lowered
// limit cannot touch the test runner.
import Foundation
import Prefs
import PrefsTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum ReliabilityCommands {
    /// Runs `arguments` if they name a reliability command; returns false otherwise.
    static func run(_ arguments: [String]) async -> Bool {
        do {
            switch arguments.first {
            case "count-on": try countOn(spec: arguments[1], key: arguments[2])
            case "rmw": try readModifyWrite(tag: arguments[1], count: Int(arguments[2])!, specs: Array(arguments[3...]))
            case "fuzz-open":
                try fuzzOpen(
                    kind: arguments[1], directory: arguments[2], seed: UInt64(arguments[3])!,
                    count: Int(arguments[4])!)
            case "fsize":
                try fileSizeLimit(
                    spec: arguments[1], key: arguments[2], bytes: Int(arguments[3])!, limit: Int(arguments[4])!)
            case "full-disk-reports": try fullDiskReports(spec: arguments[1], keys: Int(arguments[2])!)
            case "umask-write":
                try umaskWrite(spec: arguments[1], mask: mode_t(arguments[2], radix: 8)!, key: arguments[3])
            case "deep": try deepValues(spec: arguments[1], depths: arguments[2].split(separator: ",").map { Int($0)! })
            case "leak-loop": try await leakLoop(spec: arguments[1], rounds: Int(arguments[2])!)
            default: return false
            }
        } catch {
            fail("\(arguments[0]): \(type(of: error)) \(error)")
        }
        return true
    }

    // MARK: Crash safety

    /// count-on SPEC KEY: prints "start N" with the stored value, then stores N+1, N+2, … forever, printing each
    /// value once its `set` has returned (an acknowledged write).
    static func countOn(spec: String, key name: String) throws {
        let store = try StoreSpec.open(spec)
        let key = PrefKey(name, default: 0)
        var value = try store.value(for: key)
        emit("start \(value)")
        while true {
            value += 1
            try store.set(value, for: key)
            emit(String(value))
        }
    }

    // MARK: Multi-process load

    /// rmw TAG COUNT SPEC…: COUNT read-modify-write updates on every store, round-robin: `append("TAG-i")` to
    /// "list" when i % 3 == 0, `update(key: "TAG-i", value: i)` on "map" when i % 3 == 1, and `toggle()` of
    /// "flag-TAG" otherwise. Any reported error fails the process.
    static func readModifyWrite(tag: String, count: Int, specs: [String]) throws {
        PrefsConfig.errorHandler = { report in fail("reported: \(report)") }
        let stores = try specs.map { try StoreSpec.open($0) }
        for index in 0..<count {
            for (spec, store) in zip(specs, stores) {
                if spec.hasPrefix("vault:") {
                    switch index % 3 {
                    case 0: try SecureStoredValue<[String]>(key: "list", store: store).append("\(tag)-\(index)")
                    case 1:
                        try SecureStoredValue<[String: Int]>(key: "map", store: store)
                            .update(key: "\(tag)-\(index)", value: index)
                    default: try SecureStoredValue<Bool>(key: "flag-\(tag)", store: store).toggle()
                    }
                } else {
                    switch index % 3 {
                    case 0: StoredValue(key: "list", default: [String](), store: store).append("\(tag)-\(index)")
                    case 1:
                        StoredValue(key: "map", default: [String: Int](), store: store)
                            .update(key: "\(tag)-\(index)", value: index)
                    default: StoredValue(key: "flag-\(tag)", default: false, store: store).toggle()
                    }
                }
            }
        }
        emit("ok")
    }

    // MARK: Hostile files

    /// fuzz-open KIND DIR SEED COUNT: opens COUNT mutated files with the store of KIND (json, plist or vault).
    /// Every case must open or throw a `PrefsError`/`VaultError`, and leave the file byte-for-byte as it was.
    /// Prints "cases N opened A refused R" at the end; anything else exits non-zero (a crash, by its signal).
    static func fuzzOpen(kind: String, directory: String, seed: UInt64, count: Int) throws {
        PrefsConfig.errorHandler = { _ in }
        let spec: String
        let path: String
        switch kind {
        case "json":
            path = directory + "/fuzz.json"
            spec = "json:" + path
        case "plist":
            path = directory + "/fuzz.plist"
            spec = "plist:\(directory):fuzz"
        case "vault":
            path = directory + "/fuzz.vault"
            spec = "vault:\(path):\(directory)/fuzz.key"
        default: fail("unknown kind \(kind)")
        }
        let seeds = try fuzzSeeds(kind: kind, spec: spec, path: path)
        var random = SplitMix64(seed: seed)
        var opened = 0
        var refused = 0
        func openCase(_ index: Int) throws {
            let base = seeds[Int(random.next() % UInt64(seeds.count))]
            let bytes = Mutator.mutate(base, kind: kind, random: &random)
            guard FileManager.default.createFile(atPath: path, contents: bytes) else { fail("cannot write case") }
            do {
                let store = try StoreSpec.open(spec, fileSystem: POSIXFileSystem(), clock: .movingWhenPaused())
                let values = try store.allValues()
                for key in values.keys { _ = try store.value(forKey: key) }
                opened += 1
            } catch is PrefsError {
                refused += 1
            } catch is VaultError {
                refused += 1
            } catch {
                fail("case \(index) (seed \(seed)): untyped error \(type(of: error)) \(error)")
            }
            guard FileManager.default.contents(atPath: path) == bytes else {
                fail("case \(index) (seed \(seed)): the file changed on open")
            }
        }
        // A refused suite is first given 200 ms of quiet, in case another writer is rewriting it in place. Nobody
        // is here, so the engine waits on a clock that moves only when it pauses: the outcome is the same, without
        // 200 ms of real time per case.
        for index in 0..<count { try openCase(index) }
        emit("cases \(count) opened \(opened) refused \(refused)")
    }

    /// Valid files of every shape the opener accepts, to mutate from.
    static func fuzzSeeds(kind: String, spec: String, path: String) throws -> [Data] {
        var seeds: [Data] = []
        func snapshot(_ write: (any KeyValueStore) throws -> Void) throws {
            try? FileManager.default.removeItem(atPath: path)
            try write(try StoreSpec.open(spec))
            guard let data = FileManager.default.contents(atPath: path) else { fail("no seed file written") }
            seeds.append(data)
        }
        try snapshot { try Fixtures.write(to: $0) }
        try snapshot { try $0.setValue(.string("x"), forKey: "a") }
        try snapshot { store in
            try store.setValue(
                .array((0..<40).map { .dictionary(["n": .int($0), "s": .string("\($0)")]) }), forKey: "l")
        }
        if kind == "plist" {
            // Foundation's binary and XML encodings, which the reader accepts too.
            let object: [String: Any] = ["a": 1, "b": [true, 2.5, "x"], "c": ["d": Data([1, 2])], "e": Date()]
            for format in [PropertyListSerialization.PropertyListFormat.binary, .xml] {
                seeds.append(try PropertyListSerialization.data(fromPropertyList: object, format: format, options: 0))
            }
        }
        return seeds
    }

    // MARK: Bad input

    /// fsize SPEC KEY BYTES LIMIT: lowers RLIMIT_FSIZE to LIMIT bytes in this process only, then tries to store a
    /// BYTES-long string under KEY. Prints "refused <operation> <errno>" or "stored", then "kept N" with the number
    /// of values still readable, then "small ok" once a small write has succeeded under the same limit, then "SIGXFSZ
    /// untouched" when the process still has the signal's default action and none is pending.
    static func fileSizeLimit(spec: String, key: String, bytes: Int, limit: Int) throws {
        let store = try StoreSpec.open(spec)
        try withFileSizeLimit(limit) {
            do {
                try store.set(String(repeating: "x", count: bytes), for: PrefKey(key, default: ""))
                emit("stored")
            } catch PrefsError.io(_, let operation, let code, _) {
                emit("refused \(operation) \(code)")
            } catch VaultError.io(_, let operation, let code, _) {
                emit("refused \(operation) \(code)")
            }
            emit("kept \(try store.allValues().count)")
            try store.set("small", for: PrefKey(key + "-small", default: ""))
            emit("small ok")
        }
        // The library held SIGXFSZ back only for its writes: the process's handling of it is untouched, and the
        // signal the refused write raised is not left pending.
        var pending = sigset_t()
        sigpending(&pending)
        let previous = signal(SIGXFSZ, SIG_DFL)
        emit(previous == nil && sigismember(&pending, SIGXFSZ) == 0 ? "SIGXFSZ untouched" : "SIGXFSZ changed")
    }

    /// full-disk-reports SPEC N: sets N wrappers to 1, then lowers RLIMIT_FSIZE below the file's size (every write
    /// of the file fails with EFBIG, as on a full disk) and sets each wrapper to 1 again (no change) and then to 2.
    /// Prints "reports R": how many write failures reached the error handler.
    static func fullDiskReports(spec: String, keys: Int) throws {
        let store = try StoreSpec.open(spec)
        let reports = Mutex(0)
        PrefsConfig.errorHandler = { report in
            if report.operation == .write { reports.withLock { $0 += 1 } }
        }
        let wrappers = (0..<keys).map { StoredValue(key: "setting\($0)", default: 0, store: store) }
        for wrapper in wrappers { wrapper.set(1) }
        withFileSizeLimit(16) {
            for wrapper in wrappers {
                wrapper.set(1)
                wrapper.set(2)
            }
        }
        emit("reports \(reports.withLock { $0 })")
    }

    /// Runs `body` with RLIMIT_FSIZE lowered to `limit` bytes in this process only: a write past it fails with
    /// EFBIG, as on a full disk. The limit is lifted again before returning, so a coverage profile written at exit
    /// is complete.
    static func withFileSizeLimit<T>(_ limit: Int, _ body: () throws -> T) rethrows -> T {
        #if os(Linux)
            let resource = Int32(RLIMIT_FSIZE.rawValue)
        #else
            let resource = RLIMIT_FSIZE
        #endif
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { fail("getrlimit") }
        var previous = limits
        limits.rlim_cur = rlim_t(limit)
        guard setrlimit(resource, &limits) == 0 else { fail("setrlimit") }
        defer { setrlimit(resource, &previous) }
        return try body()
    }

    /// umask-write SPEC MASK KEY: sets the process umask to MASK (octal), then stores a value under KEY.
    static func umaskWrite(spec: String, mask: mode_t, key: String) throws {
        umask(mask)
        try StoreSpec.open(spec).set(1, for: PrefKey(key, default: 0))
        emit("ok")
    }

    /// deep SPEC D1,D2,…: stores, under "deep-D", an integer wrapped in D nested arrays, for each depth in the
    /// list, printing "D stored" or "D refused <error>". The values are built and kept here, so this process (not
    /// the library) owns their teardown.
    static func deepValues(spec: String, depths: [Int]) throws {
        let store = try StoreSpec.open(spec)
        var kept: [PrefValue] = []
        for depth in depths {
            var value = PrefValue.int(1)
            for _ in 0..<depth { value = .array([value]) }
            kept.append(value)
            do {
                try store.setValue(value, forKey: "deep-\(depth)")
                emit("\(depth) stored")
            } catch let error as PrefsError {
                emit("\(depth) refused \(error)")
            }
        }
        // Arrays nested this deep would overflow the stack if released recursively; the process ends instead.
        exit(withExtendedLifetime(kept) { 0 })
    }

    // MARK: Leaks

    /// leak-loop SPEC ROUNDS: opens the store, subscribes and cancels, writes and closes, ROUNDS times after a
    /// warm-up, and prints "rss BEFORE AFTER" in KiB.
    static func leakLoop(spec: String, rounds: Int) async throws {
        func round(_ index: Int) async throws {
            let store = try StoreSpec.open(spec)
            let value = StoredValue(key: "n", default: 0, store: store)
            // A subscriber that is cancelled while waiting, and one that is simply dropped.
            let (started, signal) = AsyncStream.makeStream(of: Void.self)
            let watcher = Task {
                for await _ in value.values { signal.yield() }
            }
            var waiting = started.makeAsyncIterator()
            _ = await waiting.next()
            watcher.cancel()
            _ = await watcher.value
            var dropped = value.values.makeAsyncIterator()
            _ = await dropped.next()
            try store.set(index, for: PrefKey("n", default: 0))
            _ = value.wrappedValue
        }
        for index in 0..<max(50, rounds / 10) { try await round(index) }
        let before = residentKiB()
        for index in 0..<rounds { try await round(index) }
        emit("rss \(before) \(residentKiB())")
    }

    static func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
        }
        return 0
    }
}

/// Damages files the way disks, tools and attackers do.
enum Mutator {
    static func mutate(_ original: Data, kind: String, random: inout SplitMix64) -> Data {
        var bytes = [UInt8](original)
        let steps = random.next() % 4 == 0 ? Int.random(in: 2...4, using: &random) : 1
        for _ in 0..<steps { apply(&bytes, kind: kind, random: &random) }
        return Data(bytes)
    }

    static func apply(_ bytes: inout [UInt8], kind: String, random: inout SplitMix64) {
        func position(_ extra: Int = 0) -> Int { Int.random(in: 0...max(0, bytes.count - 1 + extra), using: &random) }
        func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) } }
        switch Int.random(in: 0..<11, using: &random) {
        case 0:  // truncation
            bytes = Array(bytes.prefix(position()))
        case 1:  // bit flips
            guard !bytes.isEmpty else { return }
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                bytes[position()] ^= 1 << UInt8.random(in: 0...7, using: &random)
            }
        case 2:  // random bytes overwritten
            guard !bytes.isEmpty else { return }
            for _ in 0..<Int.random(in: 1...16, using: &random) { bytes[position()] = UInt8.random(in: 0...255) }
        case 3:  // insertion
            bytes.insert(contentsOf: randomBytes(Int.random(in: 1...64, using: &random)), at: position(1))
        case 4:  // deletion
            guard !bytes.isEmpty else { return }
            let start = position()
            bytes.removeSubrange(start..<min(bytes.count, start + Int.random(in: 1...64, using: &random)))
        case 5:  // a range duplicated elsewhere
            guard !bytes.isEmpty else { return }
            let start = position()
            let slice = bytes[start..<min(bytes.count, start + Int.random(in: 1...128, using: &random))]
            bytes.insert(contentsOf: slice, at: position(1))
        case 6:  // oversized lengths and counts
            let values: [UInt64] = [.max, UInt64(Int64.max), 1 << 32, 0xFFFF_FFFF, 0x7FFF_FFFF, 1 << 40, 0]
            let value = values[Int.random(in: 0..<values.count, using: &random)]
            let width = [1, 2, 4, 8][Int.random(in: 0..<4, using: &random)]
            var offset = position()
            if kind == "vault", random.next() % 2 == 0 { offset = [11, 19, 67][Int.random(in: 0..<3, using: &random)] }
            if kind == "plist", random.next() % 2 == 0 {
                offset = max(0, bytes.count - 32) + Int.random(in: 0..<32, using: &random)
            }
            for byte in 0..<width where offset + byte < bytes.count {
                bytes[offset + byte] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(byte)))
            }
        case 7:  // a garbage header
            let count = min(bytes.count, Int.random(in: 1...32, using: &random))
            bytes.replaceSubrange(0..<count, with: randomBytes(count))
        case 8:  // a wrong version
            switch kind {
            case "vault" where bytes.count >= 10:
                let version = UInt16.random(in: 2...UInt16.max, using: &random)
                bytes[8] = UInt8(version & 0xFF)
                bytes[9] = UInt8(version >> 8)
            case "plist" where bytes.count >= 8 && bytes.starts(with: Array("bplist0".utf8)):
                bytes[7] = UInt8.random(in: 0...255, using: &random)
            default:
                let tokens = [
                    "{", "[", "\"", "\\", ",", ":", "$date", "$data", "$float", "1e999", "-", "\u{0}",
                    "\\ud800", "<dict>", "</array>", "<integer>", "99999999999999999999", "&#0;",
                ]
                let token = tokens[Int.random(in: 0..<tokens.count, using: &random)]
                bytes.insert(contentsOf: Array(token.utf8), at: position(1))
            }
        case 9:  // absurd nesting
            let opener = kind == "plist" ? "<array>" : "["
            let depth = Int.random(in: 400...20_000, using: &random)
            bytes.insert(contentsOf: Array(String(repeating: opener, count: depth).utf8), at: position(1))
        default:  // nothing like the format at all
            bytes = randomBytes(Int.random(in: 0...4096, using: &random))
        }
    }
}

extension EngineClock {
    /// A clock that stands still until the engine pauses on it, and then moves by exactly the pause, at once: for
    /// runs whose outcome does not depend on real time passing (nobody else writes the file the engine waits on).
    /// Its timers run on the system's time.
    static func movingWhenPaused() -> EngineClock {
        let elapsed = ElapsedTime()
        return EngineClock(
            now: { elapsed.time.withLock { $0 } }, pause: { step in elapsed.time.withLock { $0 += step } },
            schedule: EngineClock.system.schedule)
    }
}

private final class ElapsedTime: Sendable {
    let time = Mutex<Duration>(.zero)
}
