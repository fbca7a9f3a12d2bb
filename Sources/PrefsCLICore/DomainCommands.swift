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
    static func folder() -> URL { SuiteFileStore.preferencesDirectory() }

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
    static func openExisting(_ domain: String, _ invocation: Invocation) throws -> SuiteFileStore {
        try checkExists(domain, invocation)
        return try SuiteFileStore(suiteName: domain)
    }

    /// Throws "not found" unless the domain's file exists.
    static func checkExists(_ domain: String, _ invocation: Invocation) throws {
        try checkName(domain)
        guard FileManager.default.fileExists(atPath: fileURL(of: domain).path(percentEncoded: false)) else {
            let hint = Hints.didYouMean(domain, among: (try? domainNames()) ?? [])
            throw Failure.notFound(
                "\(invocation.command): domain \(String(reflecting: domain)) does not exist in "
                    + "\(folder().path(percentEncoded: false))\(hint); run `prefs domains` to list them")
        }
    }

    /// The usage error for `defaults`' global-domain, host and app-bundle forms (`-g`, `NSGlobalDomain`,
    /// `-currentHost`, `-host`, `-app`), given where a domain or, as `defaults` places the host options, before the
    /// command; nil for any other word.
    static func noEquivalent(_ word: String) -> Failure? {
        guard ["-g", "-globalDomain", "NSGlobalDomain", "-currentHost", "-host", "-app"].contains(word) else {
            return nil
        }
        return Failure.usage(
            "\(word) has no equivalent in prefs: Linux has no global domain, host domains or app bundles; "
                + "name the domain, such as com.example.notes")
    }

    /// Refuses the names the library refuses, before looking for a file by that name.
    static func checkName(_ domain: String) throws {
        if let failure = noEquivalent(domain) { throw failure }
        do {
            try SuiteFileStore.validate(suiteName: domain)
        } catch {
            throw Failure.usage(error.description)
        }
    }

    /// The key is not in the domain, whose keys are `keys`: the closest one is suggested, and when the app of that
    /// name has a default vault, where its secrets are read (they are never in the domain).
    static func notFound(key: String, domain: String, keys: some Sequence<String>, _ invocation: Invocation) -> Failure
    {
        let vault = EncryptedFileStore.defaultLocation(appIdentifier: domain).vault.path(percentEncoded: false)
        let secrets =
            FileManager.default.fileExists(atPath: vault)
            ? "; a secret of this app is read with `prefs secure get \(Hints.shellQuoted(key)) --app "
                + "\(Hints.shellQuoted(domain))`" : ""
        return .notFound(
            "\(invocation.command): no key \(String(reflecting: key)) in domain \(String(reflecting: domain))"
                + "\(Hints.didYouMean(key, among: keys)); run `prefs read \(Hints.shellQuoted(domain))` to list its keys"
                + secrets
        )
    }

    /// The domains whose app published a schema (or had one installed), as `gsettings list-schemas` lists them:
    /// every `DOMAIN.json` of the schema folders.
    static func schemaDomainNames() -> [String] {
        let folders = [SchemaFiles.userFolder] + SchemaFiles.systemFolders
        return folders.flatMap { folder in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path(percentEncoded: false))) ?? []
            return names.filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }.map {
                String($0.dropLast(".json".count))
            }
            .filter { (try? SuiteFileStore.validate(suiteName: $0)) != nil }
        }
    }

    static func domains(_ invocation: Invocation) throws {
        let names =
            PostgresDomain.isRequested(invocation)
            ? try PostgresDomain.namespaces(invocation) : Set(try domainNames() + schemaDomainNames()).sorted()
        if invocation.has("--json") {
            invocation.console.print(try PrefValue.array(names.map { .string($0) }).jsonText())
        } else {
            // A file another tool made may have any name; none of it reaches the terminal raw.
            for name in names { invocation.console.print(ValueText.visible(name)) }
        }
    }

    static let explainFlag = Option.flag("--explain", "also print the layer the value came from")

    /// How `--explain` names each layer.
    static func explanation(of layer: PreferenceLayer) -> String {
        switch layer {
        case .managed: "managed: forced by the administrator (/etc/xdg/managed-preferences)"
        case .arguments: "arguments: the command line"
        case .environment: "environment: an environment variable"
        case .user: "user: the domain's own file"
        case .systemDefaults: "system defaults: a system-wide default ($XDG_CONFIG_DIRS)"
        case .registered: "registered: a registered default"
        }
    }

    static let typesFlag = Option.flag("--types", "list every key with its type and value, one per line")

    static func read(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        // A domain whose app published its schema answers for its declared keys before anything is stored, as
        // `gsettings get` does: its file need not exist.
        let schema =
            PostgresDomain.isRequested(invocation) || domain.contains("/")
            ? nil : (try? checkName(domain)).flatMap { SchemaCommands.load(domain, invocation) }
        let store =
            schema != nil ? try SuiteFileStore(suiteName: domain) : try openForReading(domain, invocation)
        let json = invocation.has("--json")
        if invocation.positionals.count == 2 {
            let key = invocation.positionals[1]
            if let store = store as? SuiteFileStore, let schema, let entry = schema.keys[key] {
                try readDeclared(key, entry, schema: schema, store: store, invocation)
                return
            }
            guard let value = try store.value(forKey: key) else {
                throw notFound(key: key, domain: domain, keys: try store.allValues().keys, invocation)
            }
            if invocation.has("--types") {
                // The line the whole domain's --types listing has for this key.
                invocation.console.print(
                    "\(ValueText.visible(key))  \(value.typeName)  \(ValueText.formatInline(value))"
                        + (try effectiveValues([key: value], of: store).1[key].map { "  (\($0))" } ?? ""))
            } else {
                invocation.console.print(json ? try value.jsonText() : ValueText.format(value))
            }
            if invocation.has("--explain"), let layer = store.layer(ofKey: key) {
                invocation.console.print("layer: " + explanation(of: layer))
            }
            return
        }
        let values = try store.allValues()
        if values.isEmpty, PostgresDomain.isRequested(invocation) {
            _ = try PostgresDomain.openExisting(domain, invocation)
        }
        if json {
            invocation.console.writeData(try PrefValue.exportDocument(values))
            return
        }
        var (effective, notes) = try effectiveValues(values, of: store)
        if store is SuiteFileStore, let schema {
            for (key, value) in effective {
                guard let entry = schema.keys[key] else { continue }
                let note: String
                switch entry.read(value) {
                case .reads: continue
                case .unknown: note = "unchecked: prefs cannot tell whether the app reads it"
                case .refused(let mismatch):
                    let fallback = entry.defaultValue.map(ValueText.formatInline) ?? "nil"
                    note = "\(SchemaCommands.phrase(mismatch, key: key)): the app reads the default \(fallback)"
                }
                notes[key] = (notes[key].map { $0 + "; " } ?? "") + note
            }
        }
        guard invocation.has("--types") else {
            invocation.console.writeOutput(OldStylePlist.document(effective, notes: notes))
            return
        }
        let keys = effective.keys.sorted()
        let shownKeys = keys.map { ValueText.visible($0) }
        let keyWidth = shownKeys.map(\.count).max() ?? 0
        let typeWidth = effective.values.map(\.typeName.count).max() ?? 0
        for (key, shownKey) in zip(keys, shownKeys) {
            let value = effective[key]!
            invocation.console.print(
                shownKey.padding(toLength: keyWidth, withPad: " ", startingAt: 0) + "  "
                    + value.typeName.padding(toLength: typeWidth, withPad: " ", startingAt: 0) + "  "
                    + ValueText.formatInline(value) + (notes[key].map { "  (\($0))" } ?? ""))
        }
    }

    /// `read DOMAIN KEY` of a key the app's schema declares, as `gsettings get` answers: the value the app reads,
    /// the declared default when nothing is stored or the stored value is not allowed; `--explain` says where it comes
    /// from, `--types` marks a value that is not the user's and one the app does not read.
    private static func readDeclared(
        _ key: String, _ entry: KeyDescription, schema: DomainSchema, store: SuiteFileStore,
        _ invocation: Invocation
    ) throws {
        let read = try SchemaCommands.appValue(key, entry, store, schema: schema)
        if read.value == nil, read.source.hasPrefix("default"), entry.isComputed {
            throw Failure.notFound(
                "\(invocation.command): nothing is stored for \(String(reflecting: key)) of domain "
                    + "\(String(reflecting: schema.domain)), and the app computes its default each time it reads it; "
                    + "prefs cannot know that value")
        }
        if let reason = read.unknown {
            invocation.console.printError(
                "\(invocation.command): warning: prefs cannot tell whether the app reads this value of "
                    + "\(String(reflecting: key)) (\(ValueText.visible(reason)))")
        }
        // Declared without a default and not set: the app reads nil, which prints as `nil` (`null` in JSON).
        let value = read.value
        var lines: [String] = []
        if invocation.has("--types") {
            let shown = read.refused?.value ?? value
            let note =
                if let refused = read.refused {
                    "\(refused.problem): the app reads the default \(value.map(ValueText.formatInline) ?? "nil")"
                } else if read.source.hasPrefix("default") {
                    "default"
                } else if read.source.hasPrefix("managed") {
                    "forced"
                } else if read.source.hasPrefix("system") {
                    "system default"
                } else if read.source.hasPrefix("environment") {
                    read.source
                } else {
                    ""
                }
            lines.append(
                "\(ValueText.visible(key))  \(shown?.typeName ?? entry.type ?? "nil")  "
                    + "\(shown.map(ValueText.formatInline) ?? "nil")" + (note.isEmpty ? "" : "  (\(note))"))
        } else if let value {
            lines.append(invocation.has("--json") ? try value.jsonText() : ValueText.format(value))
        } else {
            lines.append(invocation.has("--json") ? "null" : "nil")
        }
        if invocation.has("--explain") {
            let from =
                read.refused.map {
                    "the declared default, in place of \(ValueText.formatInline($0.value)), which "
                        + "\($0.problem); set by \(read.source)"
                } ?? read.source
            lines.append("layer: \(from)")
        }
        for line in lines { invocation.console.print(line) }
    }

    /// The values a listing shows: the user's, the system-wide defaults the user has not set, and the
    /// administrator's forced values in place of the user's; with a note for each value that is not the user's.
    /// The arguments layer is left out: it holds `prefs`'s own command line.
    static func effectiveValues(_ user: [String: PrefValue], of store: any KeyValueStore) throws
        -> ([String: PrefValue], [String: String])
    {
        guard let layered = store as? FileBackedStore else { return (user, [:]) }
        var values = user
        var notes: [String: String] = [:]
        for (key, value) in try layered.allValues(in: .systemDefaults) where values[key] == nil {
            values[key] = value
            notes[key] = "system default"
        }
        for (key, value) in try layered.allValues(in: .managed) {
            values[key] = value
            notes[key] = "forced"
        }
        return (values, notes)
    }

    /// The store `read` and `read-type` read: a PostgreSQL namespace, a property list named by its path (a DOMAIN
    /// with a `/`, as `defaults read` takes one), or a domain that exists.
    static func openForReading(_ domain: String, _ invocation: Invocation) throws -> any KeyValueStore {
        if PostgresDomain.isRequested(invocation) { return try PostgresDomain.open(domain, invocation) }
        if domain.contains("/") { return try InMemoryStore(readFile(domain, invocation)) }
        return try openExisting(domain, invocation)
    }

    /// The values of the property list (or prefs JSON) at `path`, or at `path.plist` when only that exists, read
    /// and never written.
    static func readFile(_ path: String, _ invocation: Invocation) throws -> [String: PrefValue] {
        let exists = { FileManager.default.fileExists(atPath: $0) }
        let file = !exists(path) && !path.hasSuffix(".plist") && exists(path + ".plist") ? path + ".plist" : path
        guard exists(file) else {
            throw Failure.notFound(
                "\(invocation.command): no file at \(path); a DOMAIN with a / is the path of a property list, as "
                    + "`defaults read` takes one")
        }
        let data = try BoundedInput.read(path: file, limit: BoundedInput.importLimit)
        do {
            return
                PrefValue.isPropertyList(data)
                ? try PrefValue.values(fromPropertyList: data, source: file)
                : try PrefValue.values(fromJSONDocument: data, source: file)
        } catch let error as PrefsError {
            throw Failure(.integrity, "\(invocation.command): \(error.description)")
        }
    }

    static func readType(_ invocation: Invocation) throws {
        let (domain, key) = (invocation.positionals[0], invocation.positionals[1])
        let store = try openForReading(domain, invocation)
        guard let value = try store.value(forKey: key) else {
            throw notFound(key: key, domain: domain, keys: try store.allValues().keys, invocation)
        }
        invocation.console.print(DefaultsFlags.typeSentence(value))
    }

    static func rename(_ invocation: Invocation) throws {
        let (domain, old, new) = (invocation.positionals[0], invocation.positionals[1], invocation.positionals[2])
        let store = try openExisting(domain, invocation)
        for key in [old, new] where store.isForced(key) { throw PrefsError.forced(key: key) }
        try store.batch {
            let values = try store.allValues()
            guard let value = values[old] else {
                throw notFound(key: old, domain: domain, keys: values.keys, invocation)
            }
            guard old != new else { return }
            try store.setValue(value, forKey: new)
            try store.setValue(nil, forKey: old)
        }
    }

    static func find(_ invocation: Invocation) throws {
        let word = invocation.positionals[0]
        var found = false
        for domain in try domainNames() {
            let values: [String: PrefValue]
            do {
                values = try SuiteFileStore(suiteName: domain).allValues()
            } catch {
                invocation.console.printError("prefs find: skipped domain \(domain): \(Failure.from(error).message)")
                continue
            }
            let matches =
                contains(domain, word)
                ? values : values.filter { contains($0.key, word) || contains($0.value, word) }
            guard !matches.isEmpty else { continue }
            found = true
            invocation.console.writeOutput(
                "Found \(matches.count) key\(matches.count == 1 ? "" : "s") in domain \(domain): "
                    + OldStylePlist.document(matches))
        }
        if !found {
            throw Failure.notFound(
                "\(invocation.command): no domain, key or value contains \(String(reflecting: word))")
        }
    }

    private static func contains(_ text: String, _ word: String) -> Bool {
        text.range(of: word, options: .caseInsensitive) != nil
    }

    /// Whether a string in `value` (or a dictionary key inside it) contains `word`, ignoring case.
    private static func contains(_ value: PrefValue, _ word: String) -> Bool {
        switch value {
        case .string(let text): contains(text, word)
        case .array(let elements): elements.contains { contains($0, word) }
        case .dictionary(let members): members.contains { contains($0.key, word) || contains($0.value, word) }
        default: false
        }
    }

    static func write(_ invocation: Invocation) throws {
        let (domain, key, text) = (invocation.positionals[0], invocation.positionals[1], invocation.positionals[2])
        let explicit = try invocation["--type"].map(ValueType.init(option:))
        if key.isEmpty { throw Failure.usage("\(invocation.command): a key cannot be empty") }
        let words = Array(invocation.positionals.dropFirst(2))
        var edit: DefaultsFlags.Edit?
        if DefaultsFlags.isFlag(text) {
            if explicit != nil {
                throw Failure.usage(
                    "\(invocation.command): give either --type or a type flag such as \(text), not both")
            }
            edit = try DefaultsFlags.parse(words, command: invocation.command)
        } else if words.count > 1 {
            throw Failure.usage(
                "\(invocation.command): unexpected argument \(String(reflecting: words[1])); for several values "
                    + "use -array or -dict (prefs write DOMAIN KEY -array a b c); usage: prefs write DOMAIN KEY VALUE")
        }
        let store: any KeyValueStore
        if PostgresDomain.isRequested(invocation) {
            store = try PostgresDomain.open(domain, invocation)
        } else {
            try checkName(domain)
            store = try SuiteFileStore(suiteName: domain)
        }
        // The app's schema, when it declares the key: the type of a value given without --type, and what is allowed.
        let declared = SchemaCommands.entryForWrite(domain, key, invocation)
        if let edit {
            try store.updateValue(forKey: key) { old in
                let value = try apply(edit, to: old, key: key, invocation)
                try SchemaCommands.check(value, declared, key: key, invocation)
                return value
            }
            return
        }
        try store.updateValue(forKey: key) { old in
            let schemaType = declared.flatMap(SchemaCommands.valueType(of:))
            let type = explicit ?? schemaType ?? old.map(ValueType.init(of:)) ?? .string
            guard var value = ValueText.parse(text, as: type) else {
                // Without --type the type is the schema's or the stored one (or string): another can be asked for.
                // With it, the value is what must change.
                let kept =
                    explicit != nil
                    ? ""
                    : schemaType != nil
                        ? " (the type the app's schema declares for \(String(reflecting: key)))"
                        : old != nil ? " (the type stored under \(String(reflecting: key)))" : ""
                // Another type helps only where nothing declares one: the app reads the declared type alone.
                let otherType = explicit == nil && schemaType == nil ? "; pass --type to store another type" : ""
                throw Failure.usage(
                    "\(invocation.command): \(String(reflecting: text)) is not \(type.phrase)\(kept): expected "
                        + "\(type.expected)\(otherType); nothing was changed")
            }
            if explicit == nil, schemaType == nil, let old {
                value = try keepShape(value, of: old, key: key, invocation)
            }
            try SchemaCommands.check(value, declared, key: key, invocation)
            return value
        }
    }

    /// The value a type flag leaves under the key: `-array-add` appends, `-dict-add` merges, the others replace.
    private static func apply(_ edit: DefaultsFlags.Edit, to old: PrefValue?, key: String, _ invocation: Invocation)
        throws -> PrefValue
    {
        switch (edit, old) {
        case (.set(let value), _): return value
        case (.arrayAdd(let added), nil): return .array(added)
        case (.arrayAdd(let added), .array(let elements)?): return .array(elements + added)
        case (.dictAdd(let added), nil): return .dictionary(added)
        case (.dictAdd(let added), .dictionary(let members)?): return .dictionary(members.merging(added) { $1 })
        case (.arrayAdd, let old?), (.dictAdd, let old?):
            let wanted = if case .arrayAdd = edit { "an array" } else { "a dictionary" }
            throw Failure.usage(
                "\(invocation.command): \(String(reflecting: key)) holds \(ValueType(of: old).phrase), not \(wanted); "
                    + "nothing was changed")
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
        if invocation.positionals.count == 2 {
            try deleteKey(from: try openExisting(domain, invocation), domain: domain, invocation)
            return
        }
        try checkExists(domain, invocation)
        // Under the file's lock (a damaged file too): a write of another process waits for it, then creates the
        // file afresh.
        let (store, _) = SuiteFileStore.openDomain(url: fileURL(of: domain))
        defer { store.close() }
        try store.removeFile()
    }

    /// With a KEY argument, removes that key (not found when absent); without one, does nothing.
    static func repair(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        if let moved = try SuiteFileStore.moveDamagedFileAside(suiteName: domain) {
            invocation.console.print("moved the damaged file to \(moved.path(percentEncoded: false))")
        }
    }

    private static func deleteKey(from store: any KeyValueStore, domain: String, _ invocation: Invocation) throws {
        guard invocation.positionals.count == 2 else { return }
        let key = invocation.positionals[1]
        struct Absent: Error {}
        do {
            try store.updateValue(forKey: key) { old in
                guard old != nil else { throw Absent() }
                return nil
            }
        } catch is Absent {
            // Outside the update: the keys to suggest are read from the store, which a transform must not do.
            throw notFound(key: key, domain: domain, keys: try store.allValues().keys, invocation)
        }
    }

    static let formatOption = Option.value("--format", "FORMAT", "json, xml or binary (a property list)")

    /// The forms `export` writes and `import` reads.
    enum FileFormat: String {
        case json, xml, binary
    }

    static func export(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        let path = invocation.positionals.count == 2 ? invocation.positionals[1] : nil
        let format: FileFormat
        if let name = invocation["--format"] {
            guard let named = FileFormat(rawValue: name) else {
                throw Failure.usage(
                    "\(invocation.command): unknown format \(String(reflecting: name)); use json, xml or binary")
            }
            format = named
        } else {
            // As `defaults export DOMAIN PATH`: a property list; without PATH, prefs' JSON as before.
            format = path == nil || path!.hasSuffix(".json") ? .json : .xml
        }
        let store: any KeyValueStore =
            PostgresDomain.isRequested(invocation)
            ? try PostgresDomain.openExisting(domain, invocation) : try openExisting(domain, invocation)
        var values = try store.allValues()
        if invocation.has("--non-default") {
            values = try SchemaCommands.nonDefault(values, domain: domain, invocation)
        }
        let data: Data
        switch format {
        case .json: data = try PrefValue.exportDocument(values)
        case .binary: data = try PrefValue.propertyListDocument(values)
        case .xml:
            let (xml, inexact) = try xmlDocument(values, invocation)
            if inexact.isEmpty {
                data = xml
            } else if invocation["--format"] != nil {
                // Strict XML, as asked.
                throw Failure.usage(
                    "\(invocation.command): the value of \(String(reflecting: inexact[0])) cannot be kept exactly in an "
                        + "XML property list (\(xmlLimits)); use --format binary or --format json; nothing was written")
            } else {
                // As `defaults export`, a property list; binary, the one that keeps every value.
                data = try PrefValue.propertyListDocument(values)
                let named = inexact.prefix(5).map { String(reflecting: $0) }.joined(separator: ", ")
                let more = inexact.count > 5 ? " and \(inexact.count - 5) more" : ""
                invocation.console.printError(
                    "\(invocation.command): wrote a binary property list, which Foundation, `defaults` and `prefs "
                        + "import` read: XML cannot keep the values of \(named)\(more) exactly (\(xmlLimits)); "
                        + "--format xml writes XML only if it can")
            }
        }
        guard let path, path != "-" else {
            invocation.console.writeData(data)
            return
        }
        do {
            try PrivateFile.replace(atPath: path, with: data)
        } catch {
            throw Failure.notFound(
                "\(invocation.command): cannot write \(path): \((error as NSError).localizedDescription)")
        }
    }

    /// What an XML property list cannot keep.
    static let xmlLimits = "some floats come back as doubles, dates in whole seconds, no control characters"

    /// The values as an XML property list, and the keys (sorted) whose values would not read back exactly from it
    /// (XML has one width of real, so some floats come back as doubles; its dates have whole seconds; some
    /// characters cannot appear).
    static func xmlDocument(
        _ values: [String: PrefValue], _ invocation: Invocation
    ) throws -> (data: Data, inexact: [String]) {
        let data: Data
        do {
            data = try PropertyListSerialization.data(
                fromPropertyList: PrefValue.foundationPropertyList(values), format: .xml, options: 0)
        } catch {
            throw Failure.usage("\(invocation.command): cannot write an XML property list: \(error)")
        }
        let back = (try? PrefValue.values(fromPropertyList: data, source: "XML")) ?? [:]
        return (data, values.keys.sorted().filter { back[$0] != values[$0] })
    }

    static func `import`(_ invocation: Invocation) throws {
        let (domain, file) = (invocation.positionals[0], invocation.positionals[1])
        if !PostgresDomain.isRequested(invocation) { try checkName(domain) }
        let data =
            file == "-"
            ? try invocation.console.readInput(BoundedInput.importLimit)
            : try BoundedInput.read(path: file, limit: BoundedInput.importLimit)
        let source = file == "-" ? "standard input" : file
        let values: [String: PrefValue]
        do {
            values =
                PrefValue.isPropertyList(data)
                ? try PrefValue.values(fromPropertyList: data, source: source)
                : try PrefValue.values(fromJSONDocument: data, source: source)
        } catch let error as PrefsError {
            throw Failure.usage(
                "\(invocation.command): \(error.description); domain \(String(reflecting: domain)) was not changed")
        }
        if PostgresDomain.isRequested(invocation) {
            try PostgresDomain.open(domain, invocation).replaceAll(values)
            return
        }
        try SchemaCommands.checkImport(values, domain: domain, invocation)
        // Keys an app cannot write (empty, or with NUL) are kept: files other tools wrote may have them.
        try SuiteFileStore(suiteName: domain).replaceAllAsImported(values)
    }

    static func watch(_ invocation: Invocation) async throws {
        let domain = invocation.positionals[0]
        let keys = Array(invocation.positionals.dropFirst())
        let store: any KeyValueStore
        if PostgresDomain.isRequested(invocation) {
            store = try PostgresDomain.open(domain, invocation)
        } else {
            try checkName(domain)
            store = try SuiteFileStore(suiteName: domain)
        }
        let changes = store.changedKeys(keys.isEmpty ? nil : Set(keys))
        Terminal.exitCleanlyOnInterrupt()
        let what = keys.isEmpty ? "every key" : keys.map { String(reflecting: $0) }.joined(separator: ", ")
        invocation.console.printError("prefs: watching \(what) of domain \(domain); press Ctrl-C to stop")
        // A change is printed with the value the key holds when it is printed: several quick changes (another
        // process's, seen when this one reads the file again) may show as one line, and a line that would repeat
        // the key's last one is left out.
        var printed: [String: PrefValue?] = [:]
        for await key in changes {
            let value = try store.value(forKey: key)
            if let last = printed[key], last == value { continue }
            printed[key] = .some(value)
            if let value {
                invocation.console.print(
                    "\(ValueText.visible(key)) = \(ValueText.formatInline(value)) (\(value.typeName))")
            } else {
                invocation.console.print("\(ValueText.visible(key)) removed")
            }
        }
    }
}
