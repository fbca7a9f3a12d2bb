import Foundation
import Synchronization

// The writer of the `FileStore` format (see `JSONFormat`): the whole document or one value, written in one pass
// into UTF-8 bytes.
extension JSONFormat {
    /// The whole store as a UTF-8 JSON document: 2-space indent, sorted keys, trailing newline.
    ///
    /// With `tagsNonFiniteDates`, a date that is not a finite number (which a binary property list can hold) is
    /// written as `{"$date": "nan"}` (or `"inf"`, `"-inf"`) instead of being refused, as `prefs export` needs.
    ///
    /// With `base64`, the base64 text of every `Data` of at least ``Base64Memo/smallest`` bytes is taken from the
    /// memo when it holds that value (from the last encode) and kept in it for the next; the memo then holds only
    /// this document's texts.
    static func encode(
        _ values: [String: PrefValue], tagsNonFiniteDates: Bool = false, base64: Base64Memo? = nil
    ) throws(PrefsError) -> Data {
        var writer = Writer(pretty: true)
        writer.tagsNonFiniteDates = tagsNonFiniteDates
        writer.base64 = base64.map { (previous: $0.take(), kept: [:], room: $0.budget) }
        try writer.writeObject(values, indent: 0, topLevelKey: nil)
        writer.append("\n")
        if let base64, let texts = writer.base64?.kept { base64.keep(texts) }
        return writer.output
    }

    /// The base64 texts of the large `Data` values a store's last write encoded, so the next write copies them
    /// instead of encoding the same bytes again (base64 was 37 % of the CPU time of a `set` in a `FileStore`
    /// holding 100 values of 10 KB). It costs memory while the store is open: about 1.35 bytes per byte of such
    /// values, and at most `budget` bytes of text (the values beyond it are encoded on every write, as without a
    /// memo).
    ///
    /// A text is kept by where its value sits (``Slot``) and used again only while the value there is equal to the
    /// one it was made from: a lookup hashes a key and a number and compares one value, never every byte of every
    /// value (swift-corelibs-foundation's `Data` hashes only its first 80 bytes, so values alike at the start would
    /// all fall under one hash).
    final class Base64Memo: Sendable {
        /// The smallest `Data`, in bytes, whose text is kept: smaller ones encode in about a microsecond.
        static let smallest = 4_096
        /// Where a large value sits: the store key it is under, and how many large values of that key come first.
        struct Slot: Hashable, Sendable {
            let key: String
            let ordinal: Int
        }
        struct Entry: Sendable {
            let bytes: Data
            let text: Data
        }
        /// The most bytes of text kept.
        let budget: Int
        let texts = Mutex<[Slot: Entry]>([:])

        init(budget: Int = 16 << 20) { self.budget = budget }

        /// The texts kept, emptying the memo (an encode that fails leaves it empty).
        func take() -> [Slot: Entry] {
            texts.withLock { texts in
                defer { texts = [:] }
                return texts
            }
        }

        func keep(_ kept: [Slot: Entry]) { texts.withLock { $0 = kept } }
    }

    /// One value as single-line JSON text, as the CLI prints it: `[1, 2]`, `{"$float": 0.5}`, `"dark"`.
    ///
    /// With `plainDecimals`, a number that `description` writes with an exponent is written in full, as PostgreSQL's
    /// `jsonb` prints it back (`1e+16` as `10000000000000000.0`, which it keeps as a non-integer; `1e-05` as
    /// `0.00001`), so the text measured before it is sent is the text every reader measures; and -0.0 is tagged
    /// (`{"$double": "-0"}`), since `jsonb` keeps no sign on zero.
    static func encodeValue(_ value: PrefValue, key: String = "", plainDecimals: Bool = false) throws(PrefsError)
        -> String
    {
        // The commonest values (a flag, a count, a name) need no writer and no buffer: the same text, formed directly.
        switch value {
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .string(let text) where !needsEscaping(text): return "\"" + text + "\""
        default: break
        }
        var writer = Writer(pretty: false)
        writer.plainDecimals = plainDecimals
        try writer.write(value, indent: 0, key: key)
        return String(decoding: writer.output, as: UTF8.self)
    }
}

extension JSONFormat {
    private struct Writer {
        let pretty: Bool
        var plainDecimals = false
        var tagsNonFiniteDates = false
        /// The UTF-8 bytes written so far.
        var output = Data()
        var depth = 0

