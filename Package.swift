// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Prefs",
    // The minimums the code needs: Synchronization's Mutex and Atomic (macOS 15, iOS 18, tvOS 18, watchOS 11,
    // visionOS 2); Observation, Duration and URL(filePath:) need less. Built and tested on Linux only: README's
    // platform table says what is written for Apple platforms and untested, and what is not available there.
    platforms: [.macOS(.v15), .iOS(.v18), .macCatalyst(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "Prefs", targets: ["Prefs"]),
        .library(name: "PrefsTesting", targets: ["PrefsTesting"]),
        .library(name: "PrefsPostgres", targets: ["PrefsPostgres"]),
        .library(name: "PrefsKeyring", targets: ["PrefsKeyring"]),
        .executable(name: "prefs", targets: ["PrefsCLI"]),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]
        ),
        .target(
            name: "Prefs",
            dependencies: ["CSodium"]
        ),
        .target(
            name: "PrefsTesting",
            dependencies: ["Prefs"]
        ),
        .testTarget(
            name: "PrefsTestingTests",
            dependencies: ["Prefs", "PrefsTesting", "PrefsTestSupport"]
        ),
        // libpq for PrefsPostgres only: the core Prefs module never links it.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        .target(
            name: "PrefsPostgres",
            dependencies: ["Prefs", "CLibPQ"]
        ),
        // Starts a throwaway PostgreSQL server (initdb + pg_ctl on a unix socket) for the tests and for Benchmarks/.
        .target(
            name: "PostgresTestServer",
            dependencies: ["CLibPQ"],
            path: "Tests/PostgresTestServer"
        ),
        .executableTarget(
            name: "PrefsPostgresTestHelper",
            dependencies: ["Prefs", "PrefsPostgres"],
            path: "Tests/PrefsPostgresTestHelper"
        ),
        .testTarget(
            name: "PrefsPostgresTests",
            dependencies: [
                "Prefs", "PrefsPostgres", "PrefsTesting", "CLibPQ", "PostgresTestServer", "PrefsTestSupport",
                "PrefsPostgresTestHelper",
            ]
        ),
        // libsecret (with GLib and GIO) for PrefsKeyring only: the core Prefs module never links it. No pkgConfig:
        // GLib's flags carry -pthread, which SwiftPM refuses with a warning in every build of every package that uses
        // PrefsKeyring; shim.h declares the calls itself and module.modulemap links the libraries (Debian's
        // libsecret-1-dev provides them, and scripts/install-deps.sh installs it).
        // The Secret Service is a D-Bus service of Linux desktops: elsewhere PrefsKeyring links nothing and declares
        // nothing (its sources are inside `#if os(Linux)`), and the CLI's --keyring says so.
        .systemLibrary(name: "CLibSecret"),
        .target(
            name: "PrefsKeyring",
            dependencies: ["Prefs", .target(name: "CLibSecret", condition: .when(platforms: [.linux])), "CSodium"]
        ),
        // The child process of the keyring tests: the library with its vault key in the keyring of a bus the test
        // started.
        .executableTarget(
            name: "PrefsKeyringTestHelper",
            dependencies: ["Prefs", "PrefsKeyring"],
            path: "Tests/PrefsKeyringTestHelper"
        ),
        // Each test starts its own session bus and GNOME Keyring (Tests/PrefsKeyringTests/SecretServiceSession.swift)
        // and runs the library, the helper and `prefs` against them in child processes.
        .testTarget(
            name: "PrefsKeyringTests",
            dependencies: [
                "Prefs", "PrefsTestSupport", "PrefsKeyringTestHelper", "PrefsCLI",
                .target(name: "CLibSecret", condition: .when(platforms: [.linux])),
            ]
        ),
        // The demo is a target, not a product: `swift run prefs-demo` runs it here, and packages depending on Prefs
        // never see it.
        .executableTarget(
            name: "prefs-demo",
            dependencies: ["Prefs"],
            path: "Sources/PrefsDemo"
        ),
        // The `.ownThreads` suite trait every test suite carries: test bodies run on threads of their own, never on
        // the cooperative pool (see Tests/TestThreads/OwnThreads.swift). Kept apart from PrefsTestSupport so the
        // child-process helpers do not link Swift Testing.
        .target(
            name: "TestThreads",
            path: "Tests/TestThreads"
        ),
        .target(
            name: "PrefsTestSupport",
            dependencies: ["Prefs"],
            path: "Tests/PrefsTestSupport"
        ),
        // The file-system seam's test side (`SteppingFileSystem`), for tests and child processes of this package only:
        // it uses the library's package-level API, which the benchmarks' copy of PrefsTestSupport cannot see.
        .target(
            name: "EngineTestSupport",
            dependencies: ["Prefs", "PrefsTestSupport"],
            path: "Tests/EngineTestSupport"
        ),
        .executableTarget(
            name: "PrefsTestHelper",
            dependencies: ["Prefs", "PrefsTestSupport", "EngineTestSupport"],
            path: "Tests/PrefsTestHelper"
        ),
        // The library's units, in this process (a few tests still start the helper: see PrefsProcessTests).
        .testTarget(
            name: "PrefsTests",
            dependencies: ["Prefs", "PrefsTestSupport", "EngineTestSupport", "PrefsTestHelper"]
        ),
        // Suites whose tests run the library in child processes (the PrefsTestHelper executable).
        .testTarget(
            name: "PrefsProcessTests",
            dependencies: ["Prefs", "PrefsTestSupport", "EngineTestSupport", "PrefsTestHelper"]
        ),
        // The documentation itself: its samples compile and run, its manifest resolves, its architecture and its
        // list of promises match the code and the tests.
        .testTarget(
            name: "PrefsDocumentationTests",
            dependencies: ["Prefs", "PrefsTesting", "PrefsTestSupport"]
        ),
        .target(
            name: "PrefsCLICore",
            dependencies: [
                "Prefs", "PrefsPostgres", .target(name: "PrefsKeyring", condition: .when(platforms: [.linux])),
            ]
        ),
        .executableTarget(
            name: "PrefsCLI",
            dependencies: ["PrefsCLICore"]
        ),
        .testTarget(
            name: "PrefsCLITests",
            dependencies: [
                "Prefs", "PrefsCLICore", "PrefsCLI", "PrefsTestSupport", "PostgresTestServer", "PrefsTestHelper",
            ]
        ),
        .testTarget(
            name: "PrefsReliabilityTests",
            dependencies: ["Prefs", "PrefsTestSupport", "EngineTestSupport", "PrefsTestHelper"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type == .test {
    target.dependencies.append("TestThreads")
}

for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
            .enableUpcomingFeature("InternalImportsByDefault"),
        ]
}

