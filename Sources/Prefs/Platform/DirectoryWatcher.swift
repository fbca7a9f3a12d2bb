import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Stops a `DirectoryWatcher.watch(fileAt:onChange:)` on `cancel()` or when released.
///
/// After `cancel()` returns no new callback starts, but one that was already being delivered may still finish.
package final class FileWatchToken: Sendable {
    private let onCancel: @Sendable () -> Void
    private let cancelled = Atomic<Bool>(false)

    package init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = onCancel
    }

    /// Stops watching. Calling it again does nothing.
    package func cancel() {
        if !cancelled.exchange(true, ordering: .acquiringAndReleasing) { onCancel() }
    }

    deinit { cancel() }
}

/// Notices when other processes (or other objects in this one) change a file, without polling.
///
/// On Linux one inotify descriptor serves the whole watcher, read by one background thread that sleeps in `read`.
/// Each watched file's *parent directory* is watched (atomic replacement renames a new inode over the name, so a watch
/// on the file itself would go stale); tokens for files in the same directory share one directory watch. Watching
/// creates nothing: while the directory is missing, its nearest existing ancestor is watched instead, and each
/// folder that appears on the way down moves the watch one step closer and runs the callback (the file may have
/// come with it). When the directory itself is removed or renamed (`mv dir dir.old; mkdir dir`), its path is
/// watched again, or its nearest existing ancestor while nothing is there, and every callback of its files runs, so
/// they reload from the path. Events for
/// temporary (`.<name>.tmp-…`) and lock (`….lock`) files are ignored (unless a watched file has that very name),
/// and several events for one file read together produce one callback. If the kernel queue overflows, every
/// callback is called.
///
/// Callbacks run on the watcher's thread (or a Dispatch queue for polled files), outside the watcher's lock, so they
/// may watch or cancel; they should return quickly.
///
/// Portable fallback: on platforms without inotify, or when inotify cannot be used (descriptor or watch limits), each
/// file is polled every 0.5 s with a Dispatch timer comparing its `FileIdentity`.
final class DirectoryWatcher: Sendable {
    /// The watcher for the process.
    static let shared = DirectoryWatcher()
    /// How many directory watches are kept for reuse after their last token went away; beyond it the oldest goes.
    static let idleWatchLimit = 16

    let core: WatcherCore

    /// A separate watcher with its own descriptor and thread (for tests); `forcePolling` uses the portable fallback.
    init(forcePolling: Bool = false) {
        core = WatcherCore(forcePolling: forcePolling)
    }

    deinit { core.shutDown() }

    /// Calls `onChange` whenever the file at `url` is created, replaced, modified, removed or has its attributes
    /// changed, until the returned token is cancelled or released. Creates nothing, not even a missing parent folder.
    func watch(fileAt url: URL, onChange: @escaping @Sendable () -> Void) -> FileWatchToken {
        let id = core.add(path: url.fileSystemPath, onChange: onChange)
        let core = self.core
        return FileWatchToken { core.remove(id) }
    }
}

// MARK: - Core

final class WatcherCore: Sendable {
    struct Registration {
        var directory: String
        var name: String
        /// The folder `descriptor` watches: `directory`, or its nearest existing ancestor while it is missing.
        var watched: String
        /// The inotify watch descriptor, or nil when the file is polled.
        var descriptor: Int32?
        var poller: Poller?
        var onChange: @Sendable () -> Void
    }

    struct State {
        var nextID: UInt64 = 0
        var registrations: [UInt64: Registration] = [:]
        /// Registration ids per inotify watch descriptor.
        var directories: [Int32: Set<UInt64>] = [:]
        /// Watches whose last registration went away, oldest first, kept (up to `idleWatchLimit`) so that opening
        /// a store in the same folder again adds no watch and closing it removes none: a removal wakes the watcher
        /// thread with an `IN_IGNORED` event, and an open-close cycle of a small store cost twice as much.
        var idle: [Int32] = []
        /// The watched path of each inotify watch descriptor, active or idle, and the reverse, so a folder watched
        /// already is reused without a system call.
        var pathsByDescriptor: [Int32: String] = [:]
        var descriptorsByPath: [String: Int32] = [:]
        var inotify: InotifyHandles?
        /// Set once inotify could not be started, or when asked to poll.
        var pollOnly: Bool
        var isShutDown = false
    }

