// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Prefs",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Prefs", targets: ["Prefs"]),
        .library(name: "PrefsTesting", targets: ["PrefsTesting"]),
        .library(name: "PrefsPostgres", targets: ["PrefsPostgres"]),
        .executable(name: "prefs-demo", targets: ["PrefsDemo"]),
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
                "Prefs", "PrefsPostgres", "CLibPQ", "PostgresTestServer", "PrefsTestSupport",
                "PrefsPostgresTestHelper",
            ]
        ),
        .executableTarget(
            name: "PrefsDemo",
            dependencies: ["Prefs"]
        ),
        .target(
            name: "PrefsTestSupport",
            dependencies: ["Prefs"],
            path: "Tests/PrefsTestSupport"
        ),
        .executableTarget(
            name: "PrefsTestHelper",
            dependencies: ["Prefs", "PrefsTestSupport"],
            path: "Tests/PrefsTestHelper"
        ),
        .testTarget(
            name: "PrefsTests",
            dependencies: ["Prefs", "PrefsTestSupport", "PrefsTestHelper"]
        ),
        .target(
            name: "PrefsCLICore",
            dependencies: ["Prefs", "PrefsPostgres"]
        ),
        .executableTarget(
            name: "PrefsCLI",
            dependencies: ["PrefsCLICore"]
        ),
        .testTarget(
            name: "PrefsCLITests",
            dependencies: ["Prefs", "PrefsCLICore", "PrefsCLI", "PrefsTestSupport", "PostgresTestServer"]
        ),
        .testTarget(
            name: "PrefsReliabilityTests",
            dependencies: ["Prefs", "PrefsTestSupport", "PrefsTestHelper"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
            .enableUpcomingFeature("InternalImportsByDefault"),
        ]
}
