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
            // layers-app APP [-key value …]: LAYERS_PREFIX sets PrefsConfig.environmentPrefix, LAYERS_ACTION is
            // "set" (volume = 7 through the wrapper, then through the typed store API) or "reset".
            app(arguments[1])
        case "layers-watch":
            // layers-watch APP COUNT: prints the volume (current value first) for COUNT values.
            PrefsConfig.appIdentifier = arguments[1]
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
        PrefsConfig.appIdentifier = identifier
        if let prefix = ProcessInfo.processInfo.environment["LAYERS_PREFIX"] { PrefsConfig.environmentPrefix = prefix }
        let settings = LayeredSettings()
        let store = UserDefaultsStore.standard
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

    private static func layerName<Value>(_ value: StoredValue<Value>) -> String {
        value.layer?.rawValue ?? "none"
    }
}
