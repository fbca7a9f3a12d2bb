import Foundation
import Synchronization

/// What a store's layers read of the values the store keeps itself (the `.user` layer).
protocol OwnValues: AnyObject, Sendable {
    /// The store's own value of `key`, without any layer.
    func ownValue(forKey key: String) -> PrefValue?
    /// Every value the store keeps itself.
    func ownValues() -> [String: PrefValue]
}

/// The read-only layers of one store (a ``LayerStack``), the sources that feed them, and the watches on the
/// system-wide files.
///
/// The store keeps its own values and resolves a key by passing its own value to ``value(forKey:user:)``; it calls
/// ``checkWritable(_:)`` before a write. Changes of the read-only layers are applied here and announced on the
/// store's feed after every lock is released, for the keys whose effective value changed (read through
/// ``OwnValues``); a source that cannot be read is reported and skipped.
final class StoreLayers: Sendable {
    private struct Environment {
        let prefix: String
        /// The variables that start with the prefix, by full name.
        let variables: [String: String]
        /// The registered keys by the variable each maps to.
        var keysByName: [String: Set<String>] = [:]
    }

    /// Everything, under one lock: the stack, its sources, the store it sits over, the watches on the system files.
    private struct State {
        var stack = LayerStack()
        var arguments = false
        var environment: Environment?
        var reportedAmbiguities: Set<String> = []
        weak var store: (any OwnValues)?
        var systemFiles: LayerSources.SystemFiles?
        /// The file each key of the system-wide defaults and of the managed values comes from.
        var origins: [PreferenceLayer: [String: String]] = [:]
        var watches: [String: FileWatchToken] = [:]
        /// Reloads of the system files started and applied: an older read never replaces a newer one.
        var reloadsStarted: UInt64 = 0
        var reloadsApplied: UInt64 = 0
    }

    private let state = Mutex(State())
    let changes: ChangeFeed
    /// The failures of the system-wide files already reported, each once until they read again.
    private let reported = ReportLedger()

    init(changes: ChangeFeed) { self.changes = changes }

    /// Tells the layers where the store keeps its own values; a store calls it once it is initialized.
    func attach(_ store: any OwnValues) { state.withLock { $0.store = store } }

    deinit {
        for token in state.withLock({ $0.watches.values }) { token.cancel() }
    }

    // MARK: Reads

    /// What `key` reads as, given the store's own value of it.
    func value(forKey key: String, user: PrefValue?) -> PrefValue? {
        state.withLock { $0.stack.value(forKey: key, user: user) }
    }

    /// The layer the effective value of `key` comes from; call holding none of the store's locks.
    func origin(of key: String) -> PreferenceLayer? {
        let own = state.withLock { $0.store }?.ownValue(forKey: key)
        return state.withLock { $0.stack.resolve(key, user: own)?.layer }
    }

    /// What a read-modify-write starts from when the user has no value: the system-wide or registered default.
    func valueBelowUser(_ key: String) -> PrefValue? { state.withLock { $0.stack.valueBelowUser(key) } }

    /// The values of one layer, for tools that explain where values come from.
    func values(of layer: PreferenceLayer) -> [String: PrefValue] {
        if layer == .user { return state.withLock { $0.store }?.ownValues() ?? [:] }
        return state.withLock { $0.stack.values(of: layer) }
    }

    /// The file a system-wide default or a managed value of `key` comes from.
    func file(of key: String, in layer: PreferenceLayer) -> String? {
        state.withLock { $0.origins[layer]?[key] }
    }

    /// The environment variable `key` is read from, when the store reads the environment.
    func environmentVariable(forKey key: String) -> String? {
        state.withLock { $0.environment }.map { LayerSources.environmentName(forKey: key, prefix: $0.prefix) }
    }

    /// Throws ``PrefsError/forced(key:)`` when an administrator forced `key`.
    func checkWritable(_ key: String) throws(PrefsError) {
        if state.withLock({ $0.stack.isForced(key) }) { throw .forced(key: key) }
    }

    // MARK: Changes of the read-only layers

