import Foundation

/// The `FileStore` file format: a pretty-printed JSON object with sorted keys, written and parsed by hand so that
/// every `PrefValue` round-trips exactly and malformed input is always rejected, never guessed at.
///
/// JSON has no float, date or data kinds, so those are written as single-key tagged objects:
/// `{"$float": 0.10000000149011612}`, `{"$date": 123456.789}` (seconds since the reference date) and
/// `{"$data": "yv4="}`. Non-finite numbers are tagged with their name, `{"$double": "inf"}`, `{"$double": "-inf"}`,
/// `{"$double": "nan"}` (and `{"$float": "inf"}` for a `Float`; `{"$date": "nan"}` is read, and written on request). A dictionary value with exactly one key that starts with `$` is wrapped as
/// `{"$dict": {...}}` so that it cannot be mistaken for a tag. The top-level object is never a tag.
enum JSONFormat {
    /// The deepest nesting of arrays and objects the parser accepts.
    static let maximumDepth = 512

    static let floatTag = "$float"
    static let doubleTag = "$double"
    static let dateTag = "$date"
    static let dataTag = "$data"
    static let dictTag = "$dict"
}

extension JSONFormat {
    /// `"inf"`, `"-inf"` or `"nan"`: how a tag names a number JSON cannot hold (and `"-0"`, which `jsonb` cannot).
    static func name(ofNonFinite number: Double) -> String {
        if number.isNaN { return "nan" }
        if number == 0 { return "-0" }
        return number < 0 ? "-inf" : "inf"
    }

    /// The number a tag's name stands for, or nil for any other text.
    static func nonFinite(named name: String) -> Double? {
        switch name {
        case "inf": .infinity
        case "-inf": -.infinity
        case "nan": .nan
        case "-0": -0.0
        default: nil
        }
    }
}
