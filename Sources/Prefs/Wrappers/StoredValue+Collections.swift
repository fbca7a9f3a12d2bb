extension StoredValue where Value == Bool {
    /// `$isEnabled.toggle()` flips a stored Bool atomically.
    public func toggle() { update { $0.toggle() } }
}

extension StoredValue {
    /// `$tags.append("swift")` adds an element to a stored array.
    public func append<Element>(_ element: Element) where Value == [Element] {
        update { $0.append(element) }
    }

    /// `$tags.append(contentsOf: ["swift", "linux"])` adds several elements to a stored array.
    public func append<Element>(contentsOf elements: [Element]) where Value == [Element] {
        update { $0.append(contentsOf: elements) }
    }

    /// `$tags.togglePresence("swift")` removes the element if the array holds it, and appends it otherwise.
    public func togglePresence<Element: Equatable>(_ element: Element) where Value == [Element] {
        update { $0.togglePresence(element) }
    }

    /// `$tags.replace("swfit", with: "swift")` replaces the first occurrence of an element; does nothing if absent.
    public func replace<Element: Equatable>(_ element: Element, with replacement: Element) where Value == [Element] {
        update { $0.replaceFirst(element, with: replacement) }
    }

    /// `$tags.remove("swift")` removes every occurrence of an element from a stored array.
    public func remove<Element: Equatable>(_ element: Element) where Value == [Element] {
        update { $0.removeEvery(element) }
    }

    /// `$featureFlags.update(key: "darkMode", value: true)` sets one entry of a stored dictionary; nil removes it.
    public func update<Key, Entry>(key: Key, value: Entry?) where Value == [Key: Entry] {
        update { $0[key] = value }
    }
}
