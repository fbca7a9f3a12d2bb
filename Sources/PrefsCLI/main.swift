// The `prefs` command-line tool; everything but this entry point lives in PrefsCLICore, where it is unit-tested.
import Foundation
import PrefsCLICore

Warnings.install(console: .standard)
exit(await PrefsTool.run(Array(CommandLine.arguments.dropFirst()), console: .standard))
