// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "Prefs",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Prefs", targets: ["Prefs"]),
        .library(name: "PrefsTesting", targets: ["PrefsTesting"]),
        .executable(name: "prefs-demo", targets: ["PrefsDemo"]),
        .executable(name: "prefs", targets: ["PrefsCLI"]),
        .executable(name: "prefs-bench", targets: ["PrefsBench"]),
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
            dependencies: ["Prefs", "PrefsTesting"]
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
            dependencies: ["Prefs"]
        ),
        .executableTarget(
            name: "PrefsCLI",
            dependencies: ["PrefsCLICore"]
        ),
        .testTarget(
            name: "PrefsCLITests",
            dependencies: ["Prefs", "PrefsCLICore", "PrefsCLI", "PrefsTestSupport"]
        ),
        .executableTarget(
            name: "PrefsBench",
            dependencies: ["Prefs", "CSodium"]
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
