import Foundation

/// The UserDefaults suite file (`<suite>.plist`), readable and writable by Foundation's `UserDefaults`.
///
/// Writes binary property lists, which keep `Date` fractions, `Float` widths and 64-bit integers exactly (Foundation's
/// XML writer drops sub-second dates and turns floats into doubles). Reads binary and XML property lists. A binary
/// file is checked structurally before Foundation sees it, because Foundation on Linux crashes on some malformed
/// binary files (for example a set object, which it cannot bridge).
enum PropertyListFormat {
    // MARK: Whole store

    /// The store as a binary property list whose top level is a dictionary.
    /// Written by ``BinaryPropertyListWriter``, which Foundation reads back as the same values.
    ///
    /// Refuses a value nested deeper than the reader accepts, so the store never writes a file it cannot open.
    static func encode(_ values: [String: PrefValue]) throws(PrefsError) -> Data {
        let limit = BinaryPropertyListValidator.maximumDepth
        for (key, value) in values where !fits(value, atDepth: 2, limit: limit) {
            throw .encodingFailed(key: key, reason: "nested deeper than \(limit) levels")
        }
        return BinaryPropertyListWriter.encode(values)
    }

    /// Whether `data` can be an XML property list: after an optional byte-order mark and white space it starts
    /// with `<`, or it is UTF-16 or UTF-32 text (marked by a byte-order mark or NUL bytes), which Foundation decodes.
    private static func looksLikeXML(_ data: Data) -> Bool {
        var bytes = data.prefix(64)[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) || bytes.prefix(4).contains(0) {
            return true
        }
        let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        return bytes.first { !whitespace.contains($0) } == UInt8(ascii: "<")
    }

    /// Whether `value`, placed at `depth` (the top-level dictionary is depth 1), stays within `limit` levels.
    /// Stops descending at the limit, so its own recursion is bounded whatever the value.
    private static func fits(_ value: PrefValue, atDepth depth: Int, limit: Int) -> Bool {
        guard depth <= limit else { return false }
        switch value {
        case .array(let elements): return elements.allSatisfy { fits($0, atDepth: depth + 1, limit: limit) }
        case .dictionary(let members): return members.values.allSatisfy { fits($0, atDepth: depth + 1, limit: limit) }
        default: return true
        }
    }

    /// Reads a binary or XML property list whose top level is a dictionary; anything else throws
    /// `PrefsError.corruptFile` naming `path`.
    static func decode(_ data: Data, path: String) throws(PrefsError) -> [String: PrefValue] {
        func corrupt(_ reason: String) -> PrefsError { .corruptFile(path: path, reason: reason) }

        guard !data.isEmpty else { throw corrupt("empty file") }
        let isBinary = data.starts(with: BinaryPropertyListValidator.magic.prefix(6))
        // Only binary and XML are accepted; refusing anything else here, before Foundation parses it, also avoids
        // the error objects Foundation on Linux leaks for every input it fails to parse as a text property list.
        guard isBinary || looksLikeXML(data) else { throw corrupt("not a binary or XML property list") }
        if isBinary {
            let values: [String: PrefValue]?
            do {
                // Read straight from the bytes; Foundation below only for what the reader leaves to it.
                values = try BinaryPropertyListValidator.validatedWalker([UInt8](data)).topDictionary()
            } catch {
                throw corrupt("malformed binary property list: \(error.description)")
            }
            if let values { return values }
        } else {
            do {
                // Read straight from the bytes; Foundation below only for text in another encoding than UTF-8.
                if let values = try XMLPropertyListReader.values(in: data) { return values }
            } catch {
                throw corrupt(error.description)
            }
        }
        let root: Any
        var format = PropertyListSerialization.PropertyListFormat.binary
        do {
            root = try PropertyListSerialization.propertyList(from: data, options: [], format: &format)
        } catch {
            throw corrupt("not a property list: \(Self.shortReason(error))")
        }
        guard format == .binary || format == .xml else { throw corrupt("not a binary or XML property list") }
        guard let dictionary = root as? [AnyHashable: Any] else {
            throw corrupt("top level is \(Self.kindName(root)), expected a dictionary")
        }
        var values: [String: PrefValue] = [:]
        for (key, element) in dictionary {
            guard let key = key.base as? String else { throw corrupt("dictionary key is not a string") }
            guard let value = fromFoundation(element) else {
                throw corrupt("value for \(String(reflecting: key)) contains an unsupported \(Self.kindName(element))")
            }
            values[key] = isBinary ? value : FoundationConversion.restoringFloats(value)
        }
        return values
    }

    // MARK: Single values

