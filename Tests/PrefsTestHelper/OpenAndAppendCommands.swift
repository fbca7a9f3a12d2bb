// The child-process side of SpecialFileTests and LockFileProcessTests (Tests/PrefsProcessTests): opens that could
// hang, loop or exhaust memory run here, so a regression fails the test by its deadline instead of hanging it.
import Foundation
import Prefs
import PrefsTestSupport

#if canImport(Glibc)
    import Glibc
#endif

enum OpenAndAppendCommands {
    /// Runs `arguments` if they name one of these commands; returns false otherwise.
    static func run(_ arguments: [String]) -> Bool {
        switch arguments.first {
        case "try-open": tryOpen(spec: arguments[1])
        case "append-on-go":
            appendOnGo(
                spec: arguments[1], key: arguments[2], count: Int(arguments[3])!, tag: arguments[4],
                waiting: arguments.count < 6 || arguments[5] != "now")
        default: return false
        }
        return true
    }

    /// try-open SPEC: opens the store, reads everything and writes one value. Prints `ok`, or `error TYPE MESSAGE`
    /// for the first error, then `maxrss KIB`, the most memory the process used (its peak resident size).
    static func tryOpen(spec: String) {
        do {
            let store = try StoreSpec.open(spec)
            _ = try store.allValues()
            try store.setValue(.string("probe"), forKey: "probe")
            emit("ok")
        } catch {
            emit("error \(type(of: error)) \(error)".replacingOccurrences(of: "\n", with: " "))
        }
        // VmHWM, this process image's peak resident size (`ru_maxrss` would include the parent's from before exec).
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let peak = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
        emit("maxrss \(peak?.split(separator: " ").dropFirst().first ?? "unknown")")
    }

    /// append-on-go SPEC KEY COUNT TAG: opens the store and takes its lock once, prints `ready`, waits for a line on
    /// standard input, then
    /// appends "TAG-0" … "TAG-(COUNT-1)" to the string array under KEY, each an atomic read-modify-write, and prints
    /// `done`. Any error fails the process.
    /// With a sixth argument `now` it starts at once instead.
    static func appendOnGo(spec: String, key: String, count: Int, tag: String, waiting: Bool) {
        PrefsConfig.errorHandler = { report in fail("reported: \(report)") }
        do {
            let store = try StoreSpec.open(spec)
            // Takes the lock once (an update that changes nothing), so this process holds its lock descriptor.
            try store.updateValue(forKey: key) { $0 }
            emit("ready")
            if waiting { _ = readLine() }
            for index in 0..<count {
                try store.updateValue(forKey: key) { old in
                    var list: [PrefValue] = []
                    if case .array(let elements)? = old { list = elements }
                    return .array(list + [.string("\(tag)-\(index)")])
                }
            }
            emit("done")
        } catch {
            fail("append-on-go: \(error)")
        }
    }
}
