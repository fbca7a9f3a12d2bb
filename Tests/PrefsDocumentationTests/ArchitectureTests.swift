import Foundation
import PrefsTestSupport
import TestThreads
import Testing

/// The folders of `Sources/Prefs` are layers, listed here from the bottom up. A file may use what its own layer and
/// the layers below declare, never what a layer above declares: the folder list reads as the architecture, and no
/// cycle (like the one between configuration and the stores that once crashed apps at launch) can come back.
@Suite(.ownThreads) struct ArchitectureTests {
    static let layers: [(name: String, folders: [String])] = [
        ("values", ["Values"]),
        ("reporting", ["Reporting"]),
        ("platform", ["Platform"]),
        ("locations", ["Locations"]),
        ("formats", ["Formats"]),
        ("crypto", ["Secure"]),
        ("schema", ["Schema"]),
        ("stores", ["Stores"]),
        ("configuration", ["Configuration"]),
        ("wrappers", ["Wrappers"]),
    ]

    static let sources = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appending(path: "Sources/Prefs")

    /// Every Swift file under `folder`, with its text minus comments and string literals.
    static func files(in folder: String) throws -> [(path: String, code: String)] {
        let root = sources.appending(path: folder)
        guard let enumerator = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else {
            return []
        }
        return try enumerator.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.map { url in
            let text = try String(contentsOf: url, encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
                let trimmed = line.drop { $0 == " " }
                if trimmed.hasPrefix("//") { return "" }
                return line.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
                    .filter { $0.offset.isMultiple(of: 2) }.map(\.element).joined(separator: " ")[...]
            }.joined(separator: "\n")
            return (String(url.path.dropFirst(sources.path.count + 1)), code)
        }
    }

    /// The types, protocols and type aliases a file declares at top level.
    static func declarations(in code: String) -> Set<String> {
        let pattern =
            /^(?:public |package |internal |fileprivate |private |final |open )*(?:class|struct|enum|protocol|actor|typealias) ([A-Za-z_][A-Za-z0-9_]*)/
        var names: Set<String> = []
        for line in code.split(separator: "\n") {
            if let match = line.firstMatch(of: pattern) { names.insert(String(match.1)) }
        }
        return names
    }

