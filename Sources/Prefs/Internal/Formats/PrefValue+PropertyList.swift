package import Foundation

// Package wrappers over the suite file's property-list reader and writer, for the `prefs` tool's import and export.

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

    /// `PrefValue.foundationPropertyList(values)` is the Foundation property-list object for the values, for
    /// `PropertyListSerialization`.
    package static func foundationPropertyList(_ values: [String: PrefValue]) -> [String: Any] {
        values.mapValues(PropertyListFormat.toFoundation)
    }
}
