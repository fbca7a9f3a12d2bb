import Foundation
import Prefs

#if canImport(PrefsKeyring)
    import PrefsKeyring
#endif

/// The `prefs secure` commands over an encrypted vault (``EncryptedFileStore``).
enum SecureCommands {
    /// The options every `prefs secure` command takes: which vault, and how to get its key.
    static let vaultOptions: [Option] = [
        .value("--vault", "PATH", "the vault file (default: the vault of --app)"),
        .value("--app", "ID", "use the default vault of app ID and its key file (default: prefs)"),
        .value("--key-file", "PATH", "read the 32-byte key from PATH"),
        .value("--passphrase-env", "NAME", "read the passphrase from environment variable NAME"),
        .flag("--keyring", "the key is in the desktop keyring (Secret Service), under --app and the vault's path"),
        .value("--credential", "NAME", "read the key from the systemd credential NAME ($CREDENTIALS_DIRECTORY/NAME)"),
    ]

    /// The options of the key a vault moves to (`rekey`, `move-key`).
    static let newKeyOptions: [Option] = [
        .value("--new-key-file", "PATH", "the new key file (created when it does not exist)"),
        .value("--new-passphrase-env", "NAME", "read the new passphrase from environment variable NAME"),
        .flag("--new-keyring", "keep the new key in the desktop keyring (created there when missing)"),
        .value("--new-credential", "NAME", "the new key is the systemd credential NAME"),
    ]

    /// Where the vault is, and the key file that goes with it when it is an app's default vault.
    ///
    /// Every `prefs secure` command starts here, so this is also where the process stops being dumpable (no core
    /// file, no debugger attach by the same user) before any secret is read.
    static func location(_ invocation: Invocation) throws -> (vault: URL, defaultKeyFile: URL?) {
        Terminal.protectSecrets()
        let app = try appIdentifier(invocation)
        if let vault = invocation["--vault"] {
            // With the keyring, --app names the app whose item holds the key of this vault.
            if invocation["--app"] != nil, !invocation.has("--keyring"), !invocation.has("--new-keyring") {
                throw Failure.usage(
                    "\(invocation.command): give either --vault or --app, not both (unless with --keyring)")
            }
            return (URL(filePath: vault), nil)
        }
        // The identifier is a folder name: one a file name cannot hold would silently become the `prefs` vault.
        guard (try? SuiteFileStore.validate(suiteName: app)) != nil else {
            throw Failure.usage(
                "\(invocation.command): --app is \(app.utf8.count) bytes, longer than a folder name can be; "
                    + "use a shorter identifier such as com.example.notes")
        }
        let location = EncryptedFileStore.defaultLocation(appIdentifier: app)
        return (location.vault, location.keyFile)
    }

    /// `--app`, by default `prefs`: the folder of the app's default vault, and the application of its keyring item.
    private static func appIdentifier(_ invocation: Invocation) throws -> String {
        let app = invocation["--app"] ?? "prefs"
        guard !app.isEmpty, !app.contains("/"), !app.contains("..") else {
            throw Failure.usage("\(invocation.command): --app needs an identifier such as com.example.notes")
        }
        return app
    }

