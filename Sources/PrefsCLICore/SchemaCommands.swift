import Foundation
import Prefs

/// The commands that use a domain's published schema (the keys its app declared): `list-keys`, `describe`, `range`,
/// `check`, `reset`, `schema`, and the checks of `write` and `export --non-default`.
enum SchemaCommands {
    static let ignoreSchemaFlag = Option.flag("--ignore-schema", "write without the schema's type and checks")
    static let nonDefaultFlag = Option.flag("--non-default", "only the values that differ from the schema's defaults")
    static let jsonSchemaFlag = Option.flag("--json-schema", "print a JSON Schema (2020-12) of `prefs export` JSON")
    static let installOption = Option.value(
        "--install", "DATADIR", "write the schema to DATADIR/prefs/schemas/DOMAIN.json (DATADIR: /usr/share, …)")
    static let allFlag = Option.flag("--all", "reset every key of the domain")

    /// The schema of `domain` found in the schema folders; problems with its files are said on standard error, once
    /// each, and never stop the command.
    static func load(_ domain: String, _ invocation: Invocation) -> DomainSchema? {
        let (schema, problems, _) = SchemaFiles.load(domain: domain)
        for problem in problems { invocation.console.printError("prefs: warning: \(problem)") }
        return schema
    }

    /// The schema of `domain`, or "not found" saying where schemas are looked for and how one gets there.
    static func require(_ domain: String, _ invocation: Invocation) throws -> DomainSchema {
        try DomainCommands.checkName(domain)
        let (found, problems, _) = SchemaFiles.load(domain: domain)
        // Its only schema file cannot be used (damaged, contradicting itself): that, not a missing schema, is the news.
        if found == nil, let problem = problems.first(where: { !$0.isNewer }) {
            throw Failure(
                .integrity,
                "\(invocation.command): \(problem); fix the file, or remove it and let the app publish its schema again"
            )
        }
        for problem in problems { invocation.console.printError("prefs: warning: \(problem)") }
        guard let schema = found else {
            let folders = ([SchemaFiles.userFolder] + SchemaFiles.systemFolders).map { $0.path(percentEncoded: false) }
            throw Failure.notFound(
                "\(invocation.command): no schema for domain \(String(reflecting: domain)) in "
                    + folders.joined(separator: ", ")
                    + "; the app publishes one with PrefsConfig.publishSchema(), or its package installs one")
        }
        return schema
    }

    /// The key's entry, or "not found" suggesting the closest declared key.
    static func entry(_ key: String, of schema: DomainSchema, _ invocation: Invocation) throws -> KeyDescription {
        guard let entry = schema.keys[key] else {
            throw Failure.notFound(
                "\(invocation.command): domain \(String(reflecting: schema.domain)) declares no key "
                    + "\(String(reflecting: key))\(Hints.didYouMean(key, among: schema.keys.keys)); run "
                    + "`prefs list-keys \(Hints.shellQuoted(schema.domain))` to list them")
        }
        return entry
    }

    // MARK: list-keys, describe, range

    static func listKeys(_ invocation: Invocation) throws {
        let schema = try require(invocation.positionals[0], invocation)
        let rows = schema.keys.keys.sorted().map { name -> (String, String, String) in
            let entry = schema.keys[name]!
            return (ValueText.visible(name), typeText(entry), defaultText(entry))
        }
        let nameWidth = rows.map(\.0.count).max() ?? 0
        let typeWidth = rows.map(\.1.count).max() ?? 0
        for (name, type, value) in rows {
            invocation.console.print(
                name.padding(toLength: nameWidth, withPad: " ", startingAt: 0) + "  "
                    + type.padding(toLength: typeWidth, withPad: " ", startingAt: 0) + "  " + value)
        }
    }

