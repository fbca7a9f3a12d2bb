import Foundation
import Prefs

/// What `defaults` users type: the type flags of `prefs write` (`-int 5`, `-array a b`, `-dict-add k v`) and the
/// old-style property-list text `prefs read DOMAIN` prints.
enum DefaultsFlags {
    /// What a `prefs write` with type flags does to the key.
    enum Edit: Equatable {
        /// `-int 5`, `-array a b`, `-dict k v`: the key gets this value.
        case set(PrefValue)
        /// `-array-add a b`: the elements are appended to the array stored (a missing key starts empty).
        case arrayAdd([PrefValue])
        /// `-dict-add k v`: the entries are added to the dictionary stored, replacing keys it has.
        case dictAdd([String: PrefValue])
    }

    /// The flags that take one value, and the type that value is read as.
    static let scalarFlags: [String: ValueType] = [
        "-string": .string, "-data": .data, "-int": .int, "-integer": .int, "-float": .float, "-bool": .bool,
        "-boolean": .bool, "-date": .date,
    ]
    static let collectionFlags: Set<String> = ["-array", "-array-add", "-dict", "-dict-add"]

    static func isFlag(_ word: String) -> Bool { scalarFlags[word] != nil || collectionFlags.contains(word) }

    /// The edit that `words` (what follows `prefs write DOMAIN KEY`, starting with a type flag) asks for.
    static func parse(_ words: [String], command: String) throws -> Edit {
        let flag = words[0]
        if scalarFlags[flag] != nil {
            var all = words[...]
            let value = try item(&all, command: command)
            guard all.isEmpty else {
                throw Failure.usage(
                    "\(command): \(flag) takes one value; use -array or -dict for several; nothing was changed")
            }
            return .set(value)
        }
        var rest = words.dropFirst()[...]
        switch flag {
        case "-array", "-array-add":
            var elements: [PrefValue] = []
            while !rest.isEmpty { elements.append(try element(&rest, command: command)) }
            return flag == "-array" ? .set(.array(elements)) : .arrayAdd(elements)
        default:
            var members: [String: PrefValue] = [:]
            while let key = rest.popFirst() {
                guard !rest.isEmpty else {
                    throw Failure.usage(
                        "\(command): \(flag) needs a value after the key \(String(reflecting: key)); "
                            + "nothing was changed")
                }
                members[key] = try element(&rest, command: command)
            }
            return flag == "-dict" ? .set(.dictionary(members)) : .dictAdd(members)
        }
    }

    /// One element of `-array` or value of `-dict`: `-int 5` (any one-value flag and its value) or a bare string.
    private static func element(_ words: inout ArraySlice<String>, command: String) throws -> PrefValue {
        guard let first = words.first, collectionFlags.contains(first) else {
            return try item(&words, command: command)
        }
        throw Failure.usage(
            "\(command): \(first) cannot be nested; write nested values with --type json; nothing was changed")
    }

    /// `-int 5` (a one-value flag and its value) or a bare string, taken from the front of `words`.
    private static func item(_ words: inout ArraySlice<String>, command: String) throws -> PrefValue {
        let first = words.removeFirst()
        guard let type = scalarFlags[first] else { return .string(first) }
        guard let text = words.popFirst() else {
            throw Failure.usage("\(command): \(first) needs a value; nothing was changed")
        }
        guard let value = ValueText.parse(text, as: type) else {
            throw Failure.usage(
                "\(command): \(String(reflecting: text)) is not \(type.phrase) (after \(first)): expected "
                    + "\(type.expected); nothing was changed")
        }
        return value
    }

    /// What `defaults read-type` says of a value: `Type is boolean`, `Type is integer`, ….
    static func typeSentence(_ value: PrefValue) -> String {
        switch value {
        case .bool: "Type is boolean"
        case .int, .unsignedInt: "Type is integer"
        case .float: "Type is float (single precision)"
        case .double: "Type is float"
        case .string: "Type is string"
        case .date: "Type is date"
        case .data: "Type is data"
        case .array: "Type is array"
        case .dictionary: "Type is dictionary"
        }
    }
}

/// The old-style (OpenStep) property-list text that `defaults read DOMAIN` prints:
/// `{ theme = dark; fontSize = "13.5"; tags = (swift, linux); }`, one entry per line.
enum OldStylePlist {
    /// The whole domain, keys sorted, each entry followed by the note given for its key as a comment.
    static func document(_ values: [String: PrefValue], notes: [String: String] = [:]) -> String {
        var text = "{\n"
        for key in values.keys.sorted() {
            text += "    " + string(key) + " = " + format(values[key]!, depth: 1) + ";"
            if let note = notes[key] { text += " /* \(note) */" }
            text += "\n"
        }
        return text + "}\n"
    }

    /// One value at nesting `depth` (the domain's entries are depth 1).
    static func format(_ value: PrefValue, depth: Int) -> String {
        let inner = String(repeating: "    ", count: depth + 1)
        let outer = String(repeating: "    ", count: depth)
        switch value {
        case .bool(let flag): return flag ? "1" : "0"
        case .int(let number): return String(number)
        case .unsignedInt(let number): return String(number)
        case .float(let number): return quoted(number.description)
        case .double(let number): return quoted(number.description)
        case .string(let text): return string(text)
        case .date(let date): return quoted(ISODate.format(date, style: .foundation))
        case .data(let bytes): return "<" + bytes.map { String(format: "%02x", $0) }.joined() + ">"
        case .array(let elements):
            guard !elements.isEmpty else { return "()" }
            return "(\n" + elements.map { inner + format($0, depth: depth + 1) }.joined(separator: ",\n") + "\n"
                + outer + ")"
        case .dictionary(let members):
            guard !members.isEmpty else { return "{}" }
            return "{\n"
                + members.keys.sorted().map {
                    inner + string($0) + " = " + format(members[$0]!, depth: depth + 1) + ";\n"
                }
                .joined() + outer + "}"
        }
    }

    /// The characters a string may hold and still be written without quotes.
    private static let bare = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$/:.-".unicodeScalars)

    /// A string bare when it can be (`dark`), else quoted with escapes (`"two words"`, `"a\nb"`).
    static func string(_ text: String) -> String {
        !text.isEmpty && text.unicodeScalars.allSatisfy(bare.contains) ? text : quoted(text)
    }

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            case "\u{0}"..."\u{1F}", "\u{7F}": result += String(format: "\\U%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
