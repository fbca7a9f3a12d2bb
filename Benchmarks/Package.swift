// swift-tools-version: 6.2
import PackageDescription

// prefs-bench, in a package of its own so that no package depending on Prefs sees it: `make bench` (or
// `swift run --package-path Benchmarks -c release prefs-bench`) runs it. It uses the root package's products only.
//
// Two things it shares with the tests live in the root's Tests folder and are linked here (a target may not name
// a folder outside its package): PrefsTestSupport (FileReplacements) and PostgresTestServer (the throwaway
// server). CSodium and CLibPQ, for the hand-written baselines, come with the Prefs and PrefsPostgres products;
// declaring them here again would clash with the root's targets of the same names.
let package = Package(
    name: "PrefsBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "prefs-bench", targets: ["PrefsBench"])
    ],
    dependencies: [
        .package(name: "Prefs", path: "..")
    ],
    targets: [
        .target(
            name: "PrefsTestSupport",
            dependencies: [.product(name: "Prefs", package: "Prefs")]
        ),
        .target(
            name: "PostgresTestServer",
            dependencies: [.product(name: "PrefsPostgres", package: "Prefs")]  // for CLibPQ
        ),
        .executableTarget(
            name: "PrefsBench",
            dependencies: [
                .product(name: "Prefs", package: "Prefs"), .product(name: "PrefsPostgres", package: "Prefs"),
                "PrefsTestSupport", "PostgresTestServer",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
            .enableUpcomingFeature("InternalImportsByDefault"),
        ]
}