    /// Prints nothing until every line is known: a failure (a damaged domain file) leaves standard output empty.
    static func describe(_ invocation: Invocation) throws {
        let (domain, key) = (invocation.positionals[0], invocation.positionals[1])
        let schema = try require(domain, invocation)
        let entry = try entry(key, of: schema, invocation)
        let store = try SuiteFileStore(suiteName: domain)
        let read = try appValue(
            key, entry, store, schema: schema, appArguments: Array(invocation.positionals.dropFirst(2)))
        var lines = [
            "key: \(ValueText.visible(key))",
            "type: \(entry.type == nil && entry.shape == nil ? "not declared" : typeText(entry))",
            "default: "
                + (entry.isComputed
                    ? "computed by the app each time no layer holds a value (never stored)"
                    : entry.defaultValue.map(ValueText.formatInline) ?? "none (nothing stored reads as nil)"),
            "allowed: "
                + (entry.allowed.map { ValueText.visible($0.text) }
                    ?? (typeText(entry) == entry.type ? "any \(entry.type ?? "value")" : "any value of its type")),
        ]
        if let reason = entry.shape?.unknownReason {
            lines.append("checked: no; prefs cannot tell which values the app reads: \(ValueText.visible(reason))")
        }
        if !entry.summary.isEmpty { lines.append("description: \(ValueText.visible(entry.summary))") }
        lines.append("value: \(read.text)")
        lines.append("set by: \(read.source)")
        for line in lines { invocation.console.print(line) }
    }

    /// What the app reads for a declared key, as `describe` and `read` show it: the value (with the stored value the
    /// default stands in for, when the app cannot read it), where it comes from, and the value itself.
    struct AppValue {
        /// The value the app reads, in stored form; nil when it reads nil or a default prefs cannot know.
        let value: PrefValue?
        let text: String
        let source: String
        /// The stored value the app does not read, and why, when the default stands in for it.
        let refused: (value: PrefValue, problem: String)?
        /// Why prefs cannot tell whether the app reads the value, when it cannot.
        let unknown: String?
    }

    /// The value the app reads for `key`; throws when the domain's file cannot be read (damaged, unreadable).
    static func appValue(
        _ key: String, _ entry: KeyDescription, _ store: SuiteFileStore, schema: DomainSchema,
        appArguments: [String] = []
    ) throws -> AppValue {
        _ = try store.allValues()  // a damaged file fails here, as the app's store reports it
        let fallback =
            entry.isComputed
            ? "the default the app computes" : entry.defaultValue.map(ValueText.formatInline) ?? "nil"
        guard let (value, layer) = try currentValue(key, entry, store, schema: schema, appArguments: appArguments)
        else {
            return AppValue(
                value: entry.defaultValue, text: fallback, source: "default (the app's declaration)", refused: nil,
                unknown: nil)
        }
        switch entry.read(value) {
        case .reads(let read):
            return AppValue(
                value: read, text: read.map(ValueText.formatInline) ?? "nil", source: layer, refused: nil, unknown: nil)
        case .unknown(let reason):
            return AppValue(
                value: value, text: ValueText.formatInline(value), source: layer, refused: nil, unknown: reason)
        case .refused(let mismatch):
            let problem = phrase(mismatch, key: key)
            return AppValue(
                value: entry.defaultValue,
                text: "\(fallback) (the default, read in place of \(ValueText.formatInline(value)), which \(problem))",
                source: layer, refused: (value, problem), unknown: nil)
        }
    }

    /// A refusal as a message says it: `is not allowed (from 8 to 72)`, or where inside the value and why (`does
    /// not read as the app's type: windowFrame.width: expected an integer`).
    static func phrase(_ mismatch: ShapeMismatch, key: String) -> String {
        if mismatch.path.isEmpty, mismatch.reason.hasPrefix("is ") { return ValueText.visible(mismatch.reason) }
        return "does not read as the app's type: " + ValueText.visible("\(key)\(mismatch.path): \(mismatch.reason)")
    }

