import Foundation

/// A value that does not have the shape, where and why: `.width: expected an integer (Int)`.
package struct ShapeMismatch: Error, Sendable, CustomStringConvertible {
    /// Member names and `[index]`s from the key's value down to the place that fails.
    package var path: String
    package var reason: String

    /// `.width: expected an integer (Int)`, or the reason alone at the top.
    package var description: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// The place and reason `JSONDecoder` gave (or a stored value's native read), in the words of `prefs`.
    package init(_ error: any Error) {
        if let mismatch = error as? ShapeMismatch {
            self = mismatch
            return
        }
        guard let decoding = error as? DecodingError else {
            self.init(path: "", reason: Self.reason(of: error))
            return
        }
        switch decoding {
        case .typeMismatch(let type, let context):
            self.init(
                path: Self.path(context.codingPath),
                reason: "expected \(Self.expected(type))")
        case .valueNotFound(let type, let context):
            self.init(
                path: Self.path(context.codingPath),
                reason: "expected \(Self.expected(type)), found null")
        case .keyNotFound(let key, let context):
            self.init(path: Self.path(context.codingPath + [key]), reason: "missing")
        case .dataCorrupted(let context):
            var reason = context.debugDescription
            if reason.hasSuffix(".") { reason.removeLast() }
            if reason == "The given data was not valid JSON" { reason = "not valid JSON" }
            self.init(path: Self.path(context.codingPath), reason: reason)
        @unknown default:
            self.init(path: "", reason: "\(error)")
        }
    }

    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    /// `an integer`, `text`, `a date`: what a value of a type `JSONDecoder` or Prefs reads must be.
    package static func expected(_ type: Any.Type) -> String {
        switch type {
        case is Bool.Type: "true or false"
        case is String.Type: "text"
        case is Double.Type, is Float.Type, is Decimal.Type: "a number"
        case is Int.Type, is Int64.Type: "an integer"
        case let integer as any FixedWidthInteger.Type: "an integer (\(integer))"
        case is Date.Type: "a date"
        case is Data.Type: "data"
        case is URL.Type: "a URL"
        case is UUID.Type: "a UUID"
        default: "a value of type \(type)"
        }
    }

    /// `.frame.tags[2]`.
    static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }.joined()
    }

    private static func reason(of error: any Error) -> String {
        if case .typeMismatch(_, let expected, let found)? = error as? PrefsError {
            return "is \(found), expected \(expected)"
        }
        return "\(error)"
    }
}