    /// Every test runs on threads of its own (`.ownThreads`, see Tests/TestThreads), never on Swift's cooperative
    /// pool, so no test's blocking work can hold up another test's steps: each top-level type of a test file that
    /// holds tests carries the trait, and so does each test outside a type.
    @Test func everyTestSuiteRunsOnThreadsOfItsOwn() throws {
        let tests = Self.sources.deletingLastPathComponent().deletingLastPathComponent().appending(path: "Tests")
        let enumerator = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
        let declaration =
            #/^(?:@[A-Za-z]+(?:\(.*\))? )*(?:(?:public|private|fileprivate|final) )*(?:struct|class|enum|actor) /#
        var missing: [String] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let lines = try String(contentsOf: url, encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false)
            // Each top-level declaration with the attribute lines above it, up to the next one.
            var starts: [Int] = []
            for (index, line) in lines.enumerated() where line.firstMatch(of: declaration) != nil {
                starts.append(index)
            }
            for (position, start) in starts.enumerated() {
                let end = position + 1 < starts.count ? starts[position + 1] : lines.count
                guard lines[start..<end].contains(where: { $0.hasPrefix("    @Test") }) else { continue }
                // Its attributes: the lines above it up to a comment, a blank line or the end of what came before
                // (an attribute may be wrapped over several lines).
                var first = start
                while first > 0, !lines[first - 1].hasPrefix("//"), !lines[first - 1].hasPrefix("}"),
                    !lines[first - 1].hasPrefix("import"),
                    !lines[first - 1].trimmingCharacters(in: .whitespaces).isEmpty
                {
                    first -= 1
                }
                if !lines[first...start].contains(where: { $0.contains(".ownThreads") }) {
                    missing.append("\(url.lastPathComponent):\(start + 1)")
                }
            }
            for (index, line) in lines.enumerated() where line.hasPrefix("@Test") && !line.contains(".ownThreads") {
                missing.append("\(url.lastPathComponent):\(index + 1)")
            }
        }
        #expect(missing.isEmpty, "test suites without .ownThreads: \(missing)")
    }

    @Test func everyFolderOfTheLibraryIsALayer() throws {
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path)
            .filter { !$0.hasSuffix(".docc") && !$0.hasPrefix(".") }
        #expect(Set(folders) == Set(Self.layers.flatMap(\.folders)), "no file outside the layers")
    }

    @Test func noFileUsesALayerAboveIt() throws {
        let layered = try Self.layers.map { layer in try layer.folders.flatMap { try Self.files(in: $0) } }
        var violations: [String] = []
        for (index, files) in layered.enumerated() {
            let above = layered[(index + 1)...].flatMap { $0 }.reduce(into: Set<String>()) {
                $0.formUnion(Self.declarations(in: $1.code))
            }
            for file in files {
                let words = Set(file.code.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
                for name in words.intersection(above).sorted() {
                    violations.append("\(file.path) (\(Self.layers[index].name)) uses \(name)")
                }
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// Inside `Stores/`, one backend never reaches into another's types: a backend's files (a file of the folder's
    /// root and its `+` files) name no store type but their own and the base class they extend
    /// (`FileBackedStore`), and the engine and the change feed below them name none at all; the change feed names
    /// nothing of the engine or the layers. So listing `Stores/` is the list of backends, each replaceable alone.
    @Test func noStoreReachesIntoAnotherStore() throws {
        let all = try Self.files(in: "Stores")
        let root = all.filter { !$0.path.dropFirst("Stores/".count).contains("/") }
        func backend(of path: String) -> String {
            String(path.dropFirst("Stores/".count).prefix { $0 != "+" && $0 != "." })
        }
        // Each backend's types, by the backend that declares them; the protocol, the hub every store holds (and the
        // package protocol its stores bind there) and shared values are no backend.
        var types: [String: Set<String>] = [:]
        for file in root { types[backend(of: file.path), default: []].formUnion(Self.declarations(in: file.code)) }
        for shared in ["KeyValueStore", "StoreHub", "DamagedFilePolicy"] { types[shared] = nil }
        let storeTypes = types.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        func words(_ code: String) -> Set<String> {
            Set(code.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
        }
        var violations: [String] = []
        for file in root {
            let own = types[backend(of: file.path)] ?? []
            // A subclass may name the class it extends.
            let bases = Set(file.code.matches(of: /class [A-Za-z_]+: ([A-Za-z_]+)/).map { String($0.output.1) })
            for name in words(file.code).intersection(storeTypes).subtracting(own).subtracting(bases).sorted() {
                violations.append("\(file.path) uses \(name), another store's type")
            }
        }
        let engine = all.filter { $0.path.hasPrefix("Stores/Engine/") }
        let changes = all.filter { $0.path.hasPrefix("Stores/Changes/") }
        let layers = all.filter { $0.path.hasPrefix("Stores/Layers/") }
        for file in engine + changes {
            for name in words(file.code).intersection(storeTypes).sorted() {
                violations.append("\(file.path) uses \(name): the engine and the change feed serve every store alike")
            }
        }
        let above = (engine + layers).reduce(into: Set<String>()) { $0.formUnion(Self.declarations(in: $1.code)) }
        for file in changes {
            for name in words(file.code).intersection(above).sorted() {
                violations.append("\(file.path) uses \(name): the change feed sits below the engine and the layers")
            }
        }
        #expect(violations.isEmpty, "\(violations.joined(separator: "\n"))")
    }

    /// README: "`PrefsPostgres` is its own product, so apps that do not use it never link libpq"; GettingStarted:
    /// `PrefsTesting` "is the only part of Prefs that imports Swift Testing, so apps never link it"; SecureValues:
    /// the keyring lives in `PrefsKeyring`, so `Prefs` links no libsecret, GLib or D-Bus.
    @Test func libpqAndSwiftTestingStayOutOfTheLibrariesAppsLink() throws {
        let root = URL(filePath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        func imports(under folder: String) throws -> Set<String> {
            let files = FileManager.default.enumerator(
                at: root.appending(path: folder), includingPropertiesForKeys: nil)
            var found: Set<String> = []
            for case let url as URL in files! where url.pathExtension == "swift" {
                for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
                    let words = line.split(separator: " ")
                    if let index = words.firstIndex(of: "import"), index + 1 < words.count {
                        found.insert(String(words[index + 1]))
                    }
                }
            }
            return found
        }
        let core = try imports(under: "Sources/Prefs")
        #expect(
            core.isDisjoint(with: ["CLibPQ", "PrefsPostgres", "CLibSecret", "PrefsKeyring", "Testing", "XCTest"]),
            "\(core.sorted())")
        #expect(try imports(under: "Sources/PrefsPostgres").isDisjoint(with: ["Testing", "XCTest", "CLibSecret"]))
        #expect(try imports(under: "Sources/PrefsKeyring").isSuperset(of: ["CLibSecret"]))
        #expect(try imports(under: "Sources/PrefsKeyring").isDisjoint(with: ["CLibPQ", "Testing", "XCTest"]))
        #expect(try imports(under: "Sources/PrefsTesting").contains("Testing"))
        // The manifest: the Prefs target depends on libsodium only.
        let manifest = try String(contentsOf: root.appending(path: "Package.swift"), encoding: .utf8)
        let target = try #require(manifest.range(of: "name: \"Prefs\",\n            dependencies: ["))
        let dependencies = manifest[target.upperBound...].prefix { $0 != "]" }
        #expect(dependencies == "\"CSodium\"")
    }

    /// Names glibc declares and Apple's C library lacks or spells differently (docs/ARCHITECTURE.md, "Platform
    /// seams", has the list): a file may use them only inside a `#if canImport(Glibc)` or `#if os(Linux)` branch,
    /// where the Darwin branch beside it says what Apple platforms do instead. Nothing builds for Apple platforms
    /// here, so this is what keeps a Linux-only call from reaching code that claims to be written for them.
    static let glibcOnlyNames: [String] = [
        // signals, processes, threads
        "sigtimedwait", "sigwaitinfo", "signalfd", "__sigaction_handler", "__sighandler_t", "__rlimit_resource_t",
        "prctl", "PR_SET_DUMPABLE", "PR_GET_DUMPABLE", "program_invocation_name", "gettid", "getauxval",
        "secure_getenv", "sysinfo", "get_nprocs", "sched_getcpu", "pthread_getattr_np", "__errno_location",
        // memory
        "explicit_bzero", "mempcpy", "memrchr", "strchrnul", "malloc_usable_size", "memfd_create", "mremap",
        "MAP_POPULATE", "MADV_DONTDUMP",
        // files
        "O_PATH", "O_TMPFILE", "O_DIRECT", "O_NOATIME", "O_LARGEFILE", "F_OFD_SETLK", "F_OFD_SETLKW",
        "F_SETPIPE_SZ", "posix_fallocate", "fallocate", "renameat2", "RENAME_NOREPLACE", "RENAME_EXCHANGE",
        "statx", "copy_file_range", "sendfile", "splice", "syncfs", "sync_file_range", "st_atim", "st_mtim",
        "st_ctim", "stat64", "lstat64", "fstat64", "open64", "off64_t", "readdir64",
        // descriptors, sockets, clocks
        "pipe2", "dup3", "accept4", "eventfd", "ppoll", "SOCK_CLOEXEC", "SOCK_NONBLOCK", "SO_PEERCRED",
        "SCM_CREDENTIALS", "ucred", "CLOCK_BOOTTIME", "CLOCK_MONOTONIC_COARSE", "CLOCK_REALTIME_COARSE",
        // the module itself (`import Glibc`, `Glibc.read`)
        "Glibc",
    ]
    /// Families of glibc names, by prefix: epoll, inotify (with its `IN_` flags), timerfd.
    static let glibcOnlyPrefixes = ["epoll_", "EPOLL", "inotify_", "IN_", "timerfd_"]
    /// Values of glibc constants that Swift cannot import and code spells out: `UTIME_OMIT` and `UTIME_NOW`
    /// (`(1 << 30) - 2` and `- 1`; Darwin's are -2 and -1, and a Linux value there makes `futimens` fail).
    static var glibcOnlyValue: Regex<Substring> { #/\(\s*1\s*<<\s*30\s*\)\s*-\s*[12]\b/# }

    /// `text` with its comments and the contents of its string literals blanked, line breaks kept: what is left is
    /// code, and a name in a comment or a message is not a call.
    static func code(of text: String) -> String {
        var result = ""
        var characters = Array(text)[...]
        var blockDepth = 0
        while let character = characters.first {
            let rest = characters.prefix(3)
            if blockDepth > 0 {
                if rest.starts(with: "*/") {
                    blockDepth -= 1
                    characters = characters.dropFirst(2)
                } else if rest.starts(with: "/*") {
                    blockDepth += 1
                    characters = characters.dropFirst(2)
                } else {
                    result.append(character == "\n" ? "\n" : " ")
                    characters = characters.dropFirst()
                }
            } else if rest.starts(with: "//") {
                characters = characters.drop { $0 != "\n" }
            } else if rest.starts(with: "/*") {
                blockDepth = 1
                characters = characters.dropFirst(2)
            } else if character == "\"" || rest.starts(with: "#\"") {
                // A string literal (one line, three quotes or raw): its text is blanked, escapes skipped.
                let raw = character == "#"
                let quotes = characters.dropFirst(raw ? 1 : 0).prefix(3).elementsEqual("\"\"\"") ? "\"\"\"" : "\""
                characters = characters.dropFirst(quotes.count + (raw ? 1 : 0))
                let end = quotes + (raw ? "#" : "")
                result.append("\"")
                while !characters.isEmpty, !characters.starts(with: end) {
                    if !raw, characters.first == "\\" { characters = characters.dropFirst() }
                    if let skipped = characters.first { result.append(skipped == "\n" ? "\n" : " ") }
                    characters = characters.dropFirst()
                }
                characters = characters.dropFirst(end.count)
                result.append("\"")
            } else {
                result.append(character)
                characters = characters.dropFirst()
            }
        }
        return result
    }

    /// The glibc-only names `code` uses outside a Linux branch, as `line: name`.
    static func glibcNamesOutsideLinuxBranches(in code: String) -> [String] {
        /// Whether a branch taken under `condition` runs on Linux only.
        func isLinuxOnly(_ condition: Substring) -> Bool {
            !condition.contains("||") && !condition.contains("!")
                && (condition.contains("canImport(Glibc)") || condition.contains("os(Linux)"))
        }
        var branches: [Bool] = []  // for each `#if` open around the line: whether its current branch is Linux's
        var found: [String] = []
        for (index, line) in code.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.hasPrefix("#if ") {
                branches.append(isLinuxOnly(trimmed.dropFirst(4)))
            } else if trimmed.hasPrefix("#elseif "), !branches.isEmpty {
                branches[branches.count - 1] = isLinuxOnly(trimmed.dropFirst(8))
            } else if trimmed.hasPrefix("#else"), !branches.isEmpty {
                branches[branches.count - 1] = false
            } else if trimmed.hasPrefix("#endif") {
                _ = branches.popLast()
            } else if !branches.contains(true) {
                let words = line.split { !($0.isLetter || $0.isNumber || $0 == "_") }
                for word in words
                where glibcOnlyNames.contains(String(word)) || glibcOnlyPrefixes.contains(where: word.hasPrefix) {
                    found.append("\(index + 1): \(word)")
                }
                if let value = line.firstMatch(of: glibcOnlyValue) {
                    found.append("\(index + 1): \(value.output) (UTIME_OMIT or UTIME_NOW)")
                }
            }
        }
        return found
    }

    @Test func glibcOnlyNamesStayInsideLinuxBranches() throws {
        let root = Self.sources.deletingLastPathComponent()
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var violations: [String] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            let path = url.path.dropFirst(root.deletingLastPathComponent().path.count + 1)
            let code = Self.code(of: try String(contentsOf: url, encoding: .utf8))
            violations += Self.glibcNamesOutsideLinuxBranches(in: code).map { "\(path):\($0)" }
        }
        #expect(
            violations.isEmpty,
            "glibc-only names outside a Linux branch:\n\(violations.sorted().joined(separator: "\n"))")
    }

    /// The manifest says `swift-tools-version: 6.2`, and the docs "Swift 6.2 or later": no code uses what Swift 6.2.0
    /// lacks. `weak let` (SE-0481) is the one such feature Prefs ever used; it shipped in a later 6.2 release.
    @Test func noCodeNeedsMoreThanSwift62() throws {
        let root = Self.sources.deletingLastPathComponent().deletingLastPathComponent()
        var found: [String] = []
        for folder in ["Sources", "Tests"] {
            let files = FileManager.default.enumerator(
                at: root.appending(path: folder), includingPropertiesForKeys: nil)
            for case let url as URL in try #require(files) where url.pathExtension == "swift" {
                let lines = Self.code(of: try String(contentsOf: url, encoding: .utf8)).split(separator: "\n")
                for line in lines where line.contains(/\bweak\s+let\b/) {
                    found.append(
                        "\(url.path.dropFirst(root.path.count + 1)): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    /// The check itself: it sees a name in code, and not in a comment, a string or a Linux branch.
    @Test func theGlibcCheckTellsCodeFromCommentsStringsAndLinuxBranches() {
        let sample = #"""
            explicit_bzero(base, count)  // sigtimedwait in a comment
            let message = "epoll_wait in a string"
            #if canImport(Glibc)
                var action = sigaction(); action.__sigaction_handler.sa_handler = nil
            #elseif canImport(Darwin)
                _ = inotify_init1(0)
            #endif
            #if os(Linux) && DEBUG
                _ = pipe2(&ends, 0)
            #else
                var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), now]
            #endif
            /* Glibc.read */ _ = Glibc.read(fd, buffer, count)
            let quoted = #"sigwaitinfo "\" statx"# + "\"signalfd" + """
                gettid "\""" sysinfo
                """
            """#
        #expect(
            Self.glibcNamesOutsideLinuxBranches(in: Self.code(of: sample)) == [
                "1: explicit_bzero", "6: inotify_init1", "11: (1 << 30) - 2 (UTIME_OMIT or UTIME_NOW)", "13: Glibc",
            ])
    }
}