        init(pretty: Bool) {
            self.pretty = pretty
        }

        mutating func append(_ text: String) { output.append(contentsOf: text.utf8) }

        /// The memo's texts from the last encode, those this one keeps, and the bytes of text it may still keep
        /// (see ``JSONFormat/Base64Memo``).
        var base64:
            (previous: [Base64Memo.Slot: Base64Memo.Entry], kept: [Base64Memo.Slot: Base64Memo.Entry], room: Int)?
        /// How many large `Data` values of the current store key have been written.
        var largeValuesOfKey = 0

        /// Writes `bytes`, a value under the store key `key`, as a quoted base64 string (standard alphabet, padded).
        mutating func appendBase64String(_ bytes: Data, key: String) {
            output.append(0x22)
            if bytes.count >= Base64Memo.smallest, var memo = base64 {
                base64 = nil  // not copied while it changes
                let slot = Base64Memo.Slot(key: key, ordinal: largeValuesOfKey)
                largeValuesOfKey += 1
                let known = memo.previous[slot].flatMap { $0.bytes == bytes ? $0.text : nil }
                let text = known ?? bytes.base64EncodedData()
                if text.count <= memo.room {
                    memo.kept[slot] = Base64Memo.Entry(bytes: bytes, text: text)
                    memo.room -= text.count
                }
                output.append(text)
                base64 = memo
            } else {
                output.append(bytes.base64EncodedData())
            }
            output.append(0x22)
        }

        /// Whether `number` is written as a tag's name: not finite, or -0.0 in the database form (`jsonb` keeps no
        /// sign on zero).
        func isNamed(_ number: Double) -> Bool {
            !number.isFinite || (plainDecimals && number == 0 && number.sign == .minus)
        }

        /// Counts one more level of `{` or `[`, refusing documents the parser would reject as too deep.
        private mutating func enter(key: String) throws(PrefsError) {
            depth += 1
            guard depth <= JSONFormat.maximumDepth else {
                throw .encodingFailed(key: key, reason: "nested deeper than \(JSONFormat.maximumDepth) levels")
            }
        }

        private mutating func newline(_ indent: Int) {
            guard pretty else { return }
            append("\n")
            append(String(repeating: " ", count: indent * 2))
        }

        /// Writes `values` as an object. `topLevelKey` is nil for the document's top level, where each member's
        /// own key is the store key named in errors.
        mutating func writeObject(_ values: [String: PrefValue], indent: Int, topLevelKey: String?) throws(PrefsError) {
            try enter(key: topLevelKey ?? "")
            defer { depth -= 1 }
            if values.isEmpty {
                append("{}")
                return
            }
            append("{")
            var first = true
            for key in values.keys.sorted() {
                if !first { append(pretty ? "," : ", ") }
                first = false
                if topLevelKey == nil { largeValuesOfKey = 0 }
                newline(indent + 1)
                writeString(key)
                append(": ")
                try write(values[key]!, indent: indent + 1, key: topLevelKey ?? key)
            }
            newline(indent)
            append("}")
        }

        private mutating func writeTagged(
            _ tag: String,
            indent: Int,
            key: String,
            body: (inout Writer) throws(PrefsError) -> Void
        ) throws(PrefsError) {
            try enter(key: key)
            defer { depth -= 1 }
            append("{")
            newline(indent + 1)
            writeString(tag)
            append(": ")
            try body(&self)
            newline(indent)
            append("}")
        }

