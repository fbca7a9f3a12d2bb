import Foundation
import Prefs

/// The `prefs secure` commands over an encrypted vault (``EncryptedFileStore``).
enum SecureCommands {
    /// The options every `prefs secure` command takes: which vault, and how to get its key.
    static let vaultOptions: [Option] = [
        .value("--vault", "PATH", "the vault file (default: the vault of --app)"),
        .value("--app", "ID", "use the default vault of app ID and its key file (default: prefs)"),
        .value("--key-file", "PATH", "read the 32-byte key from PATH"),
        .value("--passphrase-env", "NAME", "read the passphrase from environment variable NAME"),
    ]

    /// Where the vault is, and the key file that goes with it when it is an app's default vault.
    ///
    /// Every `prefs secure` command starts here, so this is also where the process stops being dumpable (no core
    /// file, no debugger attach by the same user) before any secret is read.
    static func location(_ invocation: Invocation) throws -> (vault: URL, defaultKeyFile: URL?) {
        Terminal.protectSecrets()
        if let vault = invocation["--vault"] {
            if invocation["--app"] != nil {
                throw Failure.usage("\(invocation.command): give either --vault or --app, not both")
            }
            return (URL(filePath: vault), nil)
        }
        let app = invocation["--app"] ?? "prefs"
        guard !app.isEmpty, !app.contains("/"), !app.contains("..") else {
            throw Failure.usage("\(invocation.command): --app needs an identifier such as com.example.notes")
        }
        // The identifier is a folder name: one a file name cannot hold would silently become the `prefs` vault.
        guard (try? UserDefaultsStore.validate(suiteName: app)) != nil else {
            throw Failure.usage(
                "\(invocation.command): --app is \(app.utf8.count) bytes, longer than a folder name can be; "
                    + "use a shorter identifier such as com.example.notes")
        }
        let location = EncryptedFileStore.defaultLocation(appIdentifier: app)
        return (location.vault, location.keyFile)
    }

    /// The key from `--key-file` or `--passphrase-env` (or their `--new-…` forms), else the default key file,
    /// else a passphrase typed on the terminal (twice when `confirm`).
    static func key(
        _ invocation: Invocation, prefix: String = "", defaultKeyFile: URL?, confirm: Bool, prompt: String
    ) throws -> VaultKey {
        let file = invocation["--\(prefix)key-file"]
        let variable = invocation["--\(prefix)passphrase-env"]
        if file != nil, variable != nil {
            throw Failure.usage(
                "\(invocation.command): give either --\(prefix)key-file or --\(prefix)passphrase-env, not both")
        }
        if let file { return .keyFile(URL(filePath: file)) }
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
    static func open(_ invocation: Invocation) throws -> EncryptedFileStore {
        let (vault, defaultKeyFile) = try location(invocation)
        let path = vault.path(percentEncoded: false)
        guard FileManager.default.fileExists(atPath: path) else {
            throw Failure.notFound(
                "\(invocation.command): no vault at \(path); create one with `prefs secure init`")
        }
        let key = try key(
            invocation, defaultKeyFile: defaultKeyFile, confirm: false, prompt: "Passphrase for \(path): ")
        return try EncryptedFileStore(url: vault, key: key)
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
        try store.rekey(to: key)  // seals the empty vault, creating the file (and a missing key file)
        var protection = "a passphrase"
        if case .keyFile(let url) = key { protection = "key file " + url.path(percentEncoded: false) }
        invocation.console.print("created vault \(path), protected by \(protection)")
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
        let newKey = try key(
            invocation, prefix: "new-", defaultKeyFile: nil, confirm: true,
            prompt: "New passphrase for \(store.url.path(percentEncoded: false)): ")
        try store.rekey(to: newKey)
        var protection = "a new passphrase"
        if case .keyFile(let url) = newKey { protection = "key file " + url.path(percentEncoded: false) }
        invocation.console.print("vault \(store.url.path(percentEncoded: false)) is now protected by \(protection)")
    }
}
