/// Checks a UTF-8 XML property list before Foundation parses it, for what Foundation would guess at or change
/// silently (it skips characters that are not base64, moves an impossible date such as month 13 into the next year,
/// reads `<real>1e999</real>` as infinity and keeps the last of two equal keys), since the next write would make
/// the guess permanent.
///
/// Accepted as Foundation and Python's plistlib write them: base64 text (white space anywhere, `=` padding only at
/// the end, a multiple of four characters); dates `YYYY-MM-DDTHH:MM:SSZ` that exist in the proleptic Gregorian
/// calendar, where the year may have a sign and any number of digits up to 12 (Foundation writes a finite date
/// of any year that way, `-285196646-06-10T08:00:00Z`, and reads it back exactly); reals within the range of a
/// double (or named: `+infinity`, `nan`); dictionaries whose keys all differ (as Swift strings, after entities
/// are replaced). Comments and CDATA sections are skipped. Text in other encodings (UTF-16, UTF-32) is not checked.
enum XMLPropertyListCheck {
    private static let commentStart = Array("<!--".utf8)
    private static let commentEnd = Array("-->".utf8)
    private static let cdataStart = Array("<![CDATA[".utf8)
    private static let cdataEnd = Array("]]>".utf8)
    private static let dataStart = Array("<data>".utf8)
    private static let dataEnd = Array("</data>".utf8)
    private static let dateStart = Array("<date>".utf8)
    private static let dateEnd = Array("</date>".utf8)
    private static let realStart = Array("<real>".utf8)
    private static let realEnd = Array("</real>".utf8)
    private static let keyStart = Array("<key>".utf8)
    private static let keyEnd = Array("</key>".utf8)
    private static let emptyKey = Array("<key/>".utf8)
    private static let dictStart = Array("<dict>".utf8)
    private static let dictEnd = Array("</dict>".utf8)
    /// The elements whose text is checked, with what checks it.
    private static let checkedElements:
        [(start: [UInt8], end: [UInt8], problem: @Sendable (ArraySlice<UInt8>) -> String?)] = [
            (dataStart, dataEnd, base64Problem), (dateStart, dateEnd, dateProblem), (realStart, realEnd, realProblem),
        ]

    /// What is wrong with the first damaged `<data>`, `<date>` or `<real>` element or the first key a dictionary
    /// holds twice, or nil.
    static func problem(in bytes: [UInt8]) -> String? {
        var index = 0
        // The keys of each dictionary open around the current position, innermost last.
        var keys: [Set<String>] = []
        func add(_ key: String) -> String? {
            guard !keys.isEmpty else { return nil }
            guard keys[keys.count - 1].insert(key).inserted else {
                return "dictionary holds the key \(key.debugDescription) twice"
            }
            return nil
        }
        while let open = bytes[index...].firstIndex(of: UInt8(ascii: "<")) {
            let rest = bytes[open...]
            if rest.starts(with: commentStart) {
                guard let end = find(commentEnd, in: bytes, from: open + 4) else { return nil }
                index = end
            } else if rest.starts(with: cdataStart) {
                guard let end = find(cdataEnd, in: bytes, from: open + 9) else { return nil }
                index = end
            } else if let element = checkedElements.first(where: { rest.starts(with: $0.start) }) {
                let body = open + element.start.count
                guard let end = find(element.end, in: bytes, from: body) else { return nil }
                if let problem = element.problem(bytes[body..<(end - element.end.count)]) { return problem }
                index = end
            } else if rest.starts(with: keyStart) {
                guard let end = find(keyEnd, in: bytes, from: open + 5) else { return nil }
                if let problem = add(keyText(bytes[(open + 5)..<(end - 6)])) { return problem }
                index = end
            } else if rest.starts(with: emptyKey) {
                if let problem = add("") { return problem }
                index = open + emptyKey.count
            } else if rest.starts(with: dictStart) {
                keys.append([])
                index = open + dictStart.count
            } else if rest.starts(with: dictEnd) {
                _ = keys.popLast()
                index = open + dictEnd.count
            } else {
                index = open + 1
            }
        }
        return nil
    }

