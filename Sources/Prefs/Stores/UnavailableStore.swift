/// Stands in for a store that could not be opened (for example the default vault with a wrong key file): every
/// operation throws the error that prevented opening, so wrappers read their defaults and report it, and writes
/// fail loudly instead of going somewhere else.
final class UnavailableStore: KeyValueStore {
    let error: any Error
    let hub = StoreHub()

    init(_ error: any Error) { self.error = error }

    func read(_ key: String) throws -> PrefValue? { throw error }
    func readAll() throws -> [String: PrefValue] { throw error }
    func write(_ changes: [String: PrefValue?]) throws { throw error }
}