    let state: Mutex<State>

    init(forcePolling: Bool) {
        #if os(Linux)
            state = Mutex(State(pollOnly: forcePolling))
        #else
            state = Mutex(State(pollOnly: true))
        #endif
    }

    func add(path: String, onChange: @escaping @Sendable () -> Void) -> UInt64 {
        let directory = POSIX.parentPath(of: path)
        var registration = Registration(
            directory: directory, name: POSIX.lastComponent(of: path), watched: directory, onChange: onChange)
        return state.withLock { state in
            state.nextID += 1
            let id = state.nextID
            attach(&registration, id: id, state: &state)
            state.registrations[id] = registration
            return id
        }
    }

    /// Puts `registration` on the watch of its folder, or of the folder's nearest existing ancestor while it is
    /// missing, or on a poller when inotify cannot watch either.
    ///
    /// A folder created between finding the ancestor and watching it raises no event there, so the search is
    /// repeated once the watch is in place until it finds the same folder.
    private func attach(_ registration: inout Registration, id: UInt64, state: inout State) {
        registration.descriptor = nil
        // A folder with a watch exists (if it went away since, its watch is about to be re-armed): no system call.
        if !state.isShutDown, let descriptor = state.descriptorsByPath[registration.directory] {
            join(&registration, id: id, folder: registration.directory, descriptor: descriptor, state: &state)
            return
        }
        var folder = Self.nearestExistingFolder(of: registration.directory)
        for _ in 0..<64 {
            let ancestor = folder != registration.directory
            guard let descriptor = addDirectoryWatch(folder, ancestor: ancestor, state: &state) else { break }
            let now = Self.nearestExistingFolder(of: registration.directory)
            if now == folder {
                join(&registration, id: id, folder: folder, descriptor: descriptor, state: &state)
                return
            }
            if state.directories[descriptor] == nil { release(descriptor, state: &state) }
            folder = now
        }
        let path = registration.directory + "/" + registration.name
        registration.poller = Poller(path: path, onChange: registration.onChange)
    }

    /// Puts `registration` on the watch `descriptor` of `folder`, taking that watch back if it was idle.
    private func join(
        _ registration: inout Registration, id: UInt64, folder: String, descriptor: Int32, state: inout State
    ) {
        registration.watched = folder
        registration.descriptor = descriptor
        state.directories[descriptor, default: []].insert(id)
        state.idle.removeAll { $0 == descriptor }  // an idle watch is in use again
    }

    /// Takes registration `id` off the watch `descriptor`; a watch left without registrations is kept idle.
    private func detach(_ id: UInt64, from descriptor: Int32, state: inout State) {
        state.directories[descriptor]?.remove(id)
        if state.directories[descriptor]?.isEmpty == true {
            state.directories[descriptor] = nil
            release(descriptor, state: &state)
        }
    }

    /// Keeps a watch nobody uses for reuse, removing the oldest idle one beyond `idleWatchLimit`.
    private func release(_ descriptor: Int32, state: inout State) {
        guard !state.idle.contains(descriptor) else { return }
        state.idle.append(descriptor)
        if state.idle.count > DirectoryWatcher.idleWatchLimit {
            let evicted = state.idle.removeFirst()
            forget(evicted, state: &state)
            removeDirectoryWatch(evicted, state: state)
        }
    }