    /// The type column of `list-keys` and the `type:` line of `describe`: the stored type (`int`), or what the app's
    /// type reads where that says more (`[String]`, `JSON {x: Int, y: Int}`), or that prefs cannot check it.
    static func typeText(_ entry: KeyDescription) -> String {
        let stored = entry.type ?? "?"
        guard let shape = entry.shape else { return stored }
        if shape.unknownReason != nil { return "\(stored) (unchecked)" }
        switch (entry.route?.form, shape) {
        case (.json?, _): return "JSON " + shape.text
        case (_, .array), (_, .dictionary): return shape.text
        default: return stored
        }
    }

    /// The default column of `list-keys`.
    static func defaultText(_ entry: KeyDescription) -> String {
        if entry.isComputed { return "(computed)" }
        return entry.defaultValue.map(ValueText.formatInline) ?? "(none)"
    }

    /// The value the app reads for `key` and the layer it comes from, strongest first: managed, the app's command
    /// line (given after `--`), its environment variable (when the schema names the app's prefix and the variable
    /// is set here), the user's file, a system-wide default. Nil when none holds it: the declared default. Text
    /// from the command line and the environment is as given: reading it as the declared type is the app's read.
    static func currentValue(
        _ key: String, _ entry: KeyDescription, _ store: SuiteFileStore, schema: DomainSchema,
        appArguments: [String]
    ) throws -> (PrefValue, String)? {
        if let forced = try store.allValues(in: .managed)[key] {
            return (forced, "managed (forced by the administrator)")
        }
        if let text = LayerSources.arguments(["app"] + appArguments)[key] {
            return (text, "argument (the command line after --)")
        }
        if let prefix = schema.environmentPrefix {
            let name = LayerSources.environmentName(forKey: key, prefix: prefix)
            let found = LayerSources.environment(ProcessInfo.processInfo.environment, prefix: prefix, keys: [key])
            if let value = found.values[key] { return (value, "environment (\(name))") }
        }
        if let own = try store.allValues()[key] {
            return (own, "user (\(store.url.path(percentEncoded: false)))")
        }
        if let system = try store.allValues(in: .systemDefaults)[key] {
            return (system, "system-wide default ($XDG_CONFIG_DIRS)")
        }
        return nil
    }

    /// The type `prefs write` parses a value of the key as.
    static func valueType(of entry: KeyDescription) -> ValueType? {
        switch entry.type {
        case "bool": .bool
        case "int": .int
        case "double": .float
        case "float": .singleFloat
        case "string": .string
        case "date": .date
        case "data": .data
        case "array", "dictionary": .json
        default: nil
        }
    }

    /// As `gsettings range`: `range int 8 72`, `enum` then one choice a line, or `type int` when any value of the
    /// type goes.
    static func range(_ invocation: Invocation) throws {
        let (domain, key) = (invocation.positionals[0], invocation.positionals[1])
        let entry = try entry(key, of: try require(domain, invocation), invocation)
        let type = entry.type ?? "any"
        switch entry.allowed {
        case .range(let lower, let upper)?:
            invocation.console.print("range \(type) \(ValueText.formatInline(lower)) \(ValueText.formatInline(upper))")
        case .choices(let choices)?:
            invocation.console.print("enum")
            for choice in choices { invocation.console.print(quoted(choice)) }
        case nil:
            invocation.console.print("type \(type)")
        }
    }

