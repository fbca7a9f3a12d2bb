import Foundation
import PrefsTestSupport
import TestThreads
import Testing

@testable import Prefs

/// Files Foundation and Python's plistlib write read as they read them, and what Prefs writes
/// back keeps every value as it was: shared objects, exact code points, non-finite floats.
@Suite(.ownThreads)
struct PropertyListFidelityTests {
    /// Runs `python3` with `arguments`; returns its standard output.
    private static func python(_ arguments: [String]) throws -> String {
        let exit = try ChildProcess.run(URL(filePath: "/usr/bin/env"), ["python3"] + arguments)
        #expect(exit.status == 0, "\(exit.error)")
        return exit.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func everyFilePlistlibWritesIsReadAndWrittenBackAsPlistlibReadsIt() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let script = folder.file("differential.py")
        try Data(Self.differentialScript.utf8).write(to: script)
        // A fixed seed: 120 binary and 120 XML files, three binary ones with an array shared by 1 000 keys.
        #expect(try Self.python([script.path, "generate", folder.path, "24", "120"]) == "ok")
        var read = 0
        for name in try folder.contents() where name.hasPrefix("case-") {
            let values = try PropertyListFormat.decode(Data(contentsOf: folder.file(name)), path: name)
            try PropertyListFormat.encode(values).write(to: folder.file("prefs-" + name))
            read += 1
        }
        #expect(read == 240)
        #expect(try Self.python([script.path, "compare", folder.path]) == "ok 240")
    }

    @Test func stringsThatAreCanonicallyEquivalentKeepTheirOwnCodePoints() throws {
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        let values: [String: PrefValue] = [
            "a": .string(composed), "b": .string(decomposed), "c": .array([.string(decomposed), .string(composed)]),
        ]
        let read = try PropertyListFormat.decode(PropertyListFormat.encode(values), path: "n.plist")
        func scalars(_ value: PrefValue?) -> [Unicode.Scalar] {
            guard case .string(let text)? = value else { return [] }
            return Array(text.unicodeScalars)
        }
        #expect(scalars(read["a"]) == Array(composed.unicodeScalars))
        #expect(scalars(read["b"]) == Array(decomposed.unicodeScalars))
        guard case .array(let elements)? = read["c"] else {
            Issue.record("not an array")
            return
        }
        #expect(scalars(elements[0]) == Array(decomposed.unicodeScalars))
        #expect(scalars(elements[1]) == Array(composed.unicodeScalars))
    }

