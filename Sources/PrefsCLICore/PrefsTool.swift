import Foundation

/// `prefs`: reads, writes and watches UserDefaults suites and encrypted vaults from the command line.
package enum PrefsTool {
    static let jsonFlag = Option.flag("--json", "print JSON (Prefs' exact JSON form)")
    static let typeOption = Option.value(
        "--type", "TYPE", "bool (or boolean), int (or integer), float (or double), string, date, data or json")

    static let commands: [Command] = [
        Command(
            "domains", arguments: "", positionals: 0...0, options: [jsonFlag, PostgresDomain.option],
            summary: "List the domains (UserDefaults suites) in the preferences folder.",
            help: """
                The folder is $XDG_CONFIG_HOME, or ~/.config when it is unset; each NAME.plist is a domain, and so
                is each app that published a schema (prefs/schemas/NAME.json in the data folders). With
                --postgres-env VAR, the namespaces of the database that hold at least one key.
                """,
            run: { try DomainCommands.domains($0) }),
        Command(
            "read", arguments: "DOMAIN|PATH [KEY]", positionals: 1...2,
            options: [jsonFlag, DomainCommands.typesFlag, DomainCommands.explainFlag, PostgresDomain.option],
            summary: "Print one value bare (true, 42, 0.5, text as is), or the whole domain as `defaults read` does.",
            help: """
                A KEY reads its effective value: the user's, a system-wide default under $XDG_CONFIG_DIRS, or a
                value forced by the administrator in /etc/xdg/managed-preferences; --explain adds the layer it came
                from. A KEY the app's schema declares reads as the app reads it, as `gsettings get` does: its
                declared default when nothing is stored, or in place of a stored value the schema does not allow. Dates print in ISO 8601 (UTC, with as many fraction digits as needed to be exact), data in
                hex, arrays and dictionaries as JSON.
                Without KEY the domain prints as an old-style property list, like `defaults read`; values that
                are not the user's own are marked /* system default */ or /* forced */. --types lists one key
                per line with its type instead (with KEY, that key's line), and --json prints the domain as
                `export` does. A DOMAIN with a / is the path of a property list (or prefs JSON) to read, as
                `defaults read` takes one; `.plist` may be left out.
                """,
            run: { try DomainCommands.read($0) }),
        Command(
            "read-type", arguments: "DOMAIN|PATH KEY", positionals: 2...2,
            summary: "Print the type of KEY's value as `defaults read-type` does: Type is integer, ….", help: "",
            run: { try DomainCommands.readType($0) }),
        Command(
            "write", arguments: "DOMAIN KEY VALUE", positionals: 3...Int.max,
            options: [typeOption, SchemaCommands.ignoreSchemaFlag, PostgresDomain.option],
            summary: "Store VALUE under KEY, creating the domain if needed.",
            help: """
                When the app's schema declares KEY (see `prefs describe`), a VALUE without --type is read as the
                declared type, and a value outside the declared range or choices is refused (--ignore-schema
                writes it anyway, still as the declared type). Otherwise, without --type the type of the value already stored is kept, and a
                new key is a string. A VALUE that does not parse as the type is refused and nothing changes. Types:
                  bool    true, false, yes, no, 1, 0 (`boolean` is the same)
                  int     a 64-bit whole number (unsigned up to 18446744073709551615); `integer` is the same
                  float   a double-precision number (like `defaults`); `double` is the same
                  string  the text as is
                  date    ISO 8601: 2024-05-01T12:30:00Z, 2024-05-01 14:30:00.25+02:00, 2024-05-01 12:00:00 +0000
                  data    hex bytes: cafe01 or 0xCAFE01
                  json    any JSON value but null: [1, 2], {"a": true}, "text"
                Use `--` before a VALUE that starts with `--`.
                The type flags of `defaults` work too, instead of --type: -string, -int (-integer), -float,
                -bool (-boolean), -date, -data, each followed by one value; -array V…, -dict K V…, and -array-add
                V… (appends) and -dict-add K V… (adds entries). Array elements and dictionary values are strings,
                or a one-value flag and its value: -array -int 1 -bool YES text.
                """,
            run: { try DomainCommands.write($0) }),
        Command(
            "rename", arguments: "DOMAIN OLD NEW", positionals: 3...3,
            summary: "Move the value of key OLD to key NEW, in one atomic write.",
            help: "A value already under NEW is replaced.", run: { try DomainCommands.rename($0) }),
        Command(
            "delete", arguments: "DOMAIN [KEY]", positionals: 1...2, options: [PostgresDomain.option],
            summary: "Remove KEY from DOMAIN, or the whole domain.",
            help: "Removing a domain deletes its NAME.plist, under its lock, whatever it holds.",
            run: { try DomainCommands.delete($0) }),
        Command(
            "repair", arguments: "DOMAIN", positionals: 1...1,
            summary: "Keep a DOMAIN file that cannot be read aside (NAME.plist.damaged-DATE) and start it afresh.",
            help:
                "Prints where the damaged file went. A file that reads fine is left as it is (status 0, nothing printed).",
            run: { try DomainCommands.repair($0) }),
        Command(
            "find", arguments: "WORD", positionals: 1...1,
            summary: "Print the keys, in every domain, whose name, value or domain name contains WORD (any case).",
            help: "Exits with status 1 when nothing contains WORD.", run: { try DomainCommands.find($0) }),
        Command(
            "export", arguments: "DOMAIN [PATH]", positionals: 1...2,
            options: [DomainCommands.formatOption, SchemaCommands.nonDefaultFlag, PostgresDomain.option],
            summary: "Write the whole domain, exactly, to PATH or standard output (`-`): `prefs import` reads it back.",
            help: """
                Without PATH: prefs' JSON on standard output. With PATH (`-` is standard output): an XML property
                list, as `defaults export` writes, unless PATH ends in .json. --format json, xml or binary chooses.
                A binary property list keeps every value exactly; XML is refused when it cannot (some floats,
                fractions of a second). In JSON, values JSON has no type for are tagged:
                {"$date": 736255800.5} (seconds since 2001-01-01), {"$data": "yv4="} (base64), {"$float": 0.5}.
                --non-default leaves out the values equal to the defaults of the app's schema (what to carry to
                another machine).
                """,
            run: { try DomainCommands.export($0) }),
        Command(
            "import", arguments: "DOMAIN FILE", positionals: 2...2,
            options: [SchemaCommands.ignoreSchemaFlag, PostgresDomain.option],
            summary: "Replace DOMAIN's content with FILE (`-` reads standard input): JSON or a property list.",
            help: """
                FILE is prefs' JSON or a binary or XML property list, such as a domain's own NAME.plist. All or
                nothing: the whole file is parsed first, then the domain is replaced in one atomic write. Keys that
                are not in FILE are removed. A malformed file changes nothing. At most 64 MiB is read. When the
                app published its schema, a file holding a value the app cannot read is refused, each such value
                named (--ignore-schema imports it anyway).
                """,
            run: { try DomainCommands.import($0) }),
        Command(
            "watch", arguments: "DOMAIN [KEY...]", positionals: 1...Int.max, options: [PostgresDomain.option],
            summary: "Print each change to DOMAIN (or to the KEYs) as it happens, from any process.",
            help: """
                Prints `KEY = VALUE (TYPE)` or `KEY removed` on standard output as changes are seen, until
                interrupted (Ctrl-C or SIGTERM, exit status 0). A line on standard error says when it is ready.
                Each line holds the value the key has when it is printed: changes in quick succession (another
                process's are seen when its write reaches the file) may show as one line, the latest; lines of a
                key come in the order of its changes, never the same line twice in a row.
                """,
            run: { try await DomainCommands.watch($0) }),
        Command(
            "list-keys", arguments: "DOMAIN", positionals: 1...1,
            summary: "List the keys the domain's app declares (its schema), with their types and defaults.",
            help: """
                The schema is the one the app published ($XDG_DATA_HOME/prefs/schemas/DOMAIN.json) or its package
                installed ($XDG_DATA_DIRS/prefs/schemas/DOMAIN.json); a key in both takes the user's entry.
                """,
            run: { try SchemaCommands.listKeys($0) }),
        Command(
            "describe", arguments: "DOMAIN KEY [-- APP-ARGUMENTS…]", positionals: 2...Int.max,
            summary: "Describe a declared key: type, default, allowed values, description, value and where it is set.",
            help: """
                "set by" names the layer the app reads the value from: managed (forced by the administrator),
                argument (with the app's command line given after --), environment (when the app reads variables
                and this shell sets one), user (the domain's file), system-wide default, or default. A value the
                schema does not allow is shown with the default the app reads in its place.
                """,
            run: { try SchemaCommands.describe($0) }),
        Command(
            "range", arguments: "DOMAIN KEY", positionals: 2...2,
            summary: "Print a declared key's allowed values as `gsettings range` does.",
            help: """
                `range TYPE LOW HIGH` for a range, `enum` then one choice a line (text in single quotes) for
                choices, `type TYPE` when any value of the type is allowed. TYPE is Prefs' name of the stored type
                (bool, int, double, float, string, date, data, array, dictionary).
                """,
            run: { try SchemaCommands.range($0) }),
        Command(
            "check", arguments: "DOMAIN", positionals: 1...1,
            summary: "Check the domain's file, system-wide defaults and managed values against the schema.",
            help: """
                Prints one line per value the app cannot read (LAYER: KEY = VALUE and what is wrong: outside its
                range or choices, or where inside the value its type fails, such as windowFrame.width: expected an
                integer), and per value prefs cannot check (a type that decodes itself in a way the schema cannot
                describe). Exits with status 1 when there is any (the app reads the default in place of each value
                it cannot read), 0 when every value was checked and fits.
                """,
            run: { try SchemaCommands.checkDomain($0) }),
        Command(
            "reset", arguments: "DOMAIN [KEY]", positionals: 1...2, options: [SchemaCommands.allFlag],
            summary: "Remove the user's value of KEY (or of every key with --all), so the app reads its default.",
            help: """
                A forced key cannot be reset (status 5); --all leaves forced keys alone. A KEY that is neither
                stored nor declared is not found (status 1).
                """,
            run: { try SchemaCommands.reset($0) }),
        Command(
            "schema", arguments: "DOMAIN", positionals: 1...1,
            options: [SchemaCommands.jsonSchemaFlag, SchemaCommands.installOption],
            summary: "Print the domain's schema (its declared keys) as prefs finds it, or install it.",
            help: """
                --json-schema prints a JSON Schema (draft 2020-12) that validates `prefs export DOMAIN` JSON.
                --install DATADIR writes the schema to DATADIR/prefs/schemas/DOMAIN.json, for a package to ship
                (DATADIR is /usr/share, or $DESTDIR/usr/share while building the package).
                """,
            run: { try SchemaCommands.schema($0) }),
        Command(
            group: "secure",
            summary: "Keep secrets in an encrypted vault (XChaCha20-Poly1305, tamper-evident).",
            help: """
                The key comes from --key-file PATH, the desktop keyring (--keyring), a systemd credential
                (--credential NAME), or a passphrase from the environment variable named by --passphrase-env NAME,
                or typed on the terminal without echo. It is never taken from the command line, where other users
                can see it with `ps`. Without --vault, the vault of --app (by default `prefs`) is used with that
                app's key file: $XDG_DATA_HOME/APP/secrets.vault and $XDG_CONFIG_HOME/APP/secrets.key.
                """,
            options: SecureCommands.vaultOptions,
            subcommands: secureCommands),
    ]

    static let secureCommands: [Command] = [
        Command(
            "init", arguments: "", positionals: 0...0, options: SecureCommands.vaultOptions,
            summary: "Create an empty vault (and its key file when the key file does not exist yet).",
            help: "A passphrase typed on the terminal is asked twice. An existing vault is never replaced.",
            run: { try SecureCommands.initialize($0) }),
        Command(
            "set", arguments: "NAME", positionals: 1...1,
            options: SecureCommands.vaultOptions + [
                typeOption, .flag("--allow-empty", "store an empty value instead of refusing it"),
            ],
            summary: "Store a secret read from standard input (typed without echo on a terminal).",
            help: """
                The value is never taken from the command line. One trailing newline is dropped, so
                `printf '%s\\n' "$TOKEN" | prefs secure set token` stores the token. Types are as for `prefs write`,
                except that with --type data standard input is stored byte for byte. Input that is not UTF-8 text
                (unless the type is data), an empty value (unless --allow-empty) and more than 1 MiB are refused,
                and the secret stays as it was.
                """,
            run: { try SecureCommands.set($0) }),
        Command(
            "get", arguments: "NAME", positionals: 1...1,
            options: SecureCommands.vaultOptions + [
                .flag("--reveal", "print the secret's value"), .flag("--json", "with --reveal, print it as JSON"),
            ],
            summary: "Say whether a secret is set; print its value only with --reveal.",
            help: "", run: { try SecureCommands.get($0) }),
        Command(
            "delete", arguments: "NAME", positionals: 1...1, options: SecureCommands.vaultOptions,
            summary: "Remove a secret.", help: "", run: { try SecureCommands.delete($0) }),
        Command(
            "list", arguments: "", positionals: 0...0, options: SecureCommands.vaultOptions,
            summary: "Print the names of the secrets, never their values.", help: "",
            run: { try SecureCommands.list($0) }),
        Command(
            "rekey", arguments: "", positionals: 0...0,
            options: SecureCommands.vaultOptions + SecureCommands.newKeyOptions,
            summary: "Re-encrypt the vault under a new key, in one atomic replace; the old key is left as it is.",
            help: "Without a --new-… option, the new passphrase is asked twice on the terminal.",
            run: { try SecureCommands.rekey($0) }),
        Command(
            "move-key", arguments: "", positionals: 0...0,
            options: SecureCommands.vaultOptions + SecureCommands.newKeyOptions,
            summary:
                "Move the vault's key (to the keyring, a key file, …) and remove the old key file or keyring item.",
            help: """
                Re-encrypts the vault under the new key in one atomic replace, opens it again with the new key, and
                only then removes the old key file or keyring item, if it no longer opens the vault. Stopped at any
                point, the vault opens with the old key or the new one. `prefs secure move-key --app ID --new-keyring`
                moves an app's default vault from its key file into the desktop keyring; `--app ID --keyring
                --new-key-file PATH` moves it back.
                """,
            run: { try SecureCommands.moveKey($0) }),
        Command(
            "verify", arguments: "", positionals: 0...0, options: SecureCommands.vaultOptions,
            summary: "Check that the vault opens with the key and authenticates.",
            help: """
                Fails with status 3 also when the vault's rollback record (in $XDG_STATE_HOME/prefs/vaults) cannot
                be read or written, because an older copy of the vault would then open unnoticed.
                """,
            run: { try SecureCommands.verify($0) }),
    ]

    static let tool = Command(
        group: "prefs",
        summary: "Read, write and watch preferences (UserDefaults suites) and encrypted vaults on Linux.",
        help: """
            Run `prefs COMMAND --help` for a command's details.

            With --postgres-env VAR, read, write, delete, watch, export and import work on a PostgresStore
            namespace instead, and domains lists the namespaces: DOMAIN names the namespace and the connection
            string is read from the environment variable VAR (never from the command line).

            exit status:
              0  success
              1  not found (domain, key, schema, secret, vault, file), the file system refused the operation,
                 the PostgreSQL server is unreachable, or `prefs check` found values the schema does not allow
              2  usage error: unknown command or option, missing argument, a value that does not parse
              3  authentication or integrity failure: wrong key, modified vault, an older copy of a vault or
                 another vault where one was seen before, damaged preferences file
              4  the change was made, but syncing it to disk failed: it is in effect, do not undo it
              5  refused: the administrator forced the key's value (managed preferences); nothing changed
            """,
        options: [], subcommands: commands)

    /// `await PrefsTool.run(arguments, console: .standard)` runs one command line (without the program name) and
    /// returns the exit status; errors are printed on the console's standard error as one line.
    package static func run(_ arguments: [String], console: Console) async -> Int32 {
        do {
            try await dispatch(arguments, in: tool, path: "prefs", console: console)
            return ExitStatus.success.rawValue
        } catch {
            let failure = Failure.from(error)
            let message = failure.message.hasPrefix("prefs") ? failure.message : "prefs: " + failure.message
            console.printError(message)
            return failure.status.rawValue
        }
    }

    /// Finds the command named by the first argument that is not an option (or an option's value) and runs it.
    static func dispatch(_ arguments: [String], in group: Command, path: String, console: Console) async throws {
        var index = 0
        while index < arguments.count, arguments[index].hasPrefix("-"), arguments[index] != "--" {
            let token = arguments[index]
            index += 1
            if token == "--help" || token == "-h" { continue }
            let name = String(token.prefix { $0 != "=" })
            try ArgumentParser.refuseSecret(name, path: path)
            guard let option = group.options.first(where: { $0.name == name }) else {
                throw DomainCommands.noEquivalent(name)
                    ?? Failure.usage("\(path): unknown option \(name); run `\(path) --help`")
            }
            if option.value != nil, name == token { index += 1 }
        }
        let rest = Array(arguments[..<min(index, arguments.count)]) + arguments.dropFirst(index + 1)
        guard index < arguments.count, arguments[index] != "--" else {
            if ArgumentParser.asksForHelp(arguments) {
                console.writeOutput(ArgumentParser.help(of: group, path: path))
                return
            }
            throw Failure.usage("\(path): missing command; run `\(path) --help` for the list")
        }
        let name = arguments[index]
        if group.name == "prefs", name == "help" {
            // `prefs help [COMMAND…]` is `prefs [COMMAND…] --help`.
            try await dispatch(
                Array(arguments.dropFirst(index + 1)) + ["--help"], in: group, path: path, console: console)
            return
        }
        guard let command = group.subcommands.first(where: { $0.name == name }) else {
            let shown = path.hasPrefix("prefs secure") ? "(not shown: it may be a secret)" : String(reflecting: name)
            throw Failure.usage("\(path): unknown command \(shown); run `\(path) --help` for the list")
        }
        let commandPath = path + " " + name
        if !command.subcommands.isEmpty {
            try await dispatch(rest, in: command, path: commandPath, console: console)
            return
        }
        if ArgumentParser.asksForHelp(rest) {
            console.writeOutput(ArgumentParser.help(of: command, path: commandPath))
            return
        }
        let invocation = try ArgumentParser.parse(rest, for: command, path: commandPath, console: console)
        do {
            try await command.run(invocation)
        } catch {
            let failure = Failure.from(error)
            if failure.message.hasPrefix("prefs") { throw failure }
            throw Failure(failure.status, commandPath + ": " + failure.message)
        }
    }
}