        mutating func write(_ value: PrefValue, indent: Int, key: String) throws(PrefsError) {
            switch value {
            case .bool(let flag):
                append(flag ? "true" : "false")
            case .int(let number):
                append(String(number))
            case .unsignedInt(let number):
                append(String(number))
            case .double(let number) where isNamed(number):
                try writeTagged(doubleTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    writer.writeString(JSONFormat.name(ofNonFinite: number))
                }
            case .double(let number):
                try writeDouble(number, kind: "double", key: key)
            case .float(let number):
                try writeTagged(floatTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    if !writer.isNamed(Double(number)) {
                        try writer.writeDouble(Double(number), kind: "float", key: key)
                    } else {
                        writer.writeString(JSONFormat.name(ofNonFinite: Double(number)))
                    }
                }
            case .date(let date):
                try writeTagged(dateTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    let seconds = date.timeIntervalSinceReferenceDate
                    if seconds.isFinite || !writer.tagsNonFiniteDates {
                        try writer.writeDouble(seconds, kind: "date", key: key)
                    } else {
                        writer.writeString(JSONFormat.name(ofNonFinite: seconds))  // a binary plist can hold one
                    }
                }
            case .data(let bytes):
                try writeTagged(dataTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                    // Base64 text never needs escaping: appended whole, without scanning it again.
                    writer.appendBase64String(bytes, key: key)
                }
            case .string(let text):
                writeString(text)
            case .array(let elements):
                try enter(key: key)
                defer { depth -= 1 }
                if elements.isEmpty {
                    append("[]")
                    return
                }
                append("[")
                for (index, element) in elements.enumerated() {
                    if index > 0 { append(pretty ? "," : ", ") }
                    newline(indent + 1)
                    try write(element, indent: indent + 1, key: key)
                }
                newline(indent)
                append("]")
            case .dictionary(let members):
                if JSONFormat.needsDictWrapper(members) {
                    try writeTagged(dictTag, indent: indent, key: key) { (writer: inout Writer) throws(PrefsError) in
                        try writer.writeObject(members, indent: indent + 1, topLevelKey: key)
                    }
                } else {
                    try writeObject(members, indent: indent, topLevelKey: key)
                }
            }
        }

        mutating func writeDouble(_ number: Double, kind: String, key: String) throws(PrefsError) {
            guard number.isFinite else {
                let reason = "\(kind) value \(number) is not finite and cannot be stored in JSON"
                throw .encodingFailed(key: key, reason: reason)
            }
            // `description` is the shortest text that parses back to the same bits, and always contains `.` or
            // `e`, so it never reads back as an integer.
            let text = number.description
            if plainDecimals, let exponentAt = text.firstIndex(of: "e") {
                append(JSONFormat.plainDecimal(text, exponentAt: exponentAt))
            } else {
                append(text)
            }
        }

        mutating func writeString(_ text: String) {
            append("\"")
            // Fast path for the common string that needs no escaping: append it whole, not scalar by scalar.
            if !JSONFormat.needsEscaping(text) {
                append(text)
                append("\"")
                return
            }
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": append("\\\"")
                case "\\": append("\\\\")
                case "\n": append("\\n")
                case "\r": append("\\r")
                case "\t": append("\\t")
                case "\u{00}"..."\u{1F}":
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    append("\\u00")
                    if hex.count < 2 { append("0") }
                    append(hex)
                default:
                    append(String(scalar))
                }
            }
            append("\"")
        }
    }

    /// Whether `text` holds a quote, a backslash or a control character, which JSON strings must escape. Scans the
    /// contiguous UTF-8 bytes directly where it can (the closure-based `contains(where:)` on `utf8` cost a tenth of
    /// a large write).
    static func needsEscaping(_ text: String) -> Bool {
        func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            for byte in bytes where byte == 0x22 || byte == 0x5C || byte < 0x20 { return true }
            return false
        }
        if let found = text.utf8.withContiguousStorageIfAvailable(scan) { return found }
        var copy = text
        copy.makeContiguousUTF8()
        return copy.utf8.withContiguousStorageIfAvailable(scan) ?? true
    }

    /// `-1.25e+3` as `-1250.0`, `1.5e-07` as `0.00000015`: the digits of the mantissa moved by the exponent.
    static func plainDecimal(_ text: String, exponentAt: String.Index) -> String {
        let exponent = Int(text[text.index(after: exponentAt)...])!
        var mantissa = text[..<exponentAt]
        let sign = mantissa.hasPrefix("-") ? "-" : ""
        if !sign.isEmpty { mantissa = mantissa.dropFirst() }
        let parts = mantissa.split(separator: ".", omittingEmptySubsequences: false)
        let digits = parts[0] + (parts.count > 1 ? parts[1] : "")
        let point = parts[0].count + exponent
        if point <= 0 { return sign + "0." + String(repeating: "0", count: -point) + digits }
        if point >= digits.count { return sign + digits + String(repeating: "0", count: point - digits.count) + ".0" }
        return sign + digits.prefix(point) + "." + digits.dropFirst(point)
    }

    /// A dictionary with exactly one `$`-prefixed key would read back as a tag, so it is written inside `$dict`.
    static func needsDictWrapper(_ members: [String: PrefValue]) -> Bool {
        members.count == 1 && members.keys.first!.hasPrefix("$")
    }
}
