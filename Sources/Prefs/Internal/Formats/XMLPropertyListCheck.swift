/// Checks the `<data>` and `<date>` elements of a UTF-8 XML property list before Foundation parses it, because
/// Foundation guesses at damaged ones (it skips characters that are not base64, and moves an impossible date such
/// as month 13 into the next year), and the next write would make the guess permanent.
///
/// Accepted as Foundation and Python's plistlib write them: base64 text (white space anywhere, `=` padding only at
/// the end, a multiple of four characters), and dates `YYYY-MM-DDTHH:MM:SSZ` that exist in the proleptic Gregorian
/// calendar. Comments and CDATA sections are skipped. Text in other encodings (UTF-16, UTF-32) is not checked.
enum XMLPropertyListCheck {
    private static let commentStart = Array("<!--".utf8)
    private static let commentEnd = Array("-->".utf8)
    private static let cdataStart = Array("<![CDATA[".utf8)
    private static let cdataEnd = Array("]]>".utf8)
    private static let dataStart = Array("<data>".utf8)
    private static let dataEnd = Array("</data>".utf8)
    private static let dateStart = Array("<date>".utf8)
    private static let dateEnd = Array("</date>".utf8)

    /// What is wrong with the first damaged `<data>` or `<date>` element, or nil.
    static func problem(in bytes: [UInt8]) -> String? {
        var index = 0
        while let open = bytes[index...].firstIndex(of: UInt8(ascii: "<")) {
            let rest = bytes[open...]
            if rest.starts(with: commentStart) {
                guard let end = find(commentEnd, in: bytes, from: open + 4) else { return nil }
                index = end
            } else if rest.starts(with: cdataStart) {
                guard let end = find(cdataEnd, in: bytes, from: open + 9) else { return nil }
                index = end
            } else if rest.starts(with: dataStart) {
                guard let end = find(dataEnd, in: bytes, from: open + 6) else { return nil }
                if let problem = base64Problem(bytes[(open + 6)..<(end - 7)]) { return problem }
                index = end
            } else if rest.starts(with: dateStart) {
                guard let end = find(dateEnd, in: bytes, from: open + 6) else { return nil }
                if let problem = dateProblem(bytes[(open + 6)..<(end - 7)]) { return problem }
                index = end
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

    private static func dateProblem(_ text: ArraySlice<UInt8>) -> String? {
        let trimmed = Array(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
        let shown = String(decoding: trimmed.prefix(40), as: UTF8.self)
        let problem = "<date> element is not a date that exists: \(shown)"
        // YYYY-MM-DDTHH:MM:SSZ
        let layout = Array("0000-00-00T00:00:00Z".utf8)
        guard trimmed.count == layout.count else { return problem }
        for (byte, expected) in zip(trimmed, layout) {
            let isDigit = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            if expected == UInt8(ascii: "0") ? !isDigit : byte != expected { return problem }
        }
        func number(_ range: Range<Int>) -> Int { trimmed[range].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) } }
        let year = number(0..<4)
        let month = number(5..<7)
        let day = number(8..<10)
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, isLeap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...monthDays[month - 1]).contains(day), number(11..<13) <= 23,
            number(14..<16) <= 59, number(17..<19) <= 59
        else { return problem }
        return nil
    }
}