    /// Those of `ids` that watch an ancestor in which a folder on their way down may have appeared (`name`, or
    /// any name when nil): each moves to the nearest existing folder again, and is returned when it moved, so its
    /// callback runs.
    fileprivate func descend(_ ids: [UInt64], name: String?, state: inout State) -> [UInt64] {
        var moved: [UInt64] = []
        for id in ids {
            guard var registration = state.registrations[id], let current = registration.descriptor,
                registration.watched != registration.directory,
                name == nil || Self.nextComponent(of: registration) == name
            else { continue }
            let before = registration.watched
            // Join the new watch before leaving the old, so a watch both use is not released in between.
            attach(&registration, id: id, state: &state)
            if registration.descriptor != current { detach(id, from: current, state: &state) }
            state.registrations[id] = registration
            if registration.watched != before || registration.descriptor == nil { moved.append(id) }
        }
        return moved
    }

    /// The nearest folder at or above `directory` that exists (`/` at worst).
    static func nearestExistingFolder(of directory: String) -> String {
        var folder = directory
        var info = stat()
        while !(stat(folder, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR) {
            let parent = POSIX.parentPath(of: folder)
            if parent == folder { break }
            folder = parent
        }
        return folder
    }

    /// The name, inside the ancestor a registration watches, of the next folder on the way to its own.
    private static func nextComponent(of registration: Registration) -> String {
        let rest = registration.directory.dropFirst(registration.watched.count).drop { $0 == "/" }
        return String(rest.prefix { $0 != "/" })
    }

    func remove(_ id: UInt64) {
        let poller: Poller? = state.withLock { state in
            guard let registration = state.registrations.removeValue(forKey: id) else { return nil }
            if let descriptor = registration.descriptor { detach(id, from: descriptor, state: &state) }
            return registration.poller
        }
        poller?.stop()
    }

    /// Drops the path mapping of a watch descriptor that is going away.
    func forget(_ descriptor: Int32, state: inout State) {
        if let path = state.pathsByDescriptor.removeValue(forKey: descriptor),
            state.descriptorsByPath[path] == descriptor
        {
            state.descriptorsByPath[path] = nil
        }
    }

    func shutDown() {
        let pollers: [Poller] = state.withLock { state in
            state.isShutDown = true
            wakeForShutDown(state: state)
            return state.registrations.values.compactMap(\.poller)
        }
        for poller in pollers { poller.stop() }
    }

    /// Calls the callbacks of `ids` in order, each at most once, outside the lock.
    func deliver(_ ids: [UInt64]) {
        var seen = Set<UInt64>()
        let callbacks: [@Sendable () -> Void] = state.withLock { state in
            ids.compactMap { id in
                guard seen.insert(id).inserted else { return nil }
                return state.registrations[id]?.onChange
            }
        }
        for callback in callbacks { callback() }
    }

    /// Whether an event for `name` concerns a watched file rather than a temporary or lock file.
    /// Compared byte by byte: `String.contains` goes through Foundation's locale-aware search, which cost the
    /// watcher thread more than the rest of its work on every write of this process.
    static func isScratchName(_ name: String) -> Bool {
        let bytes = name.utf8
        if bytes.count >= 5, bytes.suffix(5).elementsEqual(".lock".utf8) { return true }
        guard bytes.first == UInt8(ascii: "."), bytes.count >= 5 else { return false }
        let marker = Array(".tmp-".utf8)
        let all = Array(bytes)
        for start in 0...(all.count - marker.count) where all[start] == marker[0] {
            if all[start..<(start + marker.count)].elementsEqual(marker) { return true }
        }
        return false
    }
}

// MARK: - Polling fallback

/// Polls one file's identity every 0.5 s on a Dispatch timer and calls back when it changes.
final class Poller: Sendable {
    private let timer: Mutex<(any DispatchSourceTimer)?>

