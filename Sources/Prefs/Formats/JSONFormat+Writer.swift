import Foundation

// The writer of the `FileStore` format (see `JSONFormat`): the whole document or one value, written in one pass
// into UTF-8 bytes.
extension JSONFormat {
    /// The whole store as a UTF-8 JSON document: 2-space indent, sorted keys, trailing newline.
    ///
    /// With `tagsNonFiniteDates`, a date that is not a finite number (which a binary property list can hold) is
    /// written as `{"$date": "nan"}` (or `"inf"`, `"-inf"`) instead of being refused, as `prefs export` needs.
    static func encode(_ values: [String: PrefValue], tagsNonFiniteDates: Bool = false) throws(PrefsError) -> Data {
        var writer = Writer(pretty: true)
        writer.tagsNonFiniteDates = tagsNonFiniteDates
        try writer.writeObject(values, indent: 0, topLevelKey: nil)
        writer.append("\n")
        return writer.output
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

        /// Writes `bytes` as a quoted base64 string (standard alphabet, padded).
        mutating func appendBase64String(_ bytes: Data) {
            output.append(0x22)
            output.append(bytes.base64EncodedData())
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
                    writer.appendBase64String(bytes)
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