    /// The key from `--key-file`, `--passphrase-env`, `--keyring` or `--credential` (or their `--new-…` forms), else
    /// the default key file, else a passphrase typed on the terminal (twice when `confirm`).
    static func key(
        _ invocation: Invocation, prefix: String = "", defaultKeyFile: URL?, confirm: Bool, prompt: String
    ) throws -> VaultKey {
        let file = invocation["--\(prefix)key-file"]
        let variable = invocation["--\(prefix)passphrase-env"]
        let credential = invocation["--\(prefix)credential"]
        let keyring = invocation.has("--\(prefix)keyring")
        let given = [file != nil, variable != nil, credential != nil, keyring].filter { $0 }.count
        if given > 1 {
            throw Failure.usage(
                "\(invocation.command): give one of --\(prefix)key-file, --\(prefix)passphrase-env, "
                    + "--\(prefix)keyring and --\(prefix)credential")
        }
        if let file { return .keyFile(URL(filePath: file)) }
        if keyring {
            #if canImport(PrefsKeyring)
                return .keyring(appIdentifier: try appIdentifier(invocation))
            #else
                throw Failure.usage(
                    "\(invocation.command): --\(prefix)keyring reaches the desktop keyring of Linux (the Secret "
                        + "Service), which this platform has not; use --\(prefix)key-file PATH or "
                        + "--\(prefix)passphrase-env NAME")
            #endif
        }
        if let credential { return .credential(credential) }
        if let variable {
            guard let passphrase = invocation.console.environment[variable], !passphrase.isEmpty else {
                throw Failure.usage(
                    "\(invocation.command): environment variable \(variable) is not set or empty; "
                        + "export the passphrase in it first")
            }
            return .passphrase(passphrase)
        }
        if let defaultKeyFile { return .keyFile(defaultKeyFile) }
        let passphrase: String
        do {
            passphrase = try invocation.console.readSecret(prompt)
        } catch let failure as Failure {
            throw Failure(failure.status, "\(invocation.command): cannot ask for the passphrase: " + failure.message)
        }
        guard !passphrase.isEmpty else { throw Failure.usage("\(invocation.command): the passphrase is empty") }
        if confirm, try invocation.console.readSecret("Repeat the passphrase: ") != passphrase {
            throw Failure.usage("\(invocation.command): the two passphrases differ; nothing was changed")
        }
        return .passphrase(passphrase)
    }

    /// Opens an existing vault, authenticating it; a missing vault is "not found".
    static func open(_ invocation: Invocation) throws -> EncryptedFileStore { try openWithKey(invocation).store }

