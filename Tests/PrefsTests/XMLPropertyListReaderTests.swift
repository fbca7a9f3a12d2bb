import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// The XML property-list reader against Foundation's `PropertyListSerialization`, the parser it replaces: every file
/// Foundation reads without guessing reads to the same values, and every file it refuses is refused.
@Suite(.ownThreads)
struct XMLPropertyListReaderTests {
    /// What the suite file's reader made of `data` before it had a reader of its own: Foundation's values, converted
    /// as `PropertyListFormat` converts them, or nil when Foundation refuses the file.
    private static func foundation(_ data: Data) -> [String: PrefValue]? {
        var format = PropertyListSerialization.PropertyListFormat.binary
        guard let root = try? PropertyListSerialization.propertyList(from: data, options: [], format: &format),
            format == .xml, let dictionary = root as? [String: Any]
        else { return nil }
        var values: [String: PrefValue] = [:]
        for (key, element) in dictionary {
            guard let value = FoundationBridge.value(element) else { return nil }
            values[key] = FoundationBridge.restoringFloats(value)
        }
        return values
    }

    private static func prefs(_ data: Data) -> [String: PrefValue]? {
        try? PropertyListFormat.decode(data, path: "x.plist")
    }

    /// Equal, with reals compared bit for bit (so `-0.0` is not `0.0`) and every NaN equal to every other.
    private static func same(_ first: PrefValue, _ second: PrefValue) -> Bool {
        switch (first, second) {
        case (.double(let a), .double(let b)): a.isNaN ? b.isNaN : a.bitPattern == b.bitPattern
        case (.float(let a), .float(let b)): a.isNaN ? b.isNaN : a.bitPattern == b.bitPattern
        case (.array(let a), .array(let b)): a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
        case (.dictionary(let a), .dictionary(let b)): same(a, b)
        default: first == second
        }
    }

    private static func same(_ first: [String: PrefValue]?, _ second: [String: PrefValue]?) -> Bool {
        guard let first, let second else { return first == nil && second == nil }
        return first.count == second.count
            && first.allSatisfy { key, value in second[key].map { same(value, $0) } ?? false }
    }