    /// The index just past the first `needle` at or after `start`.
    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        var position = start
        while position + needle.count <= bytes.count {
            if bytes[position] == needle[0], bytes[position..<(position + needle.count)].elementsEqual(needle) {
                return position + needle.count
            }
            position += 1
        }
        return nil
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func base64Problem(_ text: ArraySlice<UInt8>) -> String? {
        let characters = text.filter { !isSpace($0) }
        let padding = characters.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        let body = characters.dropLast(padding)
        let valid = body.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: "/")
        }
        guard valid, padding <= 2, characters.count % 4 == 0 else {
            return "<data> element is not valid base64: \(String(decoding: text.prefix(40), as: UTF8.self))"
        }
        return nil
    }

    /// The text of a `<key>` element as Foundation reads it: the five named entities and character references
    /// replaced, CDATA markers removed. Anything else is kept as it is (Foundation refuses what is malformed).
    private static func keyText(_ raw: ArraySlice<UInt8>) -> String {
        var text = String(decoding: raw, as: UTF8.self)
        guard text.contains("&") || text.contains("<") else { return text }
        text = text.replacing("<![CDATA[", with: "").replacing("]]>", with: "")
        var result = ""
        var rest = text[...]
        while let ampersand = rest.firstIndex(of: "&") {
            result += rest[..<ampersand]
            guard let semicolon = rest[ampersand...].firstIndex(of: ";") else { break }
            let name = rest[rest.index(after: ampersand)..<semicolon]
            let named = ["amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'"]
            if let replacement = named[String(name)] {
                result += replacement
            } else if name.hasPrefix("#x") || name.hasPrefix("#X"), let code = UInt32(name.dropFirst(2), radix: 16),
                let scalar = Unicode.Scalar(code)
            {
                result.unicodeScalars.append(scalar)
            } else if name.hasPrefix("#"), let code = UInt32(name.dropFirst()), let scalar = Unicode.Scalar(code) {
                result.unicodeScalars.append(scalar)
            } else {
                result += rest[ampersand...semicolon]
            }
            rest = rest[rest.index(after: semicolon)...]
        }
        return result + rest
    }

    /// A real beyond the range of a double: digits that Foundation would read as infinity.
    private static func realProblem(_ text: ArraySlice<UInt8>) -> String? {
        let trimmed = String(
            decoding: text.drop(while: isSpace).reversed().drop(while: isSpace).reversed(), as: UTF8.self)
        guard trimmed.contains(where: \.isNumber), let number = Double(trimmed), number.isInfinite else { return nil }
        return "<real> element is beyond the range of a double: \(trimmed.prefix(40))"
    }

    private static func dateProblem(_ text: ArraySlice<UInt8>) -> String? {
        let trimmed = Array(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
        let shown = String(decoding: trimmed.prefix(40), as: UTF8.self)
        let problem = "<date> element is not a date that exists: \(shown)"
        // [-]Y…Y-MM-DDTHH:MM:SSZ: the year as Foundation writes it, with a sign and any number of digits.
        let isNegative = trimmed.first == UInt8(ascii: "-")
        let yearDigits = trimmed.dropFirst(isNegative ? 1 : 0).prefix {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
        }
        guard (1...12).contains(yearDigits.count) else { return problem }
        let fields = Array(trimmed[yearDigits.endIndex...])
        let layout = Array("-00-00T00:00:00Z".utf8)
        guard fields.count == layout.count else { return problem }
        for (byte, expected) in zip(fields, layout) {
            let isDigit = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            if expected == UInt8(ascii: "0") ? !isDigit : byte != expected { return problem }
        }
        func number<Digits: Collection<UInt8>>(_ digits: Digits) -> Int {
            digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        }
        func field(_ range: Range<Int>) -> Int { number(fields[range]) }
        let year = (isNegative ? -1 : 1) * number(yearDigits)
        let month = field(1..<3)
        let day = field(4..<6)
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...monthDays[month - 1]).contains(day), field(7..<9) <= 23,
            field(10..<12) <= 59, field(13..<15) <= 59
        else { return problem }
        return nil
    }
}
