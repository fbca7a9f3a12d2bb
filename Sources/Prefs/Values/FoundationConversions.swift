import Foundation

/// How Foundation's typed getters (`integer(forKey:)`, `bool(forKey:)`, `string(forKey:)`, `double(forKey:)`,
/// `float(forKey:)`) read a value of another kind, for the stores kept in UserDefaults domains.
///
/// swift-corelibs-foundation converts: a bool or a number to a string (`true` is `"1"`, `42` is `"42"`), to a bool
/// (anything but zero is true) and to the other number types (`12.34` is the integer `12`); a string to a number
/// (`"1234"`, `"12.34"`) or a bool (`"YES"`, `"true"`, `"1"`). A typed read of a UserDefaults-backed store tries
/// these forms, in this order, against the declared type when the stored form itself does not fit. Unlike
/// Foundation, text that is not a number or a bool word (`"12abc"`, `"maybe"`) converts to nothing, so the read
/// gives the declared default and reports the value rather than reading 0 or false.
enum FoundationConversion {
    /// The values `stored` may stand for, in the order they are tried.
    static func candidates(for stored: PrefValue) -> [PrefValue] {
        switch stored {
        case .bool(let flag):
            return [.int(flag ? 1 : 0), .string(flag ? "1" : "0")]
        case .int(let number):
            return [.bool(number != 0), .float(Float(number)), .double(Double(number)), .string(String(number))]
        case .unsignedInt(let number):
            return [.bool(number != 0), .float(Float(number)), .double(Double(number)), .string(String(number))]
        case .double(let number):
            return [.bool(number != 0), .float(Float(number))] + truncated(number) + [.string(number.description)]
        case .float(let number):
            return [.bool(number != 0), .double(Double(number))] + truncated(Double(number))
                + [.string(number.description)]
        case .string(let text):
            return candidates(forText: text.trimmingCharacters(in: .whitespacesAndNewlines))
        case .data, .date, .array, .dictionary:
            return []
        }
    }

    /// A number as the integer Foundation makes of it: its whole part, when that fits.
    private static func truncated(_ number: Double) -> [PrefValue] {
        guard number.isFinite, let whole = Int64(exactly: number.rounded(.towardZero)) else { return [] }
        return [.int(whole)]
    }

    private static func candidates(forText text: String) -> [PrefValue] {
        var candidates: [PrefValue] = []
        switch text.lowercased() {
        case "yes", "true", "y", "t": candidates.append(.bool(true))
        case "no", "false", "n", "f": candidates.append(.bool(false))
        default: break
        }
        if let number = Int64(text) {
            candidates += [.int(number), .bool(number != 0)]
        } else if let number = UInt64(text) {
            candidates += [.unsignedInt(number), .bool(true)]
        } else if !text.lowercased().contains("x"), let number = Double(text), number.isFinite {  // no hex floats
            candidates += [.double(number), .float(Float(number))] + truncated(number) + [.bool(number != 0)]
        }
        return candidates
    }

    /// `value` with each `.double` that was a `Float` before an XML file widened it turned back into a `.float`.
    ///
    /// An XML `<real>` has one width, so a `Float` Foundation writes to a suite file comes back as a `Double` once
    /// Foundation (or the hardened store) reads the file again: `12.34` as `12.340000152587891`. Without this, what a
    /// `String` read or a change check sees would depend on whether Foundation had re-read the file. A double is
    /// taken for a float only when it is exactly one and the float's shortest text is shorter: a double a user typed
    /// is that only when its seventeen digits happen to name a float. The number itself never changes.
    static func restoringFloats(_ value: PrefValue) -> PrefValue {
        switch value {
        case .double(let number):
            let narrow = Float(number)
            guard narrow.isFinite, Double(narrow) == number,
                narrow.description.count < number.description.count
            else { return value }
            return .float(narrow)
        case .array(let elements): return .array(elements.map(restoringFloats))
        case .dictionary(let members): return .dictionary(members.mapValues(restoringFloats))
        default: return value
        }
    }
}
