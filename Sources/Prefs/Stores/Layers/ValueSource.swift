import Foundation

/// Where a value that a read could not use came from (a layer, and the argument, variable or file in it) and what
/// the read did instead: what a report says, so that the step it names is one that changes that value.
struct ValueSource: ReadSource {
    let layer: PreferenceLayer
    /// `-fontSize 73`, `MYAPP_FONT_SIZE=73`, or the value and the file that holds it.
    let place: String
    /// The domain of the preferences folder whose user file holds the value, for the `prefs` commands that remove it.
    let domain: String?
    /// The default read in the value's place, as a message shows it; nil when it would not fit in one (a struct).
    let defaultText: String?
    /// The key, for the step that removes its value.
    let key: String

    /// `-fontSize 73 (the command line): outside 8...72; the default 13 is read for this run`.
    func sentence(for error: PrefsError) -> String? {
        why(error).map { "\(place): \($0); \(instead)" }
    }

    /// Why the layer's value cannot be read, in the words of its layer: text that is not a number says so.
    func why(_ error: PrefsError) -> String? {
        switch error {
        case .notAllowed(_, _, let allowed):
            // `from 8 to 72`, as ``AllowedValues/text`` says a range, reads `outside 8...72`.
            let bounds = allowed.hasPrefix("from ") ? allowed.dropFirst(5).components(separatedBy: " to ") : []
            if bounds.count == 2 { return "outside \(bounds[0])...\(bounds[1])" }
            return allowed.hasPrefix("one of ") ? "not \(allowed)" : "not allowed (\(allowed))"
        case .typeMismatch(_, let expected, let found):
            guard layer.isText else { return "is \(found), not \(expected)" }
            return "not \(Self.textPhrase(expected))"
        case .decodingFailed(_, let reason):
            return reason
        default:
            return nil
        }
    }

    /// What the read did, and the step that changes the value where it is.
    var instead: String {
        let read = "the default \(defaultText.map { "\($0) " } ?? "")is read"
        switch layer {
        case .arguments: return "\(read) for this run"
        case .environment: return "\(read) while the variable is set"
        case .managed: return "\(read) in its place; the administrator who forced it can change it"
        case .systemDefaults: return "\(read) in its place; the file's owner can change it"
        case .registered: return "\(read) in its place"
        case .user:
            guard let domain else { return "\(read) in its place" }
            return "\(read) in its place (`prefs reset \(domain) \(key)` removes it)"
        }
    }

    /// What text must be to read as a type Prefs names in a mismatch (`Int`, `Bool`, `a raw value of Theme`).
    private static func textPhrase(_ expected: String) -> String {
        let numbers = ["Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64"]
        if numbers.contains(expected) { return "a number (a whole one)" }
        if ["Double", "Float"].contains(expected) { return "a number" }
        if expected == "Bool" { return "true or false (yes, no, 1, 0)" }
        if expected == "Date" { return "a date (ISO 8601, such as 2024-05-01T12:00:00Z)" }
        return expected.hasPrefix("a ") || expected.hasPrefix("an ") ? expected : "\(expected) text"
    }
}

extension KeyValueStore {
    /// Where the value of `key` that a read could not use, `stored`, comes from; nil for a store without layers.
    func source(of key: String, _ stored: PrefValue, default defaultValue: PrefValue?) -> ValueSource? {
        guard let layer = layer(ofKey: key) else { return nil }
        let domain = hub.own?.domainName
        let shown = defaultValue.flatMap(ValueSource.shownDefault)
        let value = ValueSource.shown(stored)
        let place: String
        switch layer {
        case .arguments: place = "-\(key) \(value) (the command line)"
        case .environment:
            let name = hub.layers.environmentVariable(forKey: key).map { "\($0)=\(value)" } ?? value
            place = "\(name) (the environment)"
        case .managed:
            place =
                "\(value) in \(hub.layers.file(of: key, in: .managed) ?? "a managed file") (forced by the administrator)"
        case .systemDefaults:
            place =
                "\(value) in \(hub.layers.file(of: key, in: .systemDefaults) ?? "a system-wide file") (a system-wide default)"
        case .user:
            let file = hub.own?.fileURL?.path(percentEncoded: false)
            place = file.map { "\(value) in \($0)" } ?? value
        case .registered: place = "\(value) (a registered default)"
        }
        return ValueSource(layer: layer, place: place, domain: domain, defaultText: shown, key: key)
    }
}

extension ValueSource {
    /// A stored value as a report shows it: text as it was given, other values as they print.
    static func shown(_ value: PrefValue) -> String {
        if case .string(let text) = value { return text }
        return value.description
    }

    /// A default as a report shows it, when it is a single value.
    static func shownDefault(_ value: PrefValue) -> String? {
        switch value {
        case .array, .dictionary, .data: nil
        case .string(let text) where text.hasPrefix("{") || text.hasPrefix("["): nil
        default: AllowedValues.shown(value)
        }
    }
}