    /// Opens an existing vault as ``open(_:)`` does, returning the key it was opened with too.
    static func openWithKey(_ invocation: Invocation) throws -> (store: EncryptedFileStore, key: VaultKey) {
        let (vault, defaultKeyFile) = try location(invocation)
        let path = vault.path(percentEncoded: false)
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure.notFound(
                "\(invocation.command): no vault at \(path); create one with `prefs secure init`")
        }
        // A vault records the kind of place its key is kept in: opened with another kind, it is named before anything
        // else is tried (a passphrase prompt, a missing key file's error).
        if let recorded = EncryptedFileStore.recordedKeyKind(ofVaultAt: path), let given = givenKind(invocation),
            recorded != given, let option = option(for: recorded, invocation)
        {
            let same = Hints.repeated(["--vault", "--app"], of: invocation)
            let subcommand = invocation.command.split(separator: " ").last.map(String.init) ?? ""
            throw Failure(
                .integrity,
                "\(invocation.command): the key of vault \(path) is kept in \(recorded.phrase), not in "
                    + "\(given.phrase); run `prefs secure \(subcommand)\(same) \(option)`")
        }
        let key = try key(
            invocation, defaultKeyFile: defaultKeyFile, confirm: false, prompt: "Passphrase for \(path): ")
        return (try EncryptedFileStore(url: vault, key: key), key)
    }

    /// The kind of key the options of `invocation` give (a key file when none is named).
    private static func givenKind(_ invocation: Invocation) -> VaultKeyKind? {
        if invocation.has("--keyring") { return .keyring }
        if invocation["--credential"] != nil { return .credential }
        if invocation["--passphrase-env"] != nil { return .passphrase }
        if invocation["--key-file"] != nil || invocation["--vault"] == nil { return .keyFile }
        return .passphrase  // a vault named by path with no key option: the passphrase is asked for
    }

    /// The option that gives a key of `kind`, as a user types it; nil for keys the tool cannot reach (an app's own
    /// source or raw key) or a kind the vault does not record.
    private static func option(for kind: VaultKeyKind, _ invocation: Invocation) -> String? {
        switch kind {
        case .keyFile: "--key-file PATH"
        case .keyring where invocation["--app"] == nil && invocation["--vault"] != nil: "--keyring --app ID"
        case .keyring: "--keyring"
        case .credential: "--credential NAME"
        case .passphrase: "--passphrase-env NAME"
        case .source, .raw, .unrecorded: nil
        }
    }

    /// The secret is not there; the suggested `prefs secure list` names the same vault and key as this command did
    /// (without them it would open another vault, or ask for a passphrase).
    static func notFound(_ name: String, _ invocation: Invocation) -> Failure {
        let same = Hints.repeated(vaultOptions.map(\.name), of: invocation)
        return .notFound(
            "\(invocation.command): no secret named \(String(reflecting: name)); run `prefs secure list\(same)` for the "
                + "names")
    }

    static func initialize(_ invocation: Invocation) throws {
        let (vault, defaultKeyFile) = try location(invocation)
        let path = vault.path(percentEncoded: false)
        if FileManager.default.fileExists(atPath: path) {
            throw Failure.usage(
                "\(invocation.command): a vault already exists at \(path); nothing was changed "
                    + "(use `prefs secure verify` to check it, `prefs secure rekey` to change its key)")
        }
        let key = try key(
            invocation, defaultKeyFile: defaultKeyFile, confirm: true, prompt: "New passphrase for \(path): ")
        let store = try EncryptedFileStore(url: vault, key: key)
        try store.rekey(to: key)  // seals the empty vault, creating the file (and a missing key file or item)
        invocation.console.print("created vault \(path), protected by \(protection(key, vault: path))")
    }

    /// How a message names a key: `key file PATH`, `a passphrase`, the keyring (with the command that shows its item
    /// unless `removed`).
    private static func protection(_ key: VaultKey, vault: String, removed: Bool = false) -> String {
        switch key {
        case .keyFile(let url): "key file " + url.path(percentEncoded: false)
        case .passphrase: "a passphrase"
        case .raw: "a raw key"
        #if canImport(PrefsKeyring)
            case .source(let source as KeyringKey) where !removed:
                "\(source) (see it with `secret-tool search application \(source.appIdentifier ?? "prefs") vault "
                    + "\(URL(filePath: vault).standardizedFileURL.path(percentEncoded: false))`)"
        #endif
        case .source(let source): "\(source)"
        }
    }

    static func set(_ invocation: Invocation) throws {
        let name = invocation.positionals[0]
        let explicit = try invocation["--type"].map(ValueType.init(option:))
        let store = try open(invocation)
        let typed = invocation.console.inputIsTerminal
        var bytes: [UInt8]
        if typed {
            bytes = Array(try invocation.console.readSecret("Value for \(name): ").utf8)
        } else {
            bytes = Array(try invocation.console.readInput(BoundedInput.secretLimit))
        }
        defer { bytes.withUnsafeMutableBytes { Terminal.wipe($0) } }
        let allowEmpty = invocation.has("--allow-empty")
        try store.updateValue(forKey: name) { old in
            let type = explicit ?? old.map(ValueType.init(of:)) ?? .string
            // Data from a pipe is stored byte for byte: standard input is the only way to give bytes that are not text.
            if type == .data, !typed {
                guard !bytes.isEmpty || allowEmpty else { throw emptyValue(invocation) }
                return .data(Data(bytes))
            }
            guard var text = String(validating: bytes, as: UTF8.self) else {
                throw Failure.usage(
                    "\(invocation.command): standard input is not valid UTF-8 text; pass --type data to store its "
                        + "bytes as they are; nothing was changed")
            }
            if !typed, text.hasSuffix("\n") { text.removeLast() }  // "\r\n" is one Character
            guard !text.isEmpty || allowEmpty else { throw emptyValue(invocation) }
            guard let value = ValueText.parse(text, as: type) else {
                throw Failure.usage(
                    "\(invocation.command): the value given is not \(type.phrase): expected \(type.expected); "
                        + "nothing was changed")
            }
            return value
        }
    }

    /// An empty value is refused unless asked for: it usually means the command feeding standard input failed.
    private static func emptyValue(_ invocation: Invocation) -> Failure {
        .usage(
            "\(invocation.command): the value is empty (did the command feeding standard input fail?); "
                + "pass --allow-empty to store an empty value; nothing was changed")
    }

    static func get(_ invocation: Invocation) throws {
        let name = invocation.positionals[0]
        let store = try open(invocation)
        guard let value = try store.value(forKey: name) else { throw notFound(name, invocation) }
        guard invocation.has("--reveal") else {
            invocation.console.print("\(name) is set (\(value.typeName)); add --reveal to print its value")
            return
        }
        invocation.console.print(invocation.has("--json") ? try value.jsonText() : ValueText.format(value))
    }

    static func delete(_ invocation: Invocation) throws {
        let name = invocation.positionals[0]
        let store = try open(invocation)
        try store.updateValue(forKey: name) { old in
            guard old != nil else { throw notFound(name, invocation) }
            return nil
        }
    }

    static func list(_ invocation: Invocation) throws {
        let store = try open(invocation)
        for name in try store.allValues().keys.sorted() { invocation.console.print(name) }
    }

    static func verify(_ invocation: Invocation) throws {
        let store = try open(invocation)
        let count = try store.allValues().count
        // The store has reported it on stderr already; verify fails because an older copy would go unnoticed.
        if let problem = store.rollbackRecordProblem { throw Failure.from(problem) }
        invocation.console.print(
            "vault \(store.url.path(percentEncoded: false)) opens and authenticates: "
                + "\(count) secret\(count == 1 ? "" : "s")")
    }

    static func rekey(_ invocation: Invocation) throws {
        let store = try open(invocation)
        let path = store.url.path(percentEncoded: false)
        let newKey = try key(
            invocation, prefix: "new-", defaultKeyFile: nil, confirm: true, prompt: "New passphrase for \(path): ")
        try store.rekey(to: newKey)
        var protection = protection(newKey, vault: path)
        if case .passphrase = newKey { protection = "a new passphrase" }
        invocation.console.print("vault \(path) is now protected by \(protection)")
    }

    /// `move-key`: re-encrypts the vault under the new key, then removes the old key (key file or keyring item).
    static func moveKey(_ invocation: Invocation) throws {
        guard newKeyOptions.contains(where: { invocation.has($0.name) || invocation[$0.name] != nil }) else {
            throw Failure.usage(
                "\(invocation.command): say where the key moves: --new-keyring, --new-key-file PATH, "
                    + "--new-credential NAME or --new-passphrase-env NAME")
        }
        let (store, oldKey) = try openWithKey(invocation)
        let path = store.url.path(percentEncoded: false)
        let newKey = try key(invocation, prefix: "new-", defaultKeyFile: nil, confirm: true, prompt: "")
        // Asked to move the key where it is already kept: the wish is met, nothing changes.
        if let place = place(of: oldKey, invocation), place == self.place(of: newKey, invocation) {
            invocation.console.print(
                "vault \(path)'s key is already kept in \(protection(oldKey, vault: path, removed: true)); "
                    + "nothing was changed")
            return
        }
        do {
            try store.moveKey(to: newKey)
        } catch VaultError.invalidKey(let reason)
            where reason.hasPrefix("the vault's new key is the key it already had")
        {
            // Two places holding one key (a copied key file): the vault is under it, both are kept.
            invocation.console.print(
                "vault \(path) is now protected by \(protection(newKey, vault: path)), which holds the same key as "
                    + "\(protection(oldKey, vault: path, removed: true)); both were kept (remove the one you do not "
                    + "want yourself)")
            return
        }
        var removed = ""
        switch oldKey {
        case .passphrase, .raw: break
        case .keyFile(let url): removed = "; removed the old key file \(url.path(percentEncoded: false))"
        case .source: removed = "; removed the old key from \(protection(oldKey, vault: path, removed: true))"
        }
        invocation.console.print("vault \(path) is now protected by \(protection(newKey, vault: path))\(removed)")
    }

    /// Where a key is kept, to tell a move to the same place: a key file's path, the keyring of an app, a credential.
    private static func place(of key: VaultKey, _ invocation: Invocation) -> String? {
        switch key {
        case .keyFile(let url): "file " + url.standardizedFileURL.path(percentEncoded: false)
        case .source(let source): "\(source)"
        case .passphrase, .raw: nil
        }
    }
}
