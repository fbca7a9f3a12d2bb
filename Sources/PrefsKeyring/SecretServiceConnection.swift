// The Secret Service is a D-Bus service of Linux desktops: on other platforms this module declares nothing.
#if os(Linux)
    import CLibSecret
    import CSodium
    import Foundation
    import Prefs
    import Synchronization

    #if canImport(Glibc)
        import Glibc
    #endif

    /// One conversation with the Secret Service through libsecret: the session bus, a session opened with the service
    /// (secrets travel encrypted over the bus), and the calls a vault key needs. Every call is bounded: libsecret's
    /// synchronous calls wait on D-Bus, so each gets a `GCancellable` that is cancelled once its limit has passed.
    ///
    /// A connection is made for one key operation and dropped after it; nothing of libsecret is kept between
    /// operations, so a keyring daemon restarted meanwhile is simply found again.
    final class SecretServiceConnection {
        private let bus: OpaquePointer
        private let service: UnsafeMutablePointer<SecretService>
        /// The bound of each call to the bus or the service.
        private let timeout: Duration
        /// The bound of an unlock prompt, which waits for a person.
        private let promptTimeout: Duration

        init(timeout: Duration, promptTimeout: Duration) throws(KeyringError) {
            try Self.requireSessionBusAddress()
            self.timeout = timeout
            self.promptTimeout = promptTimeout
            let bus: OpaquePointer?
            do {
                bus = try bounded(timeout, "connecting to the session bus") {
                    g_bus_get_sync(G_BUS_TYPE_SESSION, $0, $1)
                }
            } catch .serviceFailed(_, let message) {
                throw .noSessionBus(reason: message)
            }
            guard let bus else { throw .noSessionBus(reason: "GIO returned no connection") }
            // GIO's session bus ends the process when the bus goes away; an app losing its keyring must not end.
            g_dbus_connection_set_exit_on_close(bus, 0)
            let service: UnsafeMutablePointer<SecretService>?
            do {
                service = try bounded(timeout, "opening a session with the Secret Service") {
                    secret_service_open_sync(secret_service_get_type(), nil, SECRET_SERVICE_OPEN_SESSION, $0, $1)
                }
            } catch {
                g_object_unref(UnsafeMutableRawPointer(bus))
                throw error
            }
            guard let service else {
                g_object_unref(UnsafeMutableRawPointer(bus))
                throw .noSecretService(reason: "libsecret returned no service")
            }
            self.bus = bus
            self.service = service
        }

        deinit {
            g_object_unref(service)
            g_object_unref(UnsafeMutableRawPointer(bus))
        }

        /// GIO would otherwise try `dbus-launch --autolaunch`, which needs X11 and can wait on a display: without an
        /// address and without the bus socket systemd makes, there is no session bus.
        private static func requireSessionBusAddress() throws(KeyringError) {
            let environment = ProcessInfo.processInfo.environment
            if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return }
            guard let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty else {
                throw .noSessionBus(reason: "DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR are not set")
            }
            var info = stat()
            guard stat(runtime + "/bus", &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else {
                throw .noSessionBus(reason: "DBUS_SESSION_BUS_ADDRESS is not set and \(runtime)/bus is not a socket")
            }
        }

        // MARK: The key of one vault

        /// The key kept under `attributes`, unlocking its keyring first (with a prompt when `prompting`); nil when none
        /// is kept.
        func findKey(_ attributes: KeyAttributes, prompting: Bool) throws(KeyringError) -> SecureBytes? {
            let items = try search(attributes)
            defer { prefs_free_object_list(items) }
            let found = Self.objects(items, as: SecretItem.self)
            guard !found.isEmpty else { return nil }
            try unlock(found.filter { secret_item_get_locked($0) != 0 }, prompting: prompting)
            var key: SecureBytes?
            for item in found {
                _ = try bounded(timeout, "reading the vault key") { secret_item_load_secret_sync(item, $0, $1) }
                guard let value = secret_item_get_secret(item) else {
                    throw .invalidItem(reason: "the item \(Self.path(of: item)) has no secret")
                }
                defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
                let decoded = try Self.decode(value, item: Self.path(of: item))
                if let key, !Self.same(key, decoded) {
                    throw .invalidItem(
                        reason: "\(found.count) items hold different keys for this vault; keep the one that opens it "
                            + "and delete the others (secret-tool search --all application \(attributes.application))")
                }
                key = decoded
            }
            return key
        }

        /// Makes a new random key and keeps it in the default collection under `attributes` and `label`.
        func createKey(_ attributes: KeyAttributes, label: String, prompting: Bool) throws(KeyringError) -> SecureBytes
        {
            let collection = try bounded(timeout, "finding the default keyring") {
                secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, $0, $1)
            }
            guard let collection else { throw .noDefaultCollection }
            defer { g_object_unref(collection) }
            if secret_collection_get_locked(collection) != 0 { try unlock([collection], prompting: prompting) }
            let key = SecureBytes.random(count: 32)
            let value = Self.encode(key)
            defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
            let table = attributes.table()
            defer { g_hash_table_unref(table) }
            let item = try bounded(timeout, "storing the vault key") {
                secret_item_create_sync(
                    collection, prefs_vault_key_schema(), table, label, value, SECRET_ITEM_CREATE_NONE, $0, $1)
            }
            if let item { g_object_unref(item) }
            return key
        }

        /// Deletes every item kept under `attributes`; none is not an error.
        func deleteKey(_ attributes: KeyAttributes, prompting: Bool) throws(KeyringError) {
            let items = try search(attributes)
            defer { prefs_free_object_list(items) }
            let found = Self.objects(items, as: SecretItem.self)
            try unlock(found.filter { secret_item_get_locked($0) != 0 }, prompting: prompting)
            for item in found {
                _ = try bounded(timeout, "deleting the vault key") { secret_item_delete_sync(item, $0, $1) }
            }
        }

        // MARK: Calls

        /// The items kept under `attributes`, locked ones too: matched by attributes alone (see
        /// `prefs_vault_key_search_schema`), so a locked keyring's item is found, and then refused as locked, rather than
        /// taken for no key at all.
        private func search(_ attributes: KeyAttributes) throws(KeyringError) -> UnsafeMutablePointer<GList>? {
            let table = attributes.table()
            defer { g_hash_table_unref(table) }
            return try bounded(timeout, "searching for the vault key") {
                secret_service_search_sync(service, prefs_vault_key_search_schema(), table, SECRET_SEARCH_ALL, $0, $1)
            }
        }

        /// Unlocks `objects` (items or collections) with a prompt, or refuses without one.
        private func unlock<Object>(_ objects: [UnsafeMutablePointer<Object>], prompting: Bool) throws(KeyringError) {
            guard let first = objects.first else { return }
            let collection = Self.collectionName(of: first)
            guard prompting else { throw .locked(collection: collection) }
            let call = UnlockCall(service: service, objects: objects.map { UnsafeMutableRawPointer($0) })
            let count = try call.run(within: promptTimeout, "unlocking the keyring \(collection)")
            // A dismissed prompt is no error to libsecret: the objects simply stay locked.
            guard count == objects.count else { throw .unlockDismissed(collection: collection) }
        }

        // MARK: Helpers

        private static func objects<Object>(
            _ list: UnsafeMutablePointer<GList>?, as type: Object.Type
        ) -> [UnsafeMutablePointer<Object>] {
            var objects: [UnsafeMutablePointer<Object>] = []
            var node = list
            while let current = node {
                if let data = current.pointee.data { objects.append(data.assumingMemoryBound(to: Object.self)) }
                node = current.pointee.next
            }
            return objects
        }

        /// The D-Bus object path of an item or collection.
        private static func path<Object>(of object: UnsafeMutablePointer<Object>) -> String {
            let proxy = UnsafeMutableRawPointer(object).assumingMemoryBound(to: GDBusProxy.self)
            return g_dbus_proxy_get_object_path(proxy).map { String(cString: $0) } ?? "?"
        }

        /// The name of the collection an item is in, or of a collection: the last part of its object path
        /// (`login` for the login keyring).
        private static func collectionName<Object>(of object: UnsafeMutablePointer<Object>) -> String {
            var parts = path(of: object).split(separator: "/")
            if Object.self == SecretItem.self, parts.count > 1 { parts.removeLast() }
            return parts.last.map(String.init) ?? "?"
        }

        /// The stored form of a key: base64 text, so every Secret Service keeps it intact and a person sees text.
        /// Encoded in `sodium_malloc` memory; libsecret copies it into its own locked memory.
        private static func encode(_ key: SecureBytes) -> OpaquePointer {
            let text = SecureBytes(count: base64Count + 1)
            return text.withUnsafeMutableBytes { output in
                key.withUnsafeBytes { input in
                    _ = sodium_bin2base64(
                        output.baseAddress!.assumingMemoryBound(to: CChar.self), output.count,
                        input.baseAddress!.assumingMemoryBound(to: UInt8.self), input.count,
                        sodium_base64_VARIANT_ORIGINAL)
                }
                return secret_value_new(
                    output.baseAddress!.assumingMemoryBound(to: CChar.self), base64Count, "text/plain")
            }
        }

        /// 32 bytes in padded base64.
        private static let base64Count = 44

        private static func decode(_ value: OpaquePointer, item: String) throws(KeyringError)
            -> SecureBytes
        {
            var length = 0
            guard let text = secret_value_get(value, &length), length == base64Count else {
                throw .invalidItem(reason: "the secret of \(item) is not a 32-byte key in base64")
            }
            let key = SecureBytes(count: 32)
            var decoded = 0
            var end: UnsafePointer<CChar>?
            let status = key.withUnsafeMutableBytes { output in
                sodium_base642bin(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), output.count, text, length, nil, &decoded,
                    &end, sodium_base64_VARIANT_ORIGINAL)
            }
            guard status == 0, decoded == 32, end == text + length else {
                throw .invalidItem(reason: "the secret of \(item) is not a 32-byte key in base64")
            }
            return key
        }

        private static func same(_ first: SecureBytes, _ second: SecureBytes) -> Bool {
            first.withUnsafeBytes { one in
                second.withUnsafeBytes { two in
                    one.count == two.count && sodium_memcmp(one.baseAddress!, two.baseAddress!, one.count) == 0
                }
            }
        }
    }

    /// The attributes that find a vault's key: the app it belongs to and the vault file's path.
    struct KeyAttributes {
        let application: String
        let vault: String

        /// A new attribute table for libsecret; the caller unrefs it.
        func table() -> OpaquePointer { prefs_vault_key_attributes(application, vault) }
    }

    /// Runs `call`, a GIO or libsecret call that takes a `GCancellable` and a `GError`, cancelling it once `limit` has
    /// passed, and turns its error into a ``KeyringError``: `.timedOut` when the limit cut it short.
    func bounded<Result>(
        _ limit: Duration, _ operation: String,
        _ call: (UnsafeMutablePointer<GCancellable>, UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> Result
    ) throws(KeyringError) -> Result {
        let cancellable = g_cancellable_new()!
        defer { g_object_unref(cancellable) }
        let alarm = Alarm(cancellable)
        alarm.arm(after: limit)
        var failure: UnsafeMutablePointer<GError>?
        let result = withUnsafeMutablePointer(to: &failure) { call(cancellable, $0) }
        let fired = alarm.disarm()
        guard let failure else { return result }
        defer { g_error_free(failure) }
        throw KeyringError(failure.pointee, operation: operation, cutShort: fired ? limit : nil)
    }

    extension KeyringError {
        /// The error of a failed call: which part was missing, from GIO's and D-Bus's error codes.
        init(_ error: GError, operation: String, cutShort limit: Duration?) {
            let message = error.message.map { String(cString: $0) } ?? "no message"
            let code = UInt32(bitPattern: error.code)
            if error.domain == g_io_error_quark() {
                if code == G_IO_ERROR_CANCELLED.rawValue, let limit {
                    self = .timedOut(operation: operation, after: limit)
                    return
                }
                if code == G_IO_ERROR_TIMED_OUT.rawValue {
                    self = .timedOut(operation: operation, after: .seconds(25))
                    return
                }
                if code == G_IO_ERROR_CLOSED.rawValue || code == G_IO_ERROR_BROKEN_PIPE.rawValue
                    || code == G_IO_ERROR_CONNECTION_CLOSED.rawValue
                {
                    self = .noSessionBus(reason: message)
                    return
                }
            }
            if error.domain == g_dbus_error_quark() {
                switch code {
                case G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue, G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue,
                    G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue, G_DBUS_ERROR_SPAWN_FORK_FAILED.rawValue,
                    G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue, G_DBUS_ERROR_SPAWN_CHILD_SIGNALED.rawValue,
                    G_DBUS_ERROR_SPAWN_FAILED.rawValue, G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue,
                    G_DBUS_ERROR_SPAWN_SERVICE_INVALID.rawValue, G_DBUS_ERROR_SPAWN_FILE_INVALID.rawValue:
                    self = .noSecretService(reason: message)
                    return
                case G_DBUS_ERROR_TIMEOUT.rawValue, G_DBUS_ERROR_NO_REPLY.rawValue, G_DBUS_ERROR_TIMED_OUT.rawValue:
                    self = .timedOut(operation: operation, after: .seconds(25))
                    return
                case G_DBUS_ERROR_DISCONNECTED.rawValue, G_DBUS_ERROR_NO_SERVER.rawValue:
                    self = .noSessionBus(reason: message)
                    return
                default: break
                }
            }
            if error.domain == secret_error_get_quark(), code == SECRET_ERROR_IS_LOCKED.rawValue {
                self = .locked(collection: message)
                return
            }
            self = .serviceFailed(operation: operation, message: message)
        }
    }

    /// Cancels a `GCancellable` from another thread once a time limit has passed, unless disarmed first.
    private final class Alarm: @unchecked Sendable {
        // @unchecked Sendable: GCancellable is thread-safe, the object holds a reference to it for its whole life, and
        // `state` guards the rest.
        private let cancellable: UnsafeMutablePointer<GCancellable>
        private let state = Mutex((disarmed: false, fired: false))

        init(_ cancellable: UnsafeMutablePointer<GCancellable>) {
            _ = g_object_ref(cancellable)
            self.cancellable = cancellable
        }

        deinit { g_object_unref(cancellable) }

        func arm(after limit: Duration) {
            let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { self.fire() }
        }

        private func fire() {
            let cancel = state.withLock { state -> Bool in
                guard !state.disarmed else { return false }
                state.fired = true
                return true
            }
            if cancel { g_cancellable_cancel(cancellable) }
        }

        /// Stops the alarm; returns whether it had fired.
        func disarm() -> Bool {
            state.withLock { state in
                state.disarmed = true
                return state.fired
            }
        }
    }

    /// An unlock, which waits for a person at the keyring's prompt, on a thread of its own. Cancelled, libsecret's
    /// unlock does not return at once: it asks the keyring to dismiss the prompt and waits for that answer too, which a
    /// keyring whose prompter never started may not give for a minute and more (`KeyringKeyTests` ›
    /// `anUnansweredUnlockPromptEndsAtThePromptsBound`). So the caller waits for the call at most its bound; past it the
    /// call is cancelled and left to end on its thread, which holds references to everything it uses.
    private final class UnlockCall: @unchecked Sendable {
        // @unchecked Sendable: the objects are referenced for the call's whole life, GLib's reference counts and
        // cancellables are thread-safe, and `outcome` is written before `finished` is signalled and read only after.
        private let service: UnsafeMutablePointer<SecretService>
        private let objects: [UnsafeMutableRawPointer]
        private let cancellable = g_cancellable_new()!
        private let finished = DispatchSemaphore(value: 0)
        private var outcome: Result<Int32, KeyringError> = .success(0)

        init(service: UnsafeMutablePointer<SecretService>, objects: [UnsafeMutableRawPointer]) {
            _ = g_object_ref(service)
            for object in objects { _ = g_object_ref(object) }
            self.service = service
            self.objects = objects
        }

        deinit {
            for object in objects { g_object_unref(object) }
            g_object_unref(service)
            g_object_unref(cancellable)
        }

        /// The number of objects unlocked; throws `.timedOut` once `limit` has passed without an answer.
        func run(within limit: Duration, _ operation: String) throws(KeyringError) -> Int32 {
            Thread { [self] in
                var list: UnsafeMutablePointer<GList>?
                for object in objects { list = g_list_append(list, object) }
                defer { g_list_free(list) }
                var unlocked: UnsafeMutablePointer<GList>?
                var failure: UnsafeMutablePointer<GError>?
                let count = secret_service_unlock_sync(service, list, cancellable, &unlocked, &failure)
                prefs_free_object_list(unlocked)
                if let failure {
                    outcome = .failure(KeyringError(failure.pointee, operation: operation, cutShort: nil))
                    g_error_free(failure)
                } else {
                    outcome = .success(count)
                }
                finished.signal()
            }.start()
            let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
            guard finished.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success else {
                g_cancellable_cancel(cancellable)
                throw .timedOut(operation: operation, after: limit)
            }
            return try outcome.get()
        }
    }
#endif
