import Foundation

/// How text from the command line or the environment becomes a typed value, as Foundation's `integer(forKey:)`,
/// `bool(forKey:)`, … convert strings.
enum TextConversion {
    /// The values `text` may stand for, tried in order against the declared type.
    static func candidates(for text: String) -> [PrefValue] {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var candidates: [PrefValue] = []
        if let number = Int64(trimmed) { candidates.append(.int(number)) }
        if let number = UInt64(trimmed) { candidates.append(.unsignedInt(number)) }
        if let number = Double(trimmed) { candidates += [.double(number), .float(Float(number))] }
        switch trimmed.lowercased() {
        case "yes", "true", "y", "t": candidates.append(.bool(true))
        case "no", "false", "n", "f": candidates.append(.bool(false))
        default: break
        }
        if let date = try? Date(trimmed, strategy: .iso8601) { candidates.append(.date(date)) }
        if let value = try? PrefValue(jsonText: trimmed), value != .string(trimmed) { candidates.append(value) }
        return candidates
    }
}
