// The child-process side of the compatibility tests: another writer that rewrites a suite in place, the way
// Foundation's `UserDefaults.synchronize()` does on Linux.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum CompatibilityCommands {
    /// Runs `arguments` if they name a compatibility command; returns false otherwise.
    static func run(_ arguments: [String]) -> Bool {
        switch arguments.first {
        case "rewrite-in-place":
            // rewrite-in-place PLIST KEY COUNT PAUSE_MS: COUNT times, reads the property list, sets KEY to the
            // round's number, and writes the file back in place: open with truncate, the first half, a pause,
            // the second half, close. Prints "done" at the end.
            rewriteInPlace(
                path: arguments[1], key: arguments[2], count: Int(arguments[3])!, pauseMilliseconds: Int(arguments[4])!)
            emit("done")
        case "stale-rewrite":
            // stale-rewrite PLIST KEY MIN_MS MAX_MS: until standard input closes, reads the property list, pauses a
            // random MIN_MS…MAX_MS, then writes what it read back in place (truncate, write, no lock) with KEY set to
            // the round's number, as Foundation's synchronize() does with a slow gap between its read and its
            // write. Prints "started" after the first round and "last N" at the end.
            staleRewrite(
                path: arguments[1], key: arguments[2], minimum: Int(arguments[3])!, maximum: Int(arguments[4])!)
        case "foundation-count":
            // foundation-count SUITE KEY COUNT: sets KEY to 1…COUNT through Foundation's UserDefaults, with a
            // synchronize() after each, so Foundation rewrites the suite's file in place COUNT times.
            let defaults = UserDefaults(suiteName: arguments[1])!
            for round in 1...Int(arguments[3])! {
                defaults.set(round, forKey: arguments[2])
                defaults.synchronize()
            }
            emit("done")
        case "foundation-loop":
            // foundation-loop SUITE KEY PAUSE_US: sets KEY to 1, 2, 3… through Foundation's UserDefaults with a
            // synchronize() after each (a pause of PAUSE_US microseconds between rounds, none for 0), until standard
            // input closes. Prints "started" after the first round and "last N" at the end.
            foundationLoop(suite: arguments[1], key: arguments[2], pauseMicroseconds: Int(arguments[3])!)
        case "foundation-watch":
            // foundation-watch SUITE KEY: prints KEY as Foundation's UserDefaults reads it, then again after a
            // synchronize() for every line on standard input, as an app that reads the suite now and then does.
            let defaults = UserDefaults(suiteName: arguments[1])!
            emit(String(describing: defaults.object(forKey: arguments[2]) ?? "nil"))
            while readLine() != nil {
                defaults.synchronize()
                emit(String(describing: defaults.object(forKey: arguments[2]) ?? "nil"))
            }
        default:
            return false
        }
        return true
    }

    private static func foundationLoop(suite: String, key: String, pauseMicroseconds: Int) {
        let stop = Atomic<Bool>(false)
        let reader = Thread {
            _ = FileHandle.standardInput.readDataToEndOfFile()
            stop.store(true, ordering: .sequentiallyConsistent)
        }
        reader.start()
        let defaults = UserDefaults(suiteName: suite)!
        var round = 0
        repeat {
            round += 1
            defaults.set(round, forKey: key)
            defaults.synchronize()
            if round == 1 { emit("started") }
            if pauseMicroseconds > 0 { usleep(useconds_t(pauseMicroseconds)) }
        } while !stop.load(ordering: .sequentiallyConsistent)
        emit("last \(round)")
    }

    private static func staleRewrite(path: String, key: String, minimum: Int, maximum: Int) {
        let stop = Atomic<Bool>(false)
        let reader = Thread {
            _ = FileHandle.standardInput.readDataToEndOfFile()
            stop.store(true, ordering: .sequentiallyConsistent)
        }
        reader.start()
        var round = 0
        repeat {
            round += 1
            var values: [String: Any] = [:]
            if let data = FileManager.default.contents(atPath: path), !data.isEmpty {
                guard let read = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
                else {
                    round -= 1
                    continue  // a Prefs commit is never torn; this is our own half-written file: read again
                }
                values = read
            }
            usleep(useconds_t(Int.random(in: minimum...maximum) * 1000))
            values[key] = round
            guard let bytes = try? PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
            else { fail("cannot encode") }
            let fd = open(path, O_WRONLY | O_TRUNC | O_CREAT, 0o600)
            guard fd >= 0 else { fail("cannot open \(path)") }
            writeAll(bytes, to: fd)
            close(fd)
            if round == 1 { emit("started") }
        } while !stop.load(ordering: .sequentiallyConsistent)
        emit("last \(round)")
    }

    private static func rewriteInPlace(path: String, key: String, count: Int, pauseMilliseconds: Int) {
        for round in 1...count {
            guard let data = FileManager.default.contents(atPath: path),
                var values = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
            else { fail("cannot read \(path)") }
            values[key] = round
            let bytes: Data
            do {
                bytes = try PropertyListSerialization.data(fromPropertyList: values, format: .xml, options: 0)
            } catch { fail("cannot encode: \(error)") }
            let fd = open(path, O_WRONLY | O_TRUNC)
            guard fd >= 0 else { fail("cannot open \(path)") }
            let half = bytes.count / 2
            writeAll(bytes[..<half], to: fd)
            usleep(useconds_t(pauseMilliseconds * 1000))
            writeAll(bytes[half...], to: fd)
            close(fd)
        }
    }

    private static func writeAll(_ bytes: Data, to fd: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                guard written > 0 else { fail("write failed") }
                offset += written
            }
        }
    }
}