    init(path: String, onChange: @escaping @Sendable () -> Void) {
        let last = Mutex<FileIdentity?>((try? FileIdentity.of(path: path)) ?? nil)
        let source = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        source.schedule(
            deadline: .now() + .milliseconds(500), repeating: .milliseconds(500), leeway: .milliseconds(100))
        source.setEventHandler {
            let current = (try? FileIdentity.of(path: path)) ?? nil
            let changed = last.withLock { previous in
                defer { previous = current }
                return previous != current
            }
            if changed { onChange() }
        }
        source.resume()
        timer = Mutex(source)
    }

    func stop() {
        timer.withLock { $0.take() }?.cancel()
    }

    deinit { stop() }
}

// MARK: - inotify

#if os(Linux)
    /// The descriptor of a running inotify watcher.
    struct InotifyHandles {
        var inotify: Int32
    }

    private enum InotifyMask {
        /// What changes a watched file: written in place, renamed over, removed, renamed away, its mode changed. A
        /// file created (`IN_CREATE`) is seen when it is written and closed or renamed into place; leaving it out
        /// keeps a commit's temporary file from waking the watcher one more time.
        static let files: UInt32 =
            UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM)
            | UInt32(IN_ATTRIB) | UInt32(IN_MOVE_SELF) | UInt32(IN_DELETE_SELF)
        /// An ancestor watched while a folder on the way down is missing: a folder created there too.
        static let ancestors: UInt32 = files | UInt32(IN_CREATE)
        static let overflow = UInt32(IN_Q_OVERFLOW)
        /// The watched directory itself went away: removed, unmounted, or renamed (the watch would follow it to
        /// its new name, away from the path being watched).
        static let directoryGone = UInt32(IN_IGNORED) | UInt32(IN_MOVE_SELF) | UInt32(IN_DELETE_SELF)
    }

    extension WatcherCore {
        /// Adds (or reuses) the inotify watch on `directory` (`ancestor`: watched while a folder below it is
        /// missing); nil means poll instead.
        fileprivate func addDirectoryWatch(_ directory: String, ancestor: Bool, state: inout State) -> Int32? {
            guard !state.pollOnly, !state.isShutDown else { return nil }
            if state.inotify == nil {
                guard let handles = startThread() else {
                    state.pollOnly = true
                    return nil
                }
                state.inotify = handles
            }
            guard let handles = state.inotify else { return nil }
            let mask = ancestor ? InotifyMask.ancestors | UInt32(IN_MASK_ADD) : InotifyMask.files | UInt32(IN_MASK_ADD)
            let descriptor = inotify_add_watch(handles.inotify, directory, mask)
            guard descriptor >= 0 else { return nil }
            state.pathsByDescriptor[descriptor] = directory
            state.descriptorsByPath[directory] = descriptor
            return descriptor
        }

        /// The directory watched by `descriptor` was removed or moved: watches its path again (a folder created
        /// there since, or the nearest ancestor that exists) and returns its registrations, whose callbacks must
        /// run so their files are reloaded from the path.
        private func rearm(_ descriptor: Int32, state: inout State) -> [UInt64] {
            forget(descriptor, state: &state)
            if let index = state.idle.firstIndex(of: descriptor) {
                // Nobody uses it: forget it; the next registration in that folder watches the path afresh.
                state.idle.remove(at: index)
                if let handles = state.inotify { _ = inotify_rm_watch(handles.inotify, descriptor) }
                return []
            }
            guard let members = state.directories.removeValue(forKey: descriptor) else { return [] }
            if let handles = state.inotify { _ = inotify_rm_watch(handles.inotify, descriptor) }
            var ids: [UInt64] = []
            for id in members.sorted() {
                guard var registration = state.registrations[id] else { continue }
                ids.append(id)
                attach(&registration, id: id, state: &state)
                state.registrations[id] = registration
            }
            return ids
        }

        fileprivate func removeDirectoryWatch(_ descriptor: Int32, state: State) {
            guard let handles = state.inotify else { return }
            _ = inotify_rm_watch(handles.inotify, descriptor)
        }

        /// Wakes the thread from its `read` with an event: every watch is removed (each raises `IN_IGNORED`), or,
        /// with none, one made for the purpose.
        fileprivate func wakeForShutDown(state: State) {
            guard let handles = state.inotify else { return }
            let descriptors = state.pathsByDescriptor.keys
            if descriptors.isEmpty {
                let descriptor = inotify_add_watch(handles.inotify, "/", UInt32(IN_DELETE_SELF))
                if descriptor >= 0 { _ = inotify_rm_watch(handles.inotify, descriptor) }
            }
            for descriptor in descriptors { _ = inotify_rm_watch(handles.inotify, descriptor) }
        }

        private func startThread() -> InotifyHandles? {
            let fd = inotify_init1(Int32(IN_CLOEXEC))
            guard fd >= 0 else { return nil }
            let handles = InotifyHandles(inotify: fd)
            let thread = Thread { [self] in run(handles) }
            thread.name = "Prefs.DirectoryWatcher"
            thread.start()
            return handles
        }

        /// The watcher thread: sleeps in a blocking `read` until events arrive; shutting down removes the watches,
        /// whose events wake it.
        private func run(_ handles: InotifyHandles) {
            let bufferSize = 64 * 1024
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 8)
            defer { buffer.deallocate() }
            while !state.withLock({ $0.isShutDown }) {
                let count = POSIX.read(handles.inotify, buffer, bufferSize)
                if count < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    break
                }
                handleEvents(UnsafeRawBufferPointer(start: buffer, count: count))
            }
            state.withLock { state in
                state.inotify = nil
                state.directories.removeAll()
                state.idle.removeAll()
                state.pathsByDescriptor.removeAll()
                state.descriptorsByPath.removeAll()
            }
            close(handles.inotify)
        }

        private func handleEvents(_ bytes: UnsafeRawBufferPointer) {
            var events: [(descriptor: Int32, mask: UInt32, name: String)] = []
            var offset = 0
            let headerSize = 16
            while offset + headerSize <= bytes.count {
                let descriptor = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameBytes = bytes[(offset + headerSize)..<min(bytes.count, offset + headerSize + length)]
                let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                events.append((descriptor, mask, name))
                offset += headerSize + length
            }

            let ids: [UInt64] = state.withLock { state in
                var ids: [UInt64] = []
                guard !state.isShutDown else { return ids }  // the watches are going, and nothing is re-armed
                for event in events {
                    if event.mask & InotifyMask.overflow != 0 {
                        // Lost events may have included a folder appearing on some registration's way down.
                        _ = descend(state.registrations.keys.sorted(), name: nil, state: &state)
                        ids.append(contentsOf: state.registrations.keys.sorted())
                    } else if event.mask & InotifyMask.directoryGone != 0 {
                        ids.append(contentsOf: rearm(event.descriptor, state: &state))
                    } else if !event.name.isEmpty, let watching = state.directories[event.descriptor],
                        // A store's own file may have a name like that of a temporary or lock file.
                        !Self.isScratchName(event.name)
                            || watching.contains(where: { state.registrations[$0]?.name == event.name })
                    {
                        let members = watching.sorted()
                        ids.append(
                            contentsOf: members.filter { id in
                                guard let registration = state.registrations[id] else { return false }
                                return registration.watched == registration.directory && registration.name == event.name
                            })
                        ids.append(contentsOf: descend(members, name: event.name, state: &state))
                    }
                }
                return ids
            }
            deliver(ids)
        }
    }
#else
    /// Without inotify there are no handles: everything is polled.
    struct InotifyHandles {}

    extension WatcherCore {
        fileprivate func addDirectoryWatch(_ directory: String, ancestor: Bool, state: inout State) -> Int32? { nil }
        fileprivate func removeDirectoryWatch(_ descriptor: Int32, state: State) {}
        fileprivate func wakeForShutDown(state: State) {}
    }
#endif
