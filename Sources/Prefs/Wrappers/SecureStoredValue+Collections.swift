extension SecureStoredValue where Value == Bool {
    /// `try $biometricsEnabled.toggle()` flips a stored Bool; an absent value counts as false.
    public func toggle() throws { try update { $0 = !($0 ?? false) } }
}

extension SecureStoredValue {
    /// `try $trustedDevices.append("device-abc")` adds an element, starting an array if none is stored.
    public func append<Element>(_ element: Element) throws where Value == [Element] {
        try update { $0 = ($0 ?? []) + [element] }
    }

    /// `try $trustedDevices.append(contentsOf: ["a", "b"])` adds several elements, starting an array if none is
    /// stored.
    public func append<Element>(contentsOf elements: [Element]) throws where Value == [Element] {
        try update { $0 = ($0 ?? []) + elements }
    }

    /// `try $trustedDevices.togglePresence("device-abc")` removes the element if present and appends it otherwise.
    public func togglePresence<Element: Equatable>(_ element: Element) throws where Value == [Element] {
        try update { stored in
            var array = stored ?? []
            array.togglePresence(element)
            stored = array
        }
    }

    /// `try $trustedDevices.replace("old", with: "new")` replaces the first occurrence of an element.
    public func replace<Element: Equatable>(_ element: Element, with replacement: Element) throws
    where Value == [Element] {
        try update { $0?.replaceFirst(element, with: replacement) }
    }

    /// `try $trustedDevices.remove("device-abc")` removes every occurrence of an element.
    public func remove<Element: Equatable>(_ element: Element) throws where Value == [Element] {
        try update { $0?.removeEvery(element) }
    }

    /// `try $apiKeys.update(key: "github", value: "ghp_…")` sets one entry of a stored dictionary; nil removes it.
    public func update<Key, Entry>(key: Key, value: Entry?) throws where Value == [Key: Entry] {
        try update { stored in
            var dictionary = stored ?? [:]
            dictionary[key] = value
            stored = dictionary
        }
    }
}