    /// The Foundation property-list object for a value: `Bool`, `Int64`, `UInt64`, `Float`, `Double`, `String`,
    /// `Data`, `Date`, `[Any]` or `[String: Any]`.
    static func toFoundation(_ value: PrefValue) -> Any {
        switch value {
        case .bool(let flag): flag
        case .int(let number): number
        case .unsignedInt(let number): number
        case .float(let number): number
        case .double(let number): number
        case .string(let text): text
        case .data(let bytes): bytes
        case .date(let date): date
        case .array(let elements): elements.map(toFoundation) as [Any]
        case .dictionary(let members): members.mapValues(toFoundation) as [String: Any]
        }
    }

    /// The value for a Foundation property-list object, or nil for an object that is not a property-list type
    /// (or a dictionary with a non-string key).
    ///
    /// Booleans are told apart from the numbers 0 and 1 by their dynamic type (`Bool` or the boolean `NSNumber`
    /// subclass), because on Linux `NSNumber(value: 1) is Bool` is true. Other numbers map by their stored type:
    /// integers to `.int` or `.unsignedInt`, 32-bit reals to `.float`, 64-bit reals to `.double`.
    static func fromFoundation(_ any: Any) -> PrefValue? {
        // UserDefaults on Linux returns arrays as `[Any?]`; unwrap so a boxed `Bool` is not read as a number.
        let mirror = Mirror(reflecting: any)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return nil }
            return fromFoundation(wrapped)
        }
        let dynamicType = ObjectIdentifier(type(of: any))
        if dynamicType == ObjectIdentifier(Bool.self) || dynamicType == booleanNumberType {
            return (any as? Bool).map(PrefValue.bool)
        }
        if let number = nativeNumber(any) { return number }
        switch any {
        case let number as NSNumber: return fromNumber(number)
        case let text as String: return .string(text)
        case let bytes as Data: return .data(bytes)
        case let date as Date: return .date(date)
        case let elements as [Any]:
            var result: [PrefValue] = []
            result.reserveCapacity(elements.count)
            for element in elements {
                guard let value = fromFoundation(element) else { return nil }
                result.append(value)
            }
            return .array(result)
        case let members as [AnyHashable: Any]:
            var result: [String: PrefValue] = [:]
            result.reserveCapacity(members.count)
            for (key, element) in members {
                guard let key = key.base as? String, let value = fromFoundation(element) else { return nil }
                result[key] = value
            }
            return .dictionary(result)
        default:
            return nil
        }
    }

    /// The dynamic type of `NSNumber(value: true)`, a private `NSNumber` subclass on Linux.
    private static let booleanNumberType = ObjectIdentifier(type(of: NSNumber(value: true) as Any))

    /// Swift number types, checked by exact dynamic type so that no bridging conversion changes the kind.
    private static func nativeNumber(_ any: Any) -> PrefValue? {
        switch any {
        case let number as Int where type(of: any) == Int.self: .integer(number)
        case let number as Int8 where type(of: any) == Int8.self: .integer(number)
        case let number as Int16 where type(of: any) == Int16.self: .integer(number)
        case let number as Int32 where type(of: any) == Int32.self: .integer(number)
        case let number as Int64 where type(of: any) == Int64.self: .integer(number)
        case let number as UInt where type(of: any) == UInt.self: .integer(number)
        case let number as UInt8 where type(of: any) == UInt8.self: .integer(number)
        case let number as UInt16 where type(of: any) == UInt16.self: .integer(number)
        case let number as UInt32 where type(of: any) == UInt32.self: .integer(number)
        case let number as UInt64 where type(of: any) == UInt64.self: .integer(number)
        case let number as Float where type(of: any) == Float.self: .float(number)
        case let number as Double where type(of: any) == Double.self: .double(number)
        default: nil
        }
    }

    private static func fromNumber(_ number: NSNumber) -> PrefValue? {
        guard let code = String(cString: number.objCType).first else { return nil }
        switch code {
        case "c", "s", "i", "l", "q": return .int(number.int64Value)
        case "C", "S", "I", "L", "Q": return .integer(number.uint64Value)
        case "f": return .float(number.floatValue)
        case "d": return .double(number.doubleValue)
        default: return nil
        }
    }

    private static func kindName(_ any: Any) -> String {
        switch any {
        case is String: "a string"
        case is [Any]: "an array"
        case is [AnyHashable: Any]: "a dictionary"
        case is Data: "a data object"
        case is Date: "a date"
        case is NSNumber: "a number"
        default: "a value of type \(type(of: any))"
        }
    }

    private static func shortReason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let debug = nsError.userInfo[NSDebugDescriptionErrorKey] as? String { return debug }
        return nsError.localizedDescription
    }
}
