import Foundation

/// The readers of the layers that come from outside the store: the command line, the environment and the
/// system-wide files under `$XDG_CONFIG_DIRS`. Each turns its source into plain values; ``LayerStack`` merges them.
enum LayerSources {
    // MARK: Command-line arguments

    /// The first characters that make Foundation try an argument's value as a property list.
    private static let propertyListStarts: Set<Character> = ["{", "[", "(", "<", "\""]

    /// This process's argument layer, parsed once.
    static let processArguments = arguments(CommandLine.arguments)

    /// The argument layer of `arguments` (program name first), read as Foundation's UserDefaults reads it: each
    /// `-key value` pair whose value does not itself start with `-` sets `key`. A value starting with `{`, `[`, `(`,
    /// `<` or `"` that parses as a property list is that value; anything else is the value as a string, trimmed of
    /// surrounding white space.
    static func arguments(_ arguments: [String]) -> [String: PrefValue] {
        var values: [String: PrefValue] = [:]
        var index = 0
        while index + 1 < arguments.count {
            let option = arguments[index]
            let text = arguments[index + 1]
            guard option.hasPrefix("-"), !text.hasPrefix("-") else {
                index += 1
                continue
            }
            let key = String(option.dropFirst())
            if !key.isEmpty { values[key] = argumentValue(text) }
            index += 2
        }
        return values
    }

    static func argumentValue(_ raw: String) -> PrefValue {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if let first = text.first, propertyListStarts.contains(first),
            let parsed = try? PropertyListSerialization.propertyList(from: Data(text.utf8), format: nil),
            let value = PropertyListFormat.fromFoundation(parsed)
        {
            return value
        }
        return .string(text)
    }

    // MARK: Environment

    /// The variable that sets `key` under `prefix`: the prefix, then the key in upper case with a `_` before each
    /// upper-case letter that follows a lower-case letter or digit, and every character other than an ASCII letter
    /// or digit replaced by `_`. `fontSize` → `MYAPP_FONT_SIZE`, `ui.theme` → `MYAPP_UI_THEME`.
    static func environmentName(forKey key: String, prefix: String) -> String {
        var name = prefix
        var previous: Character?
        for character in key {
            let isASCIIAlphanumeric = character.isASCII && (character.isLetter || character.isNumber)
            if character.isUppercase, let previous, previous.isASCII, previous.isLowercase || previous.isNumber {
                name.append("_")
            }
            name += isASCIIAlphanumeric ? character.uppercased() : "_"
            previous = character
        }
        return name
    }

    /// The environment layer for `keys`: each key whose variable is set takes the variable's text, read as an
    /// argument's value is. A variable that several of the keys map to is refused for all of them and returned in
    /// `ambiguous` with those keys.
    static func environment(
        _ environment: [String: String], prefix: String, keys: some Sequence<String>
    ) -> (values: [String: PrefValue], ambiguous: [String: [String]]) {
        var byName: [String: [String]] = [:]
        for key in keys { byName[environmentName(forKey: key, prefix: prefix), default: []].append(key) }
        var values: [String: PrefValue] = [:]
        var ambiguous: [String: [String]] = [:]
        for (name, keys) in byName {
            guard let text = environment[name] else { continue }
            if keys.count > 1 {
                ambiguous[name] = keys.sorted()
            } else {
                values[keys[0]] = argumentValue(text)
            }
        }
        return (values, ambiguous)
    }

    // MARK: System-wide files

    /// Where the system-wide files of `domain` live, most important folder first.
    struct SystemFiles: Sendable, Equatable {
        /// `<dir>/<domain>.plist`: defaults below the user's values.
        let defaults: [URL]
        /// `<dir>/managed-preferences/<domain>.plist`: forced values above everything.
        let managed: [URL]

        init(domain: String, folders: [URL]) {
            defaults = folders.map { $0.appending(path: domain + ".plist") }
            managed = folders.map { $0.appending(path: "managed-preferences").appending(path: domain + ".plist") }
        }
    }

    /// Reads files, most important first, into one layer where the first file that holds a key wins. A missing
    /// file adds nothing; a file that cannot be read or decoded adds nothing and its error is returned.
    static func read(_ files: [URL]) -> (values: [String: PrefValue], errors: [any Error]) {
        var values: [String: PrefValue] = [:]
        var errors: [any Error] = []
        for url in files.reversed() {
            let path = url.path(percentEncoded: false)
            guard FileManager.default.fileExists(atPath: path) else { continue }
            do {
                let data: Data
                do { data = try Data(contentsOf: url) } catch {
                    throw PrefsError.io(path: path, operation: "read", errno: 0, message: "\(error)")
                }
                values.merge(try PropertyListFormat.decode(data, path: path)) { _, stronger in stronger }
            } catch {
                errors.append(error)
            }
        }
        return (values, errors)
    }
}