    /// Applies `body` to the layers and returns the keys whose effective value or layer it changed, of those it
    /// says it touched, with whatever else it returns. The store's own values are read after the lock is released.
    private func change<Extra>(
        _ body: (inout State) -> (touched: Set<String>, extra: Extra)
    ) -> (changed: Set<String>, extra: Extra) {
        let (old, new, touched, extra, store) = state.withLock { state in
            let old = state.stack
            let (touched, extra) = body(&state)
            return (old, state.stack, touched, extra, state.store)
        }
        guard !touched.isEmpty else { return ([], extra) }
        return (LayerStack.changes(from: old, to: new, in: touched) { store?.ownValue(forKey: $0) }, extra)
    }

    // MARK: Registered defaults

    /// Registers defaults for this process: a later registration of a key replaces an earlier one, as
    /// `UserDefaults.register(defaults:)` does, unless `keepingExisting`, which declarations use so the first
    /// declaration of a key wins.
    func register(_ defaults: [String: PrefValue], keepingExisting: Bool = false) {
        guard !defaults.isEmpty else { return }
        if keepingExisting {
            declare(defaults)
            return
        }
        let (changed, ambiguities) = change { state -> (Set<String>, [PrefsError]) in
            var touched = state.stack.merge(into: .registered, defaults)
            let (environmentChanges, ambiguities) = Self.learn(defaults.keys, in: &state)
            touched.formUnion(environmentChanges)
            return (touched, ambiguities)
        }
        finish(changed, ambiguities)
    }

    /// A declaration's defaults, for keys that have none registered yet. The key's value was its default before
    /// anyone read it through this wrapper, so nothing changed for an observer and nothing is compared: only the
    /// keys added are touched (cached reads of them decode again), in place, so that declaring a key costs the same
    /// however many a store already has.
    private func declare(_ defaults: [String: PrefValue]) {
        let (added, ambiguities) = state.withLock { state -> (Set<String>, [PrefsError]) in
            var added = Set<String>()
            for (key, value) in defaults where state.stack.insertIfAbsent(value, forKey: key, in: .registered) {
                added.insert(key)
            }
            guard !added.isEmpty else { return ([], []) }
            let (environmentChanges, ambiguities) = Self.learn(added, in: &state)
            return (added.union(environmentChanges), ambiguities)
        }
        for error in ambiguities { ErrorReporter.report(error, key: "", operation: .read) }
        changes.invalidate(added)
    }

    // MARK: Sources

    /// Adds the command-line argument layer (once).
    func enableArguments(_ values: [String: PrefValue] = LayerSources.processArguments) {
        let (changed, _) = change { state in
            guard !state.arguments else { return ([], ()) }
            state.arguments = true
            return (state.stack.setLayer(.arguments, values), ())
        }
        changes.publish(changedKeys: changed)
    }

    /// Adds the environment layer for `prefix` (once; a later prefix is ignored): registered keys take the values
    /// of their variables.
    func enableEnvironment(prefix: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let (changed, ambiguities) = change { state -> (Set<String>, [PrefsError]) in
            guard state.environment == nil else { return ([], []) }
            state.environment = Environment(prefix: prefix, variables: environment.filter { $0.key.hasPrefix(prefix) })
            return Self.learn(Array(state.stack.values(of: .registered).keys), in: &state)
        }
        finish(changed, ambiguities)
    }

    /// Adds the system-wide defaults of `domain` from `folders` and its managed values from `managed` (once), and
    /// watches them.
    func enableSystem(domain: String, folders: [URL], managed: ManagedLocation = .current) {
        let isNew = state.withLock { state in
            guard state.systemFiles == nil else { return false }
            state.systemFiles = LayerSources.SystemFiles(domain: domain, folders: folders, managed: managed)
            return true
        }
        if isNew { reloadSystem() }
    }

