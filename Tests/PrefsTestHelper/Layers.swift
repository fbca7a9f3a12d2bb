import Foundation
import Prefs
import Synchronization

/// The settings of a layered app, declared the README way on the standard domain.
final class LayeredSettings {
    @StoredValue(key: "volume") var volume = 1
    @StoredValue(key: "verbose") var verbose = false
    @StoredValue(key: "tags") var tags: [String] = []
    @StoredValue(key: "ratio") var ratio = 1.0
    @StoredValue(key: "fontSize") var fontSize = 12
    @StoredValue(key: "font_size") var fontSizeOld = 12
}

/// Commands for the layer tests: an app started with command-line arguments, environment variables and
/// `$XDG_CONFIG_DIRS`, printing what each preference reads and where it comes from.
enum LayerCommands {
    static let reports = Mutex<[String]>([])

    static func run(_ arguments: [String]) async -> Bool {
        // The test's stand-in for /etc/xdg/managed-preferences, through the package's test hook (no environment
        // variable of the library moves it).
        if let folder = ProcessInfo.processInfo.environment["LAYERS_MANAGED_FOLDER"] {
            ManagedLocation.useForTesting(
                folder: folder, checkedFrom: ProcessInfo.processInfo.environment["LAYERS_MANAGED_TOP"]!,
                owner: getuid())
        }
        switch arguments.first {
        case "layers-app":
            // layers-app APP [-key value …]: LAYERS_PREFIX is the environment prefix configured, LAYERS_ACTION is
            // "set" (volume = 7 through the wrapper, then through the typed store API) or "reset".
            app(arguments[1])
        case "argument-forms":
            // argument-forms APP [-key value …]: for each key, what Foundation's typed getters and Prefs' typed
            // reads of the standard domain make of its argument, one line per key and type.
            argumentForms(arguments[1])
        case "layers-watch":
            // layers-watch APP COUNT: prints the volume (current value first) for COUNT values.
            PrefsConfig.configure(PrefsConfiguration(appIdentifier: arguments[1]))
            let settings = LayeredSettings()
            emit("ready")
            var seen = 0
            for await volume in settings.$volume.values {
                emit("volume=\(volume) forced=\(settings.$volume.isForced)")
                seen += 1
                if seen == Int(arguments[2])! { break }
            }
        default:
            return false
        }
        return true
    }

    private static func app(_ identifier: String) {
        PrefsConfig.errorHandler = { report in reports.withLock { $0.append("\(report)") } }
        PrefsConfig.configure(
            PrefsConfiguration(
                appIdentifier: identifier, environmentPrefix: ProcessInfo.processInfo.environment["LAYERS_PREFIX"]))
        let settings = LayeredSettings()
        let store = SuiteFileStore.standard
        switch ProcessInfo.processInfo.environment["LAYERS_ACTION"] {
        case "set":
            settings.volume = 7
            do {
                try store.set(8, for: PrefKey("volume", default: 1))
                emit("typed-set=ok")
            } catch {
                emit("typed-set=\(error)")
            }
        case "reset":
            settings.$volume.reset()
        default:
            break
        }
        emit("volume=\(settings.volume) layer=\(layerName(settings.$volume)) forced=\(settings.$volume.isForced)")
        emit("verbose=\(settings.verbose) layer=\(layerName(settings.$verbose))")
        emit("tags=\(settings.tags.joined(separator: ",")) layer=\(layerName(settings.$tags))")
        emit("ratio=\(settings.ratio) layer=\(layerName(settings.$ratio))")
        emit("fontSize=\(settings.fontSize) font_size=\(settings.fontSizeOld) layer=\(layerName(settings.$fontSize))")
        let typed = (try? store.value(for: PrefKey("volume", default: 1))).map(String.init) ?? "error"
        emit(
            "typed-volume=\(typed) raw-volume=\((try? store.value(forKey: "volume")).flatMap { $0 }.map { "\($0)" } ?? "nil")"
        )
        emit("foundation-volume=\(UserDefaults.standard.integer(forKey: "volume"))")
        let user = (try? store.allValues()) ?? [:]
        emit("user=" + user.keys.sorted().map { "\($0):\(user[$0]!)" }.joined(separator: ","))
        let all = reports.withLock { $0 }
        for report in all { emit("report: \(report)") }
        emit("reports=\(all.count)")
    }

    private static func argumentForms(_ identifier: String) {
        PrefsConfig.configure(PrefsConfiguration(appIdentifier: identifier))
        let store = SuiteFileStore.standard
        let defaults = UserDefaults.standard
        func prefs(_ read: () throws -> String) -> String { (try? read()) ?? "unreadable" }
        let words = CommandLine.arguments
        let keys = words.indices.compactMap { index -> String? in
            guard words[index].hasPrefix("-"), index + 1 < words.count, !words[index + 1].hasPrefix("-") else {
                return nil
            }
            return String(words[index].dropFirst())
        }
        for key in keys {
            func line(_ type: String, _ foundation: String, _ ours: () throws -> String) {
                emit([key, type, foundation, (try? ours()) ?? "unreadable"].joined(separator: "\t"))
            }
            line("int", "\(defaults.integer(forKey: key))") { "\(try store.value(for: PrefKey(key, default: 0)))" }
            line("double", "\(defaults.double(forKey: key))") { "\(try store.value(for: PrefKey(key, default: 0.0)))" }
            line("float", "\(defaults.float(forKey: key))") {
                "\(try store.value(for: PrefKey(key, default: Float(0))))"
            }
            line("bool", "\(defaults.bool(forKey: key))") { "\(try store.value(for: PrefKey(key, default: false)))" }
            line("string", defaults.string(forKey: key) ?? "nil") { try store.value(for: PrefKey(key, default: "")) }
            line("strings", defaults.stringArray(forKey: key).map { "\($0)" } ?? "nil") {
                "\(try store.value(for: PrefKey(key, default: [String]())))"
            }
            line("ints", (defaults.array(forKey: key) as? [Int]).map { "\($0)" } ?? "nil") {
                "\(try store.value(for: PrefKey(key, default: [Int]())))"
            }
            let members = defaults.dictionary(forKey: key) as? [String: String]
            line("dictionary", members.map { "\($0.sorted { $0.key < $1.key })" } ?? "nil") {
                "\(try store.value(for: PrefKey(key, default: [String: String]())).sorted { $0.key < $1.key })"
            }
        }
    }

    private static func layerName<Value>(_ value: StoredValue<Value>) -> String {
        value.layer?.rawValue ?? "none"
    }
}
