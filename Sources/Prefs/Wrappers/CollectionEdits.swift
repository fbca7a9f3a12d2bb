/// The edits behind the collection helpers of ``StoredValue`` and ``SecureStoredValue``, written once so the two
/// wrappers cannot drift apart.
extension Array where Element: Equatable {
    /// Removes every occurrence of `element` if there is one, and appends it otherwise.
    mutating func togglePresence(_ element: Element) {
        if contains(element) { removeAll { $0 == element } } else { append(element) }
    }

    /// Replaces the first occurrence of `element`; does nothing if there is none.
    mutating func replaceFirst(_ element: Element, with replacement: Element) {
        if let index = firstIndex(of: element) { self[index] = replacement }
    }

    /// Removes every occurrence of `element`.
    mutating func removeEvery(_ element: Element) {
        removeAll { $0 == element }
    }
}
