import Foundation

/// One option of a command: a flag (`--json`) or an option with a value (`--type int`, `--type=int`).
struct Option: Sendable {
    let name: String
    /// The placeholder of the value in help (`TYPE`), or nil for a flag.
    let value: String?
    let help: String

    static func flag(_ name: String, _ help: String) -> Option { Option(name: name, value: nil, help: help) }
    static func value(_ name: String, _ placeholder: String, _ help: String) -> Option {
        Option(name: name, value: placeholder, help: help)
    }
}

/// What a command received once its arguments were checked against its table entry.
struct Invocation: Sendable {
    /// `prefs read`, `prefs secure get`: the command as the user typed it, for messages.
    let command: String
    var positionals: [String] = []
    var flags: Set<String> = []
    var values: [String: String] = [:]
    let console: Console

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    subscript(option: String) -> String? { values[option] }
}

/// One entry of a command table: its name, usage, help text and handler, or a table of subcommands.
struct Command: Sendable {
    let name: String
    /// The positional arguments as shown in usage: `DOMAIN [KEY]`.
    let arguments: String
    let summary: String
    let help: String
    let positionals: ClosedRange<Int>
    let options: [Option]
    let subcommands: [Command]
    let run: @Sendable (Invocation) async throws -> Void

    init(
        _ name: String, arguments: String, positionals: ClosedRange<Int>, options: [Option] = [], summary: String,
        help: String, run: @escaping @Sendable (Invocation) async throws -> Void
    ) {
        self.name = name
        self.arguments = arguments
        self.summary = summary
        self.help = help
        self.positionals = positionals
        self.options = options
        self.subcommands = []
        self.run = run
    }

    /// A command whose first argument names one of `subcommands`.
    init(group name: String, summary: String, help: String, options: [Option], subcommands: [Command]) {
        self.name = name
        self.arguments = "COMMAND"
        self.summary = summary
        self.help = help
        self.positionals = 1...1
        self.options = options
        self.subcommands = subcommands
        self.run = { _ in }
    }
}

/// Options that would put a secret on the command line, refused wherever they appear.
let refusedSecretOptions: Set<String> = ["--passphrase", "--new-passphrase", "--password", "--secret"]

enum ArgumentParser {
    /// Splits `arguments` by `command`'s table entry. Long options only (so `-5` is a value), `--name value` or
    /// `--name=value`, in any order with the positionals; `--` ends the options.
    static func parse(_ arguments: [String], for command: Command, path: String, console: Console) throws
        -> Invocation
    {
        var invocation = Invocation(command: path, console: console)
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let token = arguments[index]
            index += 1
            guard !optionsEnded, token.hasPrefix("--") else {
                invocation.positionals.append(token)
                continue
            }
            if token == "--" {
                optionsEnded = true
                continue
            }
            let parts = token.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            try refuseSecret(name, path: path)
            guard let option = command.options.first(where: { $0.name == name }) else {
                throw Failure.usage("\(path): unknown option \(name); run `\(path) --help`")
            }
            guard option.value != nil else {
                if parts.count > 1 { throw Failure.usage("\(path): \(name) takes no value; run `\(path) --help`") }
                invocation.flags.insert(name)
                continue
            }
            let value: String
            if parts.count > 1 {
                value = String(parts[1])
            } else {
                guard index < arguments.count else {
                    throw Failure.usage("\(path): \(name) needs a value (\(name) \(option.value!))")
                }
                value = arguments[index]
                index += 1
            }
            guard invocation.values.updateValue(value, forKey: name) == nil else {
                throw Failure.usage("\(path): \(name) given twice")
            }
        }
        let count = invocation.positionals.count
        if count < command.positionals.lowerBound {
            throw Failure.usage("\(path): missing arguments; usage: \(usage(of: command, path: path))")
        }
        if count > command.positionals.upperBound {
            let extra = invocation.positionals[command.positionals.upperBound]
            // Under `prefs secure` an extra argument is often a secret typed where it does not belong: never echo it.
            let shown =
                path.hasPrefix("prefs secure")
                ? "number \(command.positionals.upperBound + 1) (not shown: it may be a secret; secrets are read "
                    + "from standard input)"
                : String(reflecting: extra)
            throw Failure.usage("\(path): unexpected argument \(shown); usage: \(usage(of: command, path: path))")
        }
        return invocation
    }

    /// Refuses the options that would put a secret on the command line, without echoing their value.
    static func refuseSecret(_ name: String, path: String) throws {
        guard refusedSecretOptions.contains(name) else { return }
        throw Failure.usage(
            "\(path): refusing \(name): other users can read the command line with `ps`; "
                + "use --passphrase-env NAME, a key file, or type it when asked")
    }

    /// Whether the user asked for help: `-h` or `--help` before any `--`.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        for token in arguments {
            if token == "--" { return false }
            if token == "--help" || token == "-h" { return true }
        }
        return false
    }

    static func usage(of command: Command, path: String) -> String {
        var parts = [path, command.arguments]
        for option in command.options {
            parts.append("[" + option.name + (option.value.map { " " + $0 } ?? "") + "]")
        }
        return parts.filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The text of `prefs COMMAND --help`.
    static func help(of command: Command, path: String) -> String {
        var text = "usage: \(usage(of: command, path: path))\n\n\(command.summary)\n"
        if !command.help.isEmpty { text += "\n" + command.help + "\n" }
        if !command.subcommands.isEmpty {
            text += "\ncommands:\n" + table(command.subcommands.map { ($0.name + " " + $0.arguments, $0.summary) })
        }
        let options = command.options.map { ($0.name + ($0.value.map { " " + $0 } ?? ""), $0.help) }
        text += "\noptions:\n" + table(options + [("-h, --help", "show this help")])
        return text
    }

    static func table(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { "  " + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 + "\n" }
            .joined()
    }
}