    private static func document(_ body: String) -> Data {
        Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>\(body)</dict>
            </plist>
            """.utf8)
    }

    // MARK: Generated

    /// Text of up to 12 characters: ASCII with XML's special characters, controls, and scalars of every width.
    private static func text(_ random: inout SplitMix64) -> String {
        let pool: [ClosedRange<UInt32>] = [
            0x20...0x7E, 0x20...0x7E, 0x3C...0x3E, 0x01...0x1F, 0xA0...0x7FF, 0x800...0xFEFE, 0x10000...0x10FFFF,
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            let range = pool.randomElement(using: &random)!
            // Foundation's writer leaves U+FEFF as it is, and its reader drops one that starts a text.
            if let scalar = Unicode.Scalar(UInt32.random(in: range, using: &random)), scalar != "\u{FEFF}" {
                scalars.append(scalar)
            }
        }
        return String(scalars) + (Bool.random(using: &random) ? "]]>&amp;" : "")
    }

    private static func value(_ random: inout SplitMix64, depth: Int) -> Any {
        switch Int.random(in: 0..<(depth > 0 ? 13 : 11), using: &random) {
        case 0: return Bool.random(using: &random)
        case 1: return Int64.random(in: .min ... .max, using: &random)
        case 2: return [Int64.min, Int64.max, 0, -1, 1].randomElement(using: &random)!
        case 3: return UInt64.random(in: UInt64(Int64.max)...UInt64.max, using: &random)
        case 4:
            let bits = Double(bitPattern: random.next())
            return bits.isNaN ? 0.5 : bits
        case 5:
            return [
                0.1, -0.0, .leastNormalMagnitude / 4, .greatestFiniteMagnitude, .infinity, -.infinity, .nan, 1.0 / 3,
            ].randomElement(using: &random)!
        case 6:
            let bits = Float(bitPattern: UInt32(truncatingIfNeeded: random.next()))
            return bits.isFinite ? bits : Float(1.5)
        case 7, 8: return text(&random)
        case 9:
            return Data(
                (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
        case 10:
            // Whole seconds (XML keeps no more), over the years Foundation writes.
            let seconds = Double(
                Int64.random(in: -1 << 52...1 << 52, using: &random) >> Int.random(in: 0...30, using: &random))
            return Date(timeIntervalSinceReferenceDate: seconds)
        case 11: return (0..<Int.random(in: 0...4, using: &random)).map { _ in value(&random, depth: depth - 1) }
        default: return dictionary(&random, depth: depth - 1)
        }
    }

    private static func dictionary(_ random: inout SplitMix64, depth: Int) -> [String: Any] {
        var members: [String: Any] = [:]
        for _ in 0..<Int.random(in: 0...5, using: &random) { members[text(&random)] = value(&random, depth: depth) }
        return members
    }

    @Test func everyPropertyListFoundationWritesReadsAsFoundationReadsIt() throws {
        var random = SplitMix64(seed: 35)
        var compared = 0
        for _ in 0..<400 {
            let data = try PropertyListSerialization.data(
                fromPropertyList: Self.dictionary(&random, depth: 4), format: .xml, options: 0)
            let theirs = Self.foundation(data)
            let ours = Self.prefs(data)
            #expect(Self.same(ours, theirs), "\(String(decoding: data, as: UTF8.self))")
            compared += theirs == nil ? 0 : 1
        }
        #expect(compared > 350)
    }

    /// Seconds since 2001 over the whole range of a `Double`: random bit patterns, powers of ten of either sign up to
    /// the largest finite one, the years where Foundation's 32-bit year wraps, and times just short of a whole second.
    private static func farDates(_ random: inout SplitMix64, count: Int) -> [Double] {
        var seconds: [Double] = [
            .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .leastNonzeroMagnitude, 1e-300, -1e-300, 1e19, -1e19,
            9.2e18, -9.2e18, 6.7e16, 6.8e16, -6.8e16, 1e17, 1e25, 0.999_999_9, -0.5,
        ]
        while seconds.count < count {
            switch Int.random(in: 0..<3, using: &random) {
            case 0: seconds.append(Double(bitPattern: random.next()))
            case 1:
                seconds.append(
                    (Bool.random(using: &random) ? 1 : -1) * pow(10, Double.random(in: -20...308, using: &random)))
            default:
                seconds.append(
                    (Bool.random(using: &random) ? 1 : -1) * pow(10, Double.random(in: 9...20, using: &random)))
            }
        }
        return seconds.filter(\.isFinite)
    }

    /// Foundation writes a date far from now (or a moment short of a whole second) with a garbage year or a time of
    /// `24:00`, `:60` or `:64`, and reads most of those back: such a file reads as Foundation reads it, whole, through
    /// both of its writers; one Foundation refuses is refused.
    @Test func datesAcrossTheWholeRangeReadAsFoundationReadsThem() throws {
        var random = SplitMix64(seed: 44)
        var read = 0
        for seconds in Self.farDates(&random, count: 100) {
            let date = Date(timeIntervalSinceReferenceDate: seconds)
            let written = try PropertyListSerialization.data(fromPropertyList: ["d": date], format: .xml, options: 0)
            let suite = FoundationSuite("dates")
            defer { suite.cleanup() }
            suite.defaults.set(date, forKey: "d")
            suite.defaults.synchronize()
            for data in [written, try Data(contentsOf: suite.file)] {
                let theirs = Self.foundation(data)
                #expect(Self.same(Self.prefs(data), theirs), "\(seconds): \(String(decoding: data, as: UTF8.self))")
                read += theirs == nil ? 0 : 1
            }
        }
        #expect(read > 150)
    }

    // MARK: Written by hand

    /// Forms Foundation reads (or refuses) that its writer never makes: each reads to what Foundation reads, or is
    /// refused as Foundation refuses it.
    @Test(arguments: [
        // Entities, character references, CDATA, comments and instructions between and inside elements.
        "<key>a&amp;b&lt;&gt;&apos;&quot;</key><string>&#65;&#x42;&#x1F600;&#0;&#x;&#;</string>",
        "<key>k</key><string>x&#xD800;</string>", "<key>k</key><string>&#123456789;</string>",
        "<key>k</key><string>&#X41;</string>", "<key>k</key><string>&nbsp;</string>",
        "<key>k</key><string>&amp</string>",
        "<key>k</key><string>a<![CDATA[<b>&amp;]]>c<![CDATA[]]></string>", "<key>k</key><string>a<!-- c -->b</string>",
        "<key>k</key><string><![CDATA[unterminated</string>", "<!-- a --><key>k</key><?pi x?><!----><true/>",
        "<key>k</key><string>&#xFEFF;x</string>", "<key>k</key><string>&#xFEFF;&#xFEFF;x</string>",
        "<key>k</key><string>a&#xFEFF;</string>", "<key>k</key><real>&#xFEFF;1</real>",
        // Empty elements, attributes, white space in tags.
        "<key/><string/><key>a</key><array/><key>d</key><dict/><key>e</key><array><dict/><array/><string/></array>",
        "<key a='1'>k</key><string x=\"<\">v</string ><key>t</key><true></true><key>f</key><false ></false\n>",
        "<key>k</key><true>x</true>", "<key>k</key><true/ >", "<key>k</key><integer/>", "<key>k</key><data/>",
        "<key>k</key><date/>", "<key>k</key><real/>", "<key>k</key><plist/>", "<key>k</key><unknown/>",
        "<key>k</key><string>v</strin>", "<key>k</key><string>v</string x>", "<key>k</key>< string>v</string>",
        "<key>k</key><array><key>in an array</key></array>", "<key>k</key><key>a key as a value</key>",
        "<string>no key</string><true/>", "<key>k</key>", "<key>k</key>text<true/>", "<key>k</key><!x><true/>",
        "<key>k</key><plist><true/></plist>", "<key>k</key><plist><true/><true/></plist>",
        // Integers.
        "<key>a</key><integer>18446744073709551615</integer><key>b</key><integer>-9223372036854775808</integer>",
        "<key>a</key><integer>18446744073709551616</integer>", "<key>a</key><integer>-9223372036854775809</integer>",
        "<key>a</key><integer>0x7fffFFFFffffffff</integer><key>b</key><integer>-0X10</integer><key>c</key><integer>+7</integer>",
        "<key>a</key><integer>000</integer><key>b</key><integer>-0</integer><key>c</key><integer>0x00</integer>",
        "<key>a</key><integer> \t- \n5</integer><key>b</key><integer>\u{7F}\u{A0}1</integer>",
        "<key>a</key><integer>\u{2003}\u{3000}\u{205F}\u{200B}\u{2029}2</integer>",
        "<key>a</key><integer>\u{2028}2</integer>",
        "<key>a</key><integer>5 </integer>", "<key>a</key><integer>0x</integer>", "<key>a</key><integer>-</integer>",
        "<key>a</key><integer>12a</integer>", "<key>a</key><integer>0xg</integer>",
        "<key>a</key><integer>1.0</integer>",
        "<key>a</key><integer>&#49;</integer>", "<key>a</key><integer></integer>", "<key>a</key><integer>0 0</integer>",
        // Reals.
        "<key>a</key><real>+1.5</real><key>b</key><real>1.</real><key>c</key><real>.5e-3</real><key>d</key><real>-0</real>",
        "<key>a</key><real>1E5</real><key>b</key><real>00.5</real><key>c</key><real> \t2.5</real><key>d</key><real>1e-400</real>",
        "<key>a</key><real>4.9e-324</real><key>b</key><real>0.1</real><key>c</key><real>3.4028234663852886e+38</real>",
        "<key>a</key><real>NaN</real><key>b</key><real>-INF</real><key>c</key><real>Infinity</real><key>d</key><real>+inf</real>",
        "<key>a</key><real>&#49;<![CDATA[.5]]></real>", "<key>a</key><real>1.5 </real>",
        "<key>a</key><real>-nan</real>",
        "<key>a</key><real>0x1p3</real>", "<key>a</key><real>1e</real>", "<key>a</key><real>.</real>",
        "<key>a</key><real>1,5</real>", "<key>a</key><real>\n1</real>", "<key>a</key><real>\r1</real>",
        "<key>a</key><real>\u{A0}1</real>", "<key>a</key><real>\u{2003}\u{3000}\u{200B}1</real>",
        "<key>a</key><real>\u{205F}1</real>", "<key>a</key><real>\u{85}\u{7F}1</real>",
        "<key>a</key><real>\u{2028}1</real>", "<key>a</key><real>1.e5</real>", "<key>a</key><real>-.e5</real>",
        // Dates.
        "<key>a</key><date>2024-02-29T23:59:59Z</date><key>b</key><date>0000-02-29T00:00:00Z</date>",
        "<key>a</key><date>-0004-02-29T12:00:00Z</date><key>b</key><date>2147483647-09-07T09:46:32Z</date>",
        "<key>a</key><date>-285196646-06-10T08:00:00Z</date><key>b</key><date>99999-12-31T23:59:59Z</date>",
        "<key>a</key><date> 2024-01-01T00:00:00Z</date>", "<key>a</key><date>2024-01-01T00:00:00Z </date>",
        "<key>a</key><date>2024-01-01T00:00:00.5Z</date>", "<key>a</key><date>2024-1-01T00:00:00Z</date>",
        // Data.
        "<key>a</key><data>\n\tAAEC\n\tAw==\n</data><key>b</key><data></data><key>c</key><data>  AA = = </data>",
        "<key>a</key><data>/+/+</data><key>b</key><data>QUJD</data><key>c</key><data>QUI=</data>",
        "<key>a</key><data>QU<!-- x -->I=</data>", "<key>a</key><data>QUI=</data >",
    ])
    func aFormFoundationReadsReadsAlikeAndOneItRefusesIsRefused(_ body: String) {
        let data = Self.document(body)
        let theirs = Self.foundation(data)
        #expect(Self.same(Self.prefs(data), theirs), "Foundation: \(String(describing: theirs))")
    }

    /// The prologue, the root and what surrounds them, as whole files.
    @Test(arguments: [
        "<plist><dict><key>a</key><true/></dict></plist>", "<dict><key>a</key><true/></dict>",
        "\u{FEFF}<plist><dict/></plist>", "\n \t<plist version='1.0'><dict/></plist>", "<plist><dict/></plist>garbage<",
        "<?xml version=\"1.0\"?><plist><dict/></plist>", "<?xml version='1.0' encoding='utf-8'?><plist><dict/></plist>",
        "<?xml version='1.0' encoding='UTF-8' standalone='yes'?>\n<!DOCTYPE plist>\n<plist><dict/></plist>",
        "<!DOCTYPE plist [ <!ELEMENT plist ANY> ]><plist><dict/></plist>", "<!DOCTYPEplist><plist><dict/></plist>",
        "<!-- a --><plist><dict/></plist>", "<!---->\n<plist><dict/></plist>", "<!-x--><plist><dict/></plist>",
        "<?><plist><dict/></plist>", "<plist><?><dict/></plist>", "<plist><plist><dict/></plist></plist>",
        "<plist><dict/>", "<plist><dict/></plist  >", "<plist><dict/></plistx>", "<plist></plist>", "<plist/>",
        "<plist><dict/><dict/></plist>", "<plist><array/></plist>", "<plist><string>x</string></plist>", "<",
        " ", "<plist><dict><key>a</key><true/></dict></plist", "<plist><dict><key>CF$UID</key><true/></dict></plist>",
        "<plist><dict><key>a</key><dict><key>CF$UID</key><string>1</string></dict></dict></plist>",
        "<plist><dict><key>a</key><string>\u{1}\u{0}\u{7F}</string></dict></plist>",
    ])
    func aWholeFileReadsAsFoundationReadsIt(_ text: String) {
        let data = Data(text.utf8)
        let theirs = Self.foundation(data)
        #expect(Self.same(Self.prefs(data), theirs), "Foundation: \(String(describing: theirs))")
    }

    @Test func textThatIsNotUTF8IsRefusedAsFoundationRefusesIt() {
        for bytes: [UInt8] in [
            [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80], [0xE2, 0x82], [0xFE],
        ] {
            let data =
                Data("<plist><dict><key>k</key><string>".utf8) + Data(bytes) + Data("</string></dict></plist>".utf8)
            #expect(Self.foundation(data) == nil)
            #expect(Self.prefs(data) == nil, "\(bytes)")
        }
        let valid =
            Data("<plist><dict><key>k</key><string>".utf8) + Data([0xEF, 0xBF, 0xBF, 0xF0, 0x9F, 0x98, 0x80])
            + Data("</string></dict></plist>".utf8)
        #expect(Self.prefs(valid) == ["k": .string("\u{FFFF}\u{1F600}")])
    }

    /// Only `UTF-8` in any case names UTF-8 in the declaration: a name that merely matches it with the 0x20 bit set
    /// (here a 0x18 for `8`) is an unknown encoding, refused as Foundation refuses it.
    @Test func anEncodingNameThatIsNotUTF8IsNotTakenForIt() {
        for name in ["UTF-\u{18}"] {
            let data = Data("<?xml version=\"1.0\" encoding=\"\(name)\"?><plist><dict/></plist>".utf8)
            #expect(Self.foundation(data) == nil, "\(name.debugDescription)")
            #expect(Self.prefs(data) == nil, "\(name.debugDescription)")
        }
        let data = Data("<?xml version=\"1.0\" encoding=\"uTf-8\"?><plist><dict/></plist>".utf8)
        #expect(Self.prefs(data) == [:])
    }

    /// What Foundation would guess at is refused, with a reason that says what is wrong.
    @Test(arguments: [
        ("<key>a</key><data>QUJ*</data>", "base64"), ("<key>a</key><data x='1'>QU=I</data>", "base64"),
        ("<key>a</key><data>QUJDR</data>", "base64"), ("<key>a</key><data>Q===</data>", "base64"),
        ("<key>a</key><data>\u{B}QUJD</data>", "base64"),
        ("<key>a</key><date>2023-02-29T00:00:00Z</date>", "not a date that exists"),
        ("<key>a</key><real>1.7976931348623159e308</real>", "beyond the range of a double"),
        ("<key>a</key><true/><key>a</key><false/>", "twice"),
        ("<key>\u{E9}</key><true/><key>e\u{301}</key><true/>", "twice"),
        ("<key>a</key><true/><key >a</key><false/>", "twice"),
        ("<key>a</key><true/><key>&#xFEFF;a</key><false/>", "twice"),
        ("<key>a</key><dict><key>CF$UID</key><integer>1</integer></dict>", "CF$UID"),
        ("<key>a</key><dict><key>CF&#36;UID</key><real>1</real></dict>", "CF$UID"),
        ("<key>a</key><string>x</string><key>b</key><integer>9</integer><key>b</key><true/>", "line 4"),
    ])
    func whatFoundationWouldGuessAtIsRefused(_ body: String, reason: String) {
        #expect(throws: PrefsError.self) { try PropertyListFormat.decode(Self.document(body), path: "x.plist") }
        do {
            _ = try PropertyListFormat.decode(Self.document(body), path: "x.plist")
        } catch {
            #expect("\(error)".contains(reason), "\(error)")
        }
    }

    /// A `<dict>` with an attribute is a dictionary of its own: its keys are not the enclosing dictionary's.
    @Test func keysOfADictionaryWithAttributesAreItsOwn() throws {
        let values = try PropertyListFormat.decode(
            Self.document("<key>a</key><true/><key>d</key><dict id='1'><key>a</key><false/></dict>"), path: "x.plist")
        #expect(values == ["a": .bool(true), "d": .dictionary(["a": .bool(false)])])
    }

    /// Foundation reads 512 levels (the top dictionary is the first) and refuses a 513th that has content; nesting
    /// far deeper is refused as well, without exhausting the stack.
    @Test func nestingIsReadToFoundationsDepthAndRefusedBeyondIt() {
        func nested(_ levels: Int, innermost: String = "<array></array>", tag: String = "array") -> Data {
            Data(
                ("<plist><dict><key>a</key>" + String(repeating: "<\(tag)>", count: levels - 2) + innermost
                    + String(repeating: "</\(tag)>", count: levels - 2) + "</dict></plist>").utf8)
        }
        for data in [nested(512), nested(513), nested(513, innermost: "<array/>"), nested(514, innermost: "<true/>")] {
            let theirs = Self.foundation(data)
            #expect(Self.same(Self.prefs(data), theirs))
        }
        #expect(Self.prefs(nested(512)) != nil)
        #expect(Self.prefs(nested(513)) == nil)
        #expect(Self.prefs(nested(200_000)) == nil)
        #expect(Self.prefs(nested(200_000, innermost: "<dict/>", tag: "plist")) == nil)
    }

    /// Text in another encoding than UTF-8 is read by Foundation, as before.
    @Test func aUTF16PropertyListIsRead() throws {
        let text =
            "<?xml version=\"1.0\" encoding=\"UTF-16\"?><plist><dict><key>k</key><string>v\u{E9}</string></dict></plist>"
        let data = Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!
        #expect(try PropertyListFormat.decode(data, path: "x.plist") == ["k": .string("v\u{E9}")])
        let latin =
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><plist><dict><key>k</key><string>v\u{E9}</string></dict></plist>"
            .data(using: .isoLatin1)!
        #expect(try PropertyListFormat.decode(latin, path: "x.plist") == ["k": .string("v\u{E9}")])
    }
}