    /// A choice as `gsettings range` prints one: text in single quotes (a quote inside escaped), others bare.
    private static func quoted(_ value: PrefValue) -> String {
        guard case .string(let text) = value else { return ValueText.formatInline(value) }
        return "'" + ValueText.visible(text).replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    // MARK: write, check, reset, export

    /// Before `write` changes `key`: the schema's entry of the key, which gives the type of a value written without
    /// `--type` (with `--ignore-schema` too: the app reads that type) and is checked against the value written
    /// (unless `--ignore-schema`). Nil without a schema, for a key it does not declare, and with `--postgres-env`.
    static func entryForWrite(_ domain: String, _ key: String, _ invocation: Invocation) -> KeyDescription? {
        guard !PostgresDomain.isRequested(invocation) else { return nil }
        return load(domain, invocation)?.keys[key]
    }

    /// Refuses a value the app would not read (`--ignore-schema` writes it anyway), as its read would refuse it: one
    /// outside the range or choices naming what is allowed, one the app's type cannot read naming the place inside it
    /// that fails (`windowFrame.width: expected an integer`). A key whose reading the schema cannot describe is
    /// written unchecked, and said to be.
    static func check(_ value: PrefValue, _ entry: KeyDescription?, key: String, _ invocation: Invocation) throws {
        guard !invocation.has("--ignore-schema"), let entry else { return }
        let mismatch: ShapeMismatch
        switch entry.read(value) {
        case .reads: return
        case .unknown(let reason):
            invocation.console.printError(
                "\(invocation.command): warning: \(String(reflecting: key)) is written unchecked: prefs cannot tell "
                    + "which values the app reads (\(ValueText.visible(reason)))")
            return
        case .refused(let refused): mismatch = refused
        }
        let shown = ValueText.visible(AllowedValueText.shown(value))
        guard mismatch.path.isEmpty, mismatch.reason.hasPrefix("is ") else {
            throw Failure.usage(
                "\(invocation.command): \(ValueText.visible("\(key)\(mismatch.path): \(mismatch.reason)")); the app "
                    + "cannot read the value (its schema says so); nothing was changed")
        }
        let isRange = mismatch.reason.hasPrefix("is not allowed")
        let next =
            isRange
            ? " (--ignore-schema writes it anyway, and the app then reads the default "
                + "\(entry.defaultValue.map(ValueText.formatInline) ?? "nil") in its place)"
            : "; give \(valueType(of: entry)?.expected ?? "a value of that type")"
        throw Failure.usage(
            "\(invocation.command): \(shown) for \(String(reflecting: key)) \(ValueText.visible(mismatch.reason)) in "
                + "the app's schema; nothing was changed\(next)")
    }

    /// Before `import` replaces a domain whose app published a schema: refuses the whole file when the app cannot read
    /// one of its values (each said on a line of its own), unless `--ignore-schema`; says which values it cannot check.
    static func checkImport(_ values: [String: PrefValue], domain: String, _ invocation: Invocation) throws {
        guard !invocation.has("--ignore-schema"), let schema = load(domain, invocation) else { return }
        var refused: [String] = []
        for key in values.keys.sorted() {
            guard let entry = schema.keys[key] else { continue }
            switch entry.read(values[key]!) {
            case .reads: continue
            case .refused(let mismatch):
                refused.append(
                    "\(ValueText.visible(key)) = \(ValueText.formatInline(values[key]!)) \(phrase(mismatch, key: key))")
            case .unknown(let reason):
                invocation.console.printError(
                    "\(invocation.command): warning: \(String(reflecting: key)) is imported unchecked: prefs cannot "
                        + "tell which values the app reads (\(ValueText.visible(reason)))")
            }
        }
        guard !refused.isEmpty else { return }
        for line in refused { invocation.console.printError("\(invocation.command): \(line)") }
        throw Failure.usage(
            "\(invocation.command): the app cannot read \(refused.count) value\(refused.count == 1 ? "" : "s") of the "
                + "file (its schema says so); domain \(String(reflecting: domain)) was not changed (--ignore-schema "
                + "imports it anyway)")
    }

    /// Every value of the user's file, the system-wide defaults and the managed values that the app cannot read, one
    /// line each, and each it cannot be checked against (a type that decodes itself); fails when there is any.
    static func checkDomain(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        let schema = try require(domain, invocation)
        let store = try SuiteFileStore(suiteName: domain)
        let user = try store.allValues()
        var problems = 0
        var unchecked = 0
        for (layer, name) in [(PreferenceLayer.user, "user"), (.systemDefaults, "system-wide"), (.managed, "managed")] {
            let values = layer == .user ? user : try store.allValues(in: layer)
            for key in values.keys.sorted() {
                guard let entry = schema.keys[key] else { continue }
                let line = "\(name): \(ValueText.visible(key)) = \(ValueText.formatInline(values[key]!))"
                switch entry.read(values[key]!) {
                case .reads: continue
                case .refused(let mismatch):
                    problems += 1
                    invocation.console.print("\(line) \(phrase(mismatch, key: key))")
                case .unknown(let reason):
                    unchecked += 1
                    invocation.console.print(
                        "\(line) cannot be checked: prefs cannot tell which values the app reads "
                            + "(\(ValueText.visible(reason)))")
                }
            }
        }
        if problems > 0 {
            throw Failure.notFound(
                "\(invocation.command): \(problems) value\(problems == 1 ? "" : "s") of domain "
                    + "\(String(reflecting: domain)) do\(problems == 1 ? "es" : "") not fit the schema; the app reads "
                    + "the default in their place")
        }
        if unchecked > 0 {
            throw Failure.notFound(
                "\(invocation.command): \(unchecked) value\(unchecked == 1 ? "" : "s") of domain "
                    + "\(String(reflecting: domain)) could not be checked: the schema cannot say what the app reads")
        }
    }

    static func reset(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        try DomainCommands.checkName(domain)
        let key = invocation.positionals.count == 2 ? invocation.positionals[1] : nil
        guard (key == nil) == invocation.has("--all") else {
            throw Failure.usage("\(invocation.command): give a KEY or --all, not both; usage: prefs reset DOMAIN KEY")
        }
        let store = try SuiteFileStore(suiteName: domain)
        guard let key else {
            let keys = try store.allValues().keys.filter { !store.isForced($0) }
            try store.removeValues(forKeys: keys)
            return
        }
        let schema = load(domain, invocation)
        if try store.value(forKey: key) == nil, schema?.keys[key] == nil {
            let keys = Set(try store.allValues().keys).union(schema?.keys.keys ?? [:].keys)
            let list =
                schema == nil
                ? "`prefs read \(Hints.shellQuoted(domain))` to list its keys"
                : "`prefs list-keys \(Hints.shellQuoted(domain))` to list the keys the app declares"
            throw Failure.notFound(
                "\(invocation.command): domain \(String(reflecting: domain)) neither stores nor declares a key "
                    + "\(String(reflecting: key))\(Hints.didYouMean(key, among: keys)); run \(list)")
        }
        try store.removeValue(forKey: key)
    }

    /// Of `values`, those that differ from the schema's defaults (keys it does not declare are kept).
    static func nonDefault(_ values: [String: PrefValue], domain: String, _ invocation: Invocation) throws
        -> [String: PrefValue]
    {
        let schema = try require(domain, invocation)
        return values.filter { key, value in schema.keys[key]?.defaultValue != value }
    }

    // MARK: schema

    static func schema(_ invocation: Invocation) throws {
        let domain = invocation.positionals[0]
        let schema = try require(domain, invocation)
        if let dataFolder = invocation["--install"] {
            let folder = SchemaFiles.folder(in: URL(filePath: dataFolder, directoryHint: .isDirectory))
            let url = folder.appending(path: domain + ".json")
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                try schema.jsonDocument().write(to: url, options: .atomic)
            } catch {
                throw Failure.notFound(
                    "\(invocation.command): cannot write \(url.path(percentEncoded: false)): "
                        + (error as NSError).localizedDescription)
            }
            invocation.console.print("installed \(url.path(percentEncoded: false))")
            return
        }
        if invocation.has("--json-schema") {
            invocation.console.writeData(try JSONSchemaDocument.data(for: schema))
            return
        }
        invocation.console.writeData(try schema.jsonDocument())
    }
}

/// How a value is named in a message: text quoted, anything else as `prefs read` prints it.
enum AllowedValueText {
    static func shown(_ value: PrefValue) -> String {
        if case .string(let text) = value { return String(reflecting: text) }
        return ValueText.format(value)
    }
}
