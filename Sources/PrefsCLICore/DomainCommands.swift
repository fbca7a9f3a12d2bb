import Foundation
import Prefs
import PrefsPostgres

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The commands over UserDefaults suites in the preferences folder.
enum DomainCommands {
    static func folder() -> URL { UserDefaultsStore.preferencesDirectory() }

    static func fileURL(of domain: String) -> URL { folder().appending(path: domain + ".plist") }

    /// The suite names in the preferences folder: every `NAME.plist` (lock and temporary files excluded).
    static func domainNames() throws -> [String] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder().path(percentEncoded: false))
        } catch CocoaError.fileReadNoSuchFile {
            return []
        }
        return names.filter { $0.hasSuffix(".plist") && !$0.hasPrefix(".") && $0 != ".plist" }
            .map { String($0.dropLast(".plist".count)) }.sorted()
    }

    /// Opens an existing domain; a missing one is "not found" and nothing is created.
    static func openExisting(_ domain: String, _ invocation: Invocation) throws -> UserDefaultsStore {
        try checkName(domain)
        guard FileManager.default.fileExists(atPath: fileURL(of: domain).path(percentEncoded: false)) else {
            throw Failure.notFound(
                "\(invocation.command): domain \(String(reflecting: domain)) does not exist in "
                    + "\(folder().path(percentEncoded: false)); run `prefs domains` to list them")
        }
        return try UserDefaultsStore(suiteName: domain)
    }

    /// Refuses the names the library refuses, before looking for a file by that name.
    static func checkName(_ domain: String) throws {
        do {
            try UserDefaultsStore.validate(suiteName: domain)
        } catch {
            throw Failure.usage(error.description)
        }
    }

    static func notFound(key: String, domain: String, _ invocation: Invocation) -> Failure {
        .notFound(
            "\(invocation.command): no key \(String(reflecting: key)) in domain \(String(reflecting: domain)); "
                + "run `prefs read \(domain)` to list its keys")
    }

    static func domains(_ invocation: Invocation) throws {
        let names = try domainNames()
        if invocation.has("--json") {
            invocation.console.print(try PrefValue.array(names.map { .string($0) }).jsonText())
        } else {
            for name in names { invocation.console.print(name) }
        }
    }

    static let explainFlag = Option.flag("--explain", "also print the layer the value came from")

    /// How `--explain` names each layer.
    static func explanation(of layer: PreferenceLayer) -> String {
        switch layer {
        case .managed: "managed: forced by the administrator ($XDG_CONFIG_DIRS/managed-preferences)"
        case .arguments: "arguments: the command line"
        case .environment: "environment: an environment variable"
        case .user: "user: the domain's own file"
        case .systemDefaults: "system defaults: a system-wide default ($XDG_CONFIG_DIRS)"
        case .registered: "registered: a registered default"
        }
    }

    static func read(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        let store: any KeyValueStore =
            PostgresDomain.isRequested(invocation)
            ? try PostgresDomain.open(domain, invocation) : try openExisting(domain, invocation)
        let json = invocation.has("--json")
        if invocation.positionals.count == 2 {
            let key = invocation.positionals[1]
            guard let value = try store.value(forKey: key) else { throw notFound(key: key, domain: domain, invocation) }
            invocation.console.print(json ? try value.jsonText() : ValueText.format(value))
            if invocation.has("--explain"), let layer = store.layer(ofKey: key) {
                invocation.console.print("layer: " + explanation(of: layer))
            }
            return
        }
        var values = try store.allValues()
        if values.isEmpty, PostgresDomain.isRequested(invocation) {
            _ = try PostgresDomain.openExisting(domain, invocation)
        }
        if json {
            invocation.console.writeOutput(String(decoding: try PrefValue.jsonDocument(values), as: UTF8.self))
            return
        }
        // The list shows the user's values, and the administrator's forced values in their place.
        let forced = (store as? FileBackedStore)?.values(in: .managed) ?? [:]
        values.merge(forced) { _, forcedValue in forcedValue }
        let keys = values.keys.sorted()
        let keyWidth = keys.map(\.count).max() ?? 0
        let typeWidth = values.values.map(\.typeName.count).max() ?? 0
        for key in keys {
            let value = values[key]!
            invocation.console.print(
                key.padding(toLength: keyWidth, withPad: " ", startingAt: 0) + "  "
                    + value.typeName.padding(toLength: typeWidth, withPad: " ", startingAt: 0) + "  "
                    + ValueText.formatInline(value) + (forced[key] == nil ? "" : "  (forced)"))
        }
    }

    static func write(_ invocation: Invocation) throws {
        let (domain, key, text) = (invocation.positionals[0], invocation.positionals[1], invocation.positionals[2])
        let explicit = try invocation["--type"].map(ValueType.init(option:))
        if key.isEmpty { throw Failure.usage("\(invocation.command): a key cannot be empty") }
        let store: any KeyValueStore
        if PostgresDomain.isRequested(invocation) {
            store = try PostgresDomain.open(domain, invocation)
        } else {
            try checkName(domain)
            store = try UserDefaultsStore(suiteName: domain)
        }
        try store.updateValue(forKey: key) { old in
            let type = explicit ?? old.map(ValueType.init(of:)) ?? .string
            guard var value = ValueText.parse(text, as: type) else {
                let kept = explicit == nil && old != nil ? " (the type stored under \(String(reflecting: key)))" : ""
                throw Failure.usage(
                    "\(invocation.command): \(String(reflecting: text)) is not \(type.phrase)\(kept): expected "
                        + "\(type.expected); pass --type to store another type; nothing was changed")
            }
            if explicit == nil, let old { value = try keepShape(value, of: old, key: key, invocation) }
            return value
        }
    }

    /// Without `--type`, JSON written over an array must be an array, and over a dictionary a dictionary.
    private static func keepShape(_ value: PrefValue, of old: PrefValue, key: String, _ invocation: Invocation) throws
        -> PrefValue
    {
        switch (old, value) {
        case (.array, .array), (.dictionary, .dictionary): return value
        case (.array, _), (.dictionary, _):
            throw Failure.usage(
                "\(invocation.command): \(String(reflecting: key)) holds \(old.typeName == "array" ? "an" : "a") "
                    + "\(old.typeName); give a JSON \(old.typeName), or pass --type to change the type; "
                    + "nothing was changed")
        default: return value
        }
    }

    static func delete(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        if PostgresDomain.isRequested(invocation) {
            let store = try PostgresDomain.openExisting(domain, invocation)
            try deleteKey(from: store, domain: domain, invocation)
            if invocation.positionals.count == 1 { try store.replaceAll([:]) }
            return
        }
        let store = try openExisting(domain, invocation)
        if invocation.positionals.count == 2 {
            try deleteKey(from: store, domain: domain, invocation)
            return
        }
        // The lock file stays: another process may hold it, and removing it would break their lock.
        let path = store.url.path(percentEncoded: false)
        guard unlink(path) == 0 || errno == ENOENT else {
            let code = errno
            throw Failure.notFound("\(invocation.command): cannot remove \(path): \(String(cString: strerror(code)))")
        }
    }

    /// With a KEY argument, removes that key (not found when absent); without one, does nothing.
    private static func deleteKey(from store: any KeyValueStore, domain: String, _ invocation: Invocation) throws {
        guard invocation.positionals.count == 2 else { return }
        let key = invocation.positionals[1]
        try store.updateValue(forKey: key) { old in
            guard old != nil else { throw notFound(key: key, domain: domain, invocation) }
            return nil
        }
    }

    static func export(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        let store: any KeyValueStore =
            PostgresDomain.isRequested(invocation)
            ? try PostgresDomain.openExisting(domain, invocation) : try openExisting(domain, invocation)
        invocation.console.writeOutput(String(decoding: try PrefValue.jsonDocument(store.allValues()), as: UTF8.self))
    }

    static func `import`(_ invocation: Invocation) throws {
        let (domain, file) = (invocation.positionals[0], invocation.positionals[1])
        if !PostgresDomain.isRequested(invocation) { try checkName(domain) }
        let data =
            file == "-"
            ? try invocation.console.readInput(BoundedInput.importLimit)
            : try BoundedInput.read(path: file, limit: BoundedInput.importLimit)
        let values: [String: PrefValue]
        do {
            values = try PrefValue.values(fromJSONDocument: data, source: file == "-" ? "standard input" : file)
        } catch let error as PrefsError {
            throw Failure.usage(
                "\(invocation.command): \(error.description); domain \(String(reflecting: domain)) was not changed")
        }
        if PostgresDomain.isRequested(invocation) {
            try PostgresDomain.open(domain, invocation).replaceAll(values)
            return
        }
        let store = try UserDefaultsStore(suiteName: domain)
        try store.replaceAll(values)
    }

    static func watch(_ invocation: Invocation) async throws {
        let domain = invocation.positionals[0]
        let keys = Array(invocation.positionals.dropFirst())
        let store: any KeyValueStore
        if PostgresDomain.isRequested(invocation) {
            store = try PostgresDomain.open(domain, invocation)
        } else {
            try checkName(domain)
            store = try UserDefaultsStore(suiteName: domain)
        }
        let changes = store.changes.keys(keys.isEmpty ? nil : Set(keys))
        Terminal.exitCleanlyOnInterrupt()
        let what = keys.isEmpty ? "every key" : keys.map { String(reflecting: $0) }.joined(separator: ", ")
        invocation.console.printError("prefs: watching \(what) of domain \(domain); press Ctrl-C to stop")
        for await key in changes {
            let line: String
            if let value = try store.value(forKey: key) {
                line = "\(key) = \(ValueText.formatInline(value)) (\(value.typeName))"
            } else {
                line = "\(key) removed"
            }
            invocation.console.print(line)
        }
    }
}
