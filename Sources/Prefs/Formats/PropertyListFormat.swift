package import Foundation

/// The UserDefaults suite file (`<suite>.plist`), readable and writable by Foundation's `UserDefaults`.
///
/// Written as a binary property list, which keeps `Date` fractions, `Float` widths and 64-bit integers exactly
/// (Foundation's XML writer drops sub-second dates and turns floats into doubles). Read: a binary property list by
/// ``BinaryPropertyList``, UTF-8 XML by ``XMLPropertyListReader``, and only XML in another encoding by Foundation
/// (no binary input ever reaches Foundation, which crashes on some malformed binary files).
enum PropertyListFormat {
    static func encode(_ values: [String: PrefValue]) throws(PrefsError) -> Data {
        try BinaryPropertyList.encode(values)
    }

    /// Whether `data` is a property list as far as its first bytes tell: a binary one, or text whose first character
    /// after an optional byte-order mark and white space is `<`, or UTF-16 or UTF-32 text (marked by a byte-order
    /// mark or NUL bytes), which Foundation decodes.
    static func recognizes(_ data: Data) -> Bool {
        if BinaryPropertyList.startsWithMagic(data) { return true }
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) || bytes.prefix(4).contains(0) {
            return true
        }
        return bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "<")
    }

    /// Reads a binary or XML property list whose top level is a dictionary; anything else throws
    /// `PrefsError.corruptFile` naming `path`.
    static func decode(_ data: Data, path: String) throws(PrefsError) -> [String: PrefValue] {
        func corrupt(_ reason: String) -> PrefsError { .corruptFile(path: path, reason: reason) }
        guard !data.isEmpty else { throw corrupt("empty file") }
        // Refusing anything else before Foundation parses it also avoids the error objects Foundation on Linux leaks
        // for every input it fails to parse as a text property list.
        guard recognizes(data) else { throw corrupt("not a binary or XML property list") }
        if BinaryPropertyList.startsWithMagic(data) {
            let result = data.withUnsafeBytes { bytes in
                Result { () throws(BinaryFormatFailure) in try BinaryPropertyList.values(in: bytes) }
            }
            do { return try result.get() } catch {
                throw corrupt("malformed binary property list: \(error.description)")
            }
        }
        do {
            if let values = try XMLPropertyListReader.values(in: data) { return values }
        } catch {
            throw corrupt(error.description)
        }
        // Text in another encoding than UTF-8.
        let root: Any
        var format = PropertyListSerialization.PropertyListFormat.xml
        do {
            root = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        } catch {
            let reason = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw corrupt("not a property list: \(reason ?? error.localizedDescription)")
        }
        guard format == .xml else { throw corrupt("not a binary or XML property list") }
        guard case .dictionary(let values)? = FoundationBridge.value(root) else {
            throw corrupt("the top level is not a dictionary of property-list values")
        }
        return values.mapValues(FoundationBridge.restoringFloats)
    }
}

// Package wrappers for the `prefs` tool's import and export.
extension PrefValue {
    /// `try PrefValue.propertyListDocument(values)` writes a whole set of preferences as a UserDefaults suite file
    /// does: a binary property list that keeps every value exactly.
    ///
    /// - Throws: ``PrefsError/encodingFailed(key:reason:)`` for a value nested deeper than the reader accepts.
    package static func propertyListDocument(_ values: [String: PrefValue]) throws -> Data {
        try PropertyListFormat.encode(values)
    }

    /// `try PrefValue.values(fromPropertyList: data, source: path)` reads a binary or XML property list whose top
    /// level is a dictionary, with the checks a suite file gets.
    ///
    /// - Throws: ``PrefsError/corruptFile(path:reason:)`` naming `source` for anything else.
    package static func values(fromPropertyList data: Data, source: String) throws -> [String: PrefValue] {
        try PropertyListFormat.decode(data, path: source)
    }

    /// `PrefValue.isPropertyList(data)`: whether `data` starts as a binary or XML property list.
    package static func isPropertyList(_ data: Data) -> Bool { PropertyListFormat.recognizes(data) }

    /// `PrefValue.foundationPropertyList(values)` is the Foundation property-list object for the values, for
    /// `PropertyListSerialization`.
    package static func foundationPropertyList(_ values: [String: PrefValue]) -> [String: Any] {
        values.mapValues { FoundationBridge.object($0) }
    }
}
