import Foundation
import Synchronization

/// The store a ``StoreLayers`` feeds: it keeps the ``LayerStack`` beside its own values (the `.user` layer), under
/// its own lock, so that a read resolves a key through every layer in one critical section.
protocol OwnValues: AnyObject, Sendable {
    /// Runs `body` on the store's layers and its own values, under the store's lock.
    func withLayers<R>(_ body: (inout LayerStack, [String: PrefValue]) -> R) -> R
}

/// The sources that feed one store's read-only layers (arguments, environment, system-wide files) and the watches
/// on those files; the ``LayerStack`` itself lives with the store's values (``OwnValues``).
///
/// Changes of the read-only layers are announced on the store's feed after every lock is released, for the keys
/// whose effective value changed; a source that cannot be read is reported and skipped.
final class StoreLayers: Sendable {
    private struct Environment {
        let prefix: String
        /// The variables that start with the prefix, by full name.
        let variables: [String: String]
        /// The registered keys by the variable each maps to.
        var keysByName: [String: Set<String>] = [:]
    }

    /// The sources, the store they feed and the watches on the system files, under one lock.
    private struct State {
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

    /// Runs `body` on the store's stack and own values (an empty stack once the store is gone).
    private func withStack<R>(_ body: (inout LayerStack, [String: PrefValue]) -> R) -> R {
        guard let store = state.withLock({ $0.store }) else {
            var empty = LayerStack()
            return body(&empty, [:])
        }
        return store.withLayers(body)
    }

    /// The layer the effective value of `key` comes from.
    func origin(of key: String) -> PreferenceLayer? {
        withStack { stack, own in stack.resolve(key, user: own[key])?.layer }
    }

    /// The values of one layer, for tools that explain where values come from.
    func values(of layer: PreferenceLayer) -> [String: PrefValue] {
        withStack { stack, own in layer == .user ? own : stack.values(of: layer) }
    }

    /// The file a system-wide default or a managed value of `key` comes from.
    func file(of key: String, in layer: PreferenceLayer) -> String? {
        state.withLock { $0.origins[layer]?[key] }
    }

    /// The environment variable `key` is read from, when the store reads the environment.
    func environmentVariable(forKey key: String) -> String? {
        state.withLock { $0.environment }.map { LayerSources.environmentName(forKey: key, prefix: $0.prefix) }
    }

    // MARK: Changes of the read-only layers

    /// Applies `body` to the stack (holding this object's lock, then the store's) and returns the keys whose
    /// effective value or layer it changed, of those it says it touched, with whatever else it returns.
    /// Without `comparing`, the stack changes in place, uncopied, and every key touched counts as changed.
    private func change<Extra: Sendable>(
        comparing: Bool = true, _ body: (inout LayerStack, inout State) -> (touched: Set<String>, extra: Extra)
    ) -> (changed: Set<String>, extra: Extra) {
        state.withLock { state in
            var empty = LayerStack()
            guard let store = state.store else {
                let (touched, extra) = body(&empty, &state)
                return (touched, extra)
            }
            return store.withLayers { stack, own in
                guard comparing else {
                    let (touched, extra) = body(&stack, &state)
                    return (touched, extra)
                }
                let old = stack
                let (touched, extra) = body(&stack, &state)
                guard !touched.isEmpty else { return ([], extra) }
                return (LayerStack.changes(from: old, to: stack, in: touched) { own[$0] }, extra)
            }
        }
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
        let (changed, ambiguities) = change { stack, state -> (Set<String>, [PrefsError]) in
            var touched = stack.merge(into: .registered, defaults)
            let (environmentChanges, ambiguities) = Self.learn(defaults.keys, in: &state, stack: &stack)
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
        let (added, ambiguities) = change(comparing: false) { stack, state -> (Set<String>, [PrefsError]) in
            var added = Set<String>()
            for (key, value) in defaults where stack.insertIfAbsent(value, forKey: key, in: .registered) {
                added.insert(key)
            }
            guard !added.isEmpty else { return ([], []) }
            let (environmentChanges, ambiguities) = Self.learn(added, in: &state, stack: &stack)
            return (added.union(environmentChanges), ambiguities)
        }
        for error in ambiguities { ErrorReporter.report(error, key: "", operation: .read) }
        changes.invalidate(added)
    }

    // MARK: Sources

    /// Adds the command-line argument layer (once).
    func enableArguments(_ values: [String: PrefValue] = LayerSources.processArguments) {
        let (changed, _) = change { stack, state in
            guard !state.arguments else { return ([], ()) }
            state.arguments = true
            return (stack.setLayer(.arguments, values), ())
        }
        changes.publish(changedKeys: changed)
    }

    /// Adds the environment layer for `prefix` (once; a later prefix is ignored): registered keys take the values
    /// of their variables.
    func enableEnvironment(prefix: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let (changed, ambiguities) = change { stack, state -> (Set<String>, [PrefsError]) in
            guard state.environment == nil else { return ([], []) }
            state.environment = Environment(prefix: prefix, variables: environment.filter { $0.key.hasPrefix(prefix) })
            return Self.learn(Array(stack.values(of: .registered).keys), in: &state, stack: &stack)
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
            let (changed, _) = change { stack, state in
                // A reload that started later has applied newer reads already.
                guard ticket > state.reloadsApplied else { return ([], ()) }
                state.reloadsApplied = ticket
                state.origins = [.systemDefaults: defaults.files, .managed: managed.files]
                let touched = stack.setLayer(.systemDefaults, defaults.values).union(
                    stack.setLayer(.managed, managed.values))
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
    private static func learn(_ keys: some Sequence<String>, in state: inout State, stack: inout LayerStack)
        -> (Set<String>, [PrefsError])
    {
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
        var layer = stack.values(of: .environment)
        var ambiguities: [PrefsError] = []
        for name in touched {
            let keys = environment.keysByName[name] ?? []
            let found = LayerSources.environment(environment.variables, prefix: environment.prefix, keys: keys)
            for key in keys { layer[key] = found.values[key] }
            if let ambiguous = found.ambiguous[name], state.reportedAmbiguities.insert(name).inserted {
                ambiguities.append(.ambiguousEnvironmentVariable(name, keys: ambiguous))
            }
        }
        return (stack.setLayer(.environment, layer), ambiguities)
    }

    private func finish(_ changed: Set<String>, _ reports: [PrefsError]) {
        for error in reports { ErrorReporter.report(error, key: "", operation: .read) }
        changes.publish(changedKeys: changed)
    }
}