// A sanitizer build compiles only what its sanitizer checks (scripts/tsan.sh, scripts/asan.sh; docs/RELIABILITY.md
// says what runs where and why): the test targets of its scope, the demo that DemoTests starts, and what they depend
// on; nothing else (not the command-line tool, the keyring, the other tests). `thread` and `address` (`make tsan`,
// `make asan`) are the library and the PostgreSQL store with the tests that run them in this process; `address-ci`,
// CI's AddressSanitizer leg, leaves the PostgreSQL store to the plain build and to `thread`.
let sanitizerScopes: [String: [String]] = [
    "thread": ["PrefsTests", "PrefsPostgresTests", "PrefsTestingTests", "PrefsReliabilityTests", "prefs-demo"],
    "address": ["PrefsTests", "PrefsPostgresTests", "PrefsTestingTests", "prefs-demo"],
    "address-ci": ["PrefsTests", "PrefsTestingTests", "prefs-demo"],
]
if let scope = Context.environment["PREFS_SANITIZER_SCOPE"], let roots = sanitizerScopes[scope] {
    var kept = Set<String>()
    var pending = roots
    while let name = pending.popLast() {
        guard kept.insert(name).inserted, let target = package.targets.first(where: { $0.name == name }) else {
            continue
        }
        for dependency in target.dependencies {
            switch dependency {
            case .targetItem(let name, _), .byNameItem(let name, _): pending.append(name)
            default: break
            }
        }
    }
    package.targets.removeAll { !kept.contains($0.name) }
    package.products.removeAll { product in
        let targets = (product as? Product.Library)?.targets ?? (product as? Product.Executable)?.targets ?? []
        return !targets.allSatisfy(kept.contains)
    }
}