    /// Keys that differ only by Unicode normalization are one key to Swift (`String`'s `==` is canonical
    /// equivalence), so a dictionary holding both is a dictionary with a key twice: refused, binary and XML, as
    /// JSON refuses it, rather than read with one of the two values silently dropped (Foundation keeps one).
    @Test(arguments: ["FMT_BINARY", "FMT_XML"])
    func keysThatDifferOnlyByNormalizationAreRefusedAsAKeyTwice(_ format: String) throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let file = folder.file("keys.plist")
        // plistlib keeps both spellings of "café", in this order.
        let script = """
            import plistlib, sys
            inner = {"caf\\u00e9": 1, "cafe\\u0301": 2}
            top = {"caf\\u00e9": "composed", "cafe\\u0301": "decomposed", "inner": inner}
            with open(sys.argv[1], "wb") as f: plistlib.dump(top, f, fmt=plistlib.\(format), sort_keys=False)
            print("ok")
            """
        #expect(try Self.python(["-c", script, file.path]) == "ok")
        let data = try Data(contentsOf: file)
        do {
            _ = try PropertyListFormat.decode(data, path: "keys.plist")
            Issue.record("read a dictionary holding a key twice")
        } catch {
            #expect(error.description.contains("twice"), "\(error)")
        }
        let foundation = try #require(
            try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        #expect(foundation.count == 2, "Foundation drops one of them")
    }

    @Test func aByteOrderMarkStartingAnXMLKeyOrStringIsKept() throws {
        // Foundation's XML parser alone drops a U+FEFF that starts a key or a string; Prefs' reader keeps every
        // one the file holds, whatever else the file holds (here U+E000 too).
        let text = """
            \u{FEFF}<?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>\u{FEFF}k</key><string>\u{FEFF}v</string>
            <key>mark</key><string>\u{FEFF}\u{301}x</string>
            <key>taken</key><string>\u{E000}</string>
            <key>list</key><array><string>\u{FEFF}</string><dict><key>\u{FEFF}</key><true/></dict></array>
            </dict></plist>
            """
        let values = try PropertyListFormat.decode(Data(text.utf8), path: "marks.plist")
        func scalars(_ value: PrefValue?) -> [UInt32] {
            guard case .string(let string)? = value else { return [] }
            return string.unicodeScalars.map(\.value)
        }
        #expect(values.keys.contains { $0.unicodeScalars.map(\.value) == [0xFEFF, 0x6B] })
        #expect(scalars(values["\u{FEFF}k"]) == [0xFEFF, 0x76])
        #expect(scalars(values["mark"]) == [0xFEFF, 0x301, 0x78])
        #expect(scalars(values["taken"]) == [0xE000])
        #expect(values["list"] == .array([.string("\u{FEFF}"), .dictionary(["\u{FEFF}": .bool(true)])]))
        guard case .array(let list)? = values["list"] else { return }
        #expect(scalars(list[0]) == [0xFEFF])
    }

    @Test func nonFiniteFloatsStayFloatsInASuite() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let values: [String: PrefValue] = [
            "inf": .float(.infinity), "minus": .float(-.infinity), "nan": .float(Float(bitPattern: 0x7FC0_0001)),
        ]
        let store = try SuiteFileStore(suiteName: "floats", directory: folder.url)
        try store.replaceAll(values)
        let decoded = try PropertyListFormat.decode(Data(contentsOf: store.url), path: "floats.plist")
        #expect(decoded["inf"] == .float(.infinity))
        #expect(decoded["minus"] == .float(-.infinity))
        guard case .float(let nan)? = decoded["nan"] else {
            Issue.record("NaN is not a Float: \(String(describing: decoded["nan"]))")
            return
        }
        #expect(nan.bitPattern == 0x7FC0_0001)
    }

    @Test func aSharedArrayThatExpandsFarBeyondTheFileIsRead() throws {
        let folder = try TempDir()
        defer { folder.cleanup() }
        let path = folder.path("shared.plist")
        let script = """
            import plistlib, sys
            many = list(range(400))
            plistlib.dump({"k%d" % i: many for i in range(2500)}, open(sys.argv[1], "wb"), fmt=plistlib.FMT_BINARY)
            """
        _ = try Self.python(["-c", script, path])
        let data = try Data(contentsOf: folder.file("shared.plist"))
        #expect(data.count < 64 * 1024, "plistlib wrote the array once")
        let values = try PropertyListFormat.decode(data, path: path)
        #expect(values.count == 2500)
        #expect(values["k2499"] == .array((0..<400).map { .int(Int64($0)) }))
    }

    /// Generates plists with plistlib, and compares plistlib's reading of them with its reading of what Prefs wrote
    /// back (by type and exact code points).
    static let differentialScript = #"""
        import datetime, math, os, plistlib, random, sys, unicodedata

        PIECES = ["a", "Z", "0", " ", "\t", "\n", "&", "<", ">", '"', "'", "]]>", "\u00e9", "e\u0301", "\u00c5", "A\u030a",
                  "\u2126", "\u03a9", "\ufb01", "\u00df", "\ufeff", "\u200d", "\u65e5", "\U0001F600", "\U0001F1EB\U0001F1F7"]

        def text(r, xml):
            return "".join(r.choice(PIECES) for _ in range(r.randrange(0, 7)))

        def date(r, xml):
            base = datetime.datetime(1901, 1, 1) + datetime.timedelta(seconds=r.randrange(0, 198 * 365 * 86400))
            return base if xml else base + datetime.timedelta(microseconds=r.randrange(0, 1000000))

        def integer(r):
            return r.choice([0, 1, -1, 255, 256, 65535, 2**31, 2**32, -2**31, 2**63 - 1, -2**63, 2**63, 2**64 - 1,
                             r.randrange(-2**63, 2**63), r.randrange(0, 2**64)])

        def real(r):
            return r.choice([0.0, -0.0, 0.1, 1.5, -2.25, 1e300, 5e-324, 2.0**53, r.uniform(-1e6, 1e6), r.random()])

        def value(r, depth, xml, shared):
            kind = r.randrange(11 if depth > 0 else 7)
            if kind == 0: return r.random() < 0.5
            if kind == 1: return integer(r)
            if kind == 2: return real(r)
            if kind == 3: return text(r, xml)
            if kind == 4: return bytes(r.randrange(256) for _ in range(r.randrange(0, 60)))
            if kind == 5: return date(r, xml)
            if kind == 6: return unicodedata.normalize(r.choice(["NFC", "NFD", "NFKC", "NFKD"]), text(r, xml))
            if kind == 7 and shared: return r.choice(shared)
            if kind in (7, 8):
                made = [value(r, depth - 1, xml, shared) for _ in range(r.randrange(0, 5))]
                shared.append(made)
                return made
            made = dictionary(r, depth - 1, xml, shared, r.randrange(0, 5))
            shared.append(made)
            return made

        def dictionary(r, depth, xml, shared, count):
            made, seen = {}, set()
            for _ in range(count):
                key = text(r, xml)
                # Keys equal under canonical equivalence are one key in Prefs and Foundation (not in plistlib): the
                # test keysThatDifferOnlyByNormalization... checks them against Foundation.
                if unicodedata.normalize("NFD", key) in seen: continue
                seen.add(unicodedata.normalize("NFD", key))
                made[key] = value(r, depth, xml, shared)
            return made

        def strict(v):
            if isinstance(v, bool): return ("bool", v)
            if isinstance(v, int): return ("int", v)
            if isinstance(v, float): return ("real", v.hex())
            if isinstance(v, str): return ("str", tuple(map(ord, v)))
            if isinstance(v, bytes): return ("data", v)
            if isinstance(v, datetime.datetime): return ("date", v.isoformat())
            if isinstance(v, list): return ("array", tuple(strict(e) for e in v))
            if isinstance(v, dict): return ("dict", tuple(sorted((tuple(map(ord, k)), strict(e)) for k, e in v.items())))
            raise TypeError(type(v))

        mode, folder = sys.argv[1], sys.argv[2]
        if mode == "generate":
            r = random.Random(int(sys.argv[3]))
            for index in range(int(sys.argv[4])):
                for xml in (False, True):
                    top = dictionary(r, 3, xml, [], r.randrange(0, 14))
                    if index % 40 == 0 and not xml:
                        # One array under many keys, as plistlib writes it once (aSharedArray... tests the size limit).
                        many = [integer(r) for _ in range(100)]
                        for key in range(1000): top["s%d" % key] = many
                    name = "case-%03d.%s" % (index, "xml" if xml else "bin")
                    with open(os.path.join(folder, name), "wb") as f:
                        plistlib.dump(top, f, fmt=plistlib.FMT_XML if xml else plistlib.FMT_BINARY, sort_keys=False)
            print("ok")
        else:
            compared, bad = 0, []
            for name in sorted(os.listdir(folder)):
                if not name.startswith("case-"): continue
                with open(os.path.join(folder, name), "rb") as f: theirs = plistlib.load(f)
                with open(os.path.join(folder, "prefs-" + name), "rb") as f: ours = plistlib.load(f)
                compared += 1
                if strict(theirs) != strict(ours):
                    a, b = dict(strict(theirs)[1]), dict(strict(ours)[1])
                    diff = [k for k in set(a) | set(b) if a.get(k) != b.get(k)][:1]
                    bad.append("%s key %r: %r vs %r" % (name, diff, [a.get(k) for k in diff], [b.get(k) for k in diff]))
            print("ok %d" % compared if not bad else "mismatch %d of %d: %s" % (len(bad), compared, "; ".join(bad[:3])))
        """#
}

/// Damaged XML that Foundation would read with guessed values is refused (and, in a suite, never overwritten).
@Suite(.ownThreads)
struct DamagedXMLPropertyListTests {
    private static func xml(_ body: String) -> Data {
        Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict><key>k</key>\(body)</dict></plist>
            """.utf8)
    }

    @Test(arguments: [
        "<data>AAE*AgM=</data>", "<data>AAEC=AM=</data>", "<data>AAECA</data>", "<date>2024-13-01T00:00:00Z</date>",
        "<date>2023-02-29T00:00:00Z</date>", "<date>2024-04-31T00:00:00Z</date>", "<date>2024-01-01</date>",
        "<date>yesterday</date>", "<date></date>",
    ])
    func damagedDataAndDatesAreRefused(_ element: String) throws {
        #expect(throws: PrefsError.self) { try PropertyListFormat.decode(Self.xml(element), path: "x.plist") }
        let folder = try TempDir()
        defer { folder.cleanup() }
        let file = folder.file("damaged.plist")
        try Self.xml(element).write(to: file)
        #expect(throws: PrefsError.self) { try SuiteFileStore(suiteName: "damaged", directory: folder.url) }
        #expect(try Data(contentsOf: file) == Self.xml(element), "left untouched")
    }

    @Test func validDataAndDatesAsFoundationAndPlistlibWriteThemAreRead() throws {
        let body = """
            <data>
            	AAECAw==
            </data><key>d</key><date>2024-02-29T23:59:59Z</date><key>c</key><string><![CDATA[<date>no</date>]]></string>
            <!-- <data>*</data> --><key>e</key><data>
            </data>
            """
        let values = try PropertyListFormat.decode(Self.xml(body), path: "x.plist")
        #expect(values["k"] == .data(Data([0, 1, 2, 3])))
        #expect(values["d"] == .date(Date(timeIntervalSince1970: 1_709_251_199)))
        #expect(values["c"] == .string("<date>no</date>"))
        #expect(values["e"] == .data(Data()))
    }
}