    /// Re-reads the system-wide files, applies them, re-arms the watches and announces what changed. A file that
    /// cannot be read is reported (once until it reads again) and adds nothing; the other files still apply.
    func reloadSystem() {
        guard let files = state.withLock({ $0.systemFiles }) else { return }
        var watchesAdded = true
        // A file written into a folder before its watch was added raises no event: once new watches are in place,
        // read again (a folder and the file in it created in quick succession are both seen).
        while watchesAdded {
            let ticket = state.withLock { state in
                state.reloadsStarted += 1
                return state.reloadsStarted
            }
            let defaults = LayerSources.read(files.defaults)
            let managed = LayerSources.read([files.managed], trust: files.managedLocation)
            let (changed, _) = change { state in
                // A reload that started later has applied newer reads already.
                guard ticket > state.reloadsApplied else { return ([], ()) }
                state.reloadsApplied = ticket
                state.origins = [.systemDefaults: defaults.files, .managed: managed.files]
                let touched = state.stack.setLayer(.systemDefaults, defaults.values).union(
                    state.stack.setLayer(.managed, managed.values))
                return (touched, ())
            }
            let errors = defaults.errors + managed.errors
            watchesAdded = rearmWatches(files)
            if errors.isEmpty { reported.forget() }
            changes.reported.fromBackground {
                for error in errors { reported.reportOnce(error, key: "", operation: .read) }
            }
            changes.publish(changedKeys: changed)
        }
    }

    /// Watches each file whose folder exists, or else the folder itself when its parent exists, so creating the
    /// folder or the file is noticed. Never creates a system folder. Returns whether a watch was added.
    private func rearmWatches(_ files: LayerSources.SystemFiles) -> Bool {
        var targets: Set<String> = []
        for url in files.defaults + [files.managed] {
            let folder = url.deletingLastPathComponent()
            if Self.isDirectory(folder) {
                targets.insert(url.path(percentEncoded: false))
            } else if Self.isDirectory(folder.deletingLastPathComponent()) {
                targets.insert(folder.path(percentEncoded: false))
            }
        }
        var obsolete: [FileWatchToken] = []
        var missing: [String] = []
        state.withLock { state in
            for (path, token) in state.watches where !targets.contains(path) {
                obsolete.append(token)
                state.watches[path] = nil
            }
            missing = targets.filter { state.watches[$0] == nil }
        }
        for token in obsolete { token.cancel() }
        for path in missing {
            let token = DirectoryWatcher.shared.watch(fileAt: URL(filePath: path)) { [weak self] in
                self?.reloadSystem()
            }
            let duplicate = state.withLock { state -> FileWatchToken? in
                if state.watches[path] != nil { return token }
                state.watches[path] = token
                return nil
            }
            duplicate?.cancel()
        }
        return !missing.isEmpty
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path(percentEncoded: false), isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    // MARK: Environment

    /// Maps newly registered keys to their variables and updates the environment layer; returns the keys it
    /// touched and the ambiguous variables not reported before.
    private static func learn(_ keys: some Sequence<String>, in state: inout State) -> (Set<String>, [PrefsError]) {
        guard var environment = state.environment else { return ([], []) }
        var touched: Set<String> = []
        for key in keys {
            let name = LayerSources.environmentName(forKey: key, prefix: environment.prefix)
            guard environment.variables[name] != nil else { continue }
            environment.keysByName[name, default: []].insert(key)
            touched.insert(name)
        }
        state.environment = environment
        guard !touched.isEmpty else { return ([], []) }
        var layer = state.stack.values(of: .environment)
        var ambiguities: [PrefsError] = []
        for name in touched {
            let keys = environment.keysByName[name] ?? []
            let found = LayerSources.environment(environment.variables, prefix: environment.prefix, keys: keys)
            for key in keys { layer[key] = found.values[key] }
            if let ambiguous = found.ambiguous[name], state.reportedAmbiguities.insert(name).inserted {
                ambiguities.append(.ambiguousEnvironmentVariable(name, keys: ambiguous))
            }
        }
        return (state.stack.setLayer(.environment, layer), ambiguities)
    }

    private func finish(_ changed: Set<String>, _ reports: [PrefsError]) {
        for error in reports { ErrorReporter.report(error, key: "", operation: .read) }
        changes.publish(changedKeys: changed)
    }
}
