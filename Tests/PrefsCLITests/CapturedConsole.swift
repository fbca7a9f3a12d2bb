import Foundation
import Synchronization

@testable import PrefsCLICore

/// A console whose output goes into buffers, for unit tests.
final class CapturedConsole: Sendable {
    private let buffers = Mutex<(output: String, error: String)>(("", ""))
    let input: Data
    let secrets: Mutex<[String]>
    let environment: [String: String]

    init(input: Data = Data(), secrets: [String] = [], environment: [String: String] = [:]) {
        self.input = input
        self.secrets = Mutex(secrets)
        self.environment = environment
    }

    var output: String { buffers.withLock { $0.output } }
    var error: String { buffers.withLock { $0.error } }

    var console: Console {
        Console(
            writeOutput: { text in self.buffers.withLock { $0.output += text } },
            writeData: { data in self.buffers.withLock { $0.output += String(decoding: data, as: UTF8.self) } },
            writeError: { text in self.buffers.withLock { $0.error += text } },
            readInput: { _ in self.input },
            inputIsTerminal: false,
            readSecret: { _ in
                guard let next = self.secrets.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else {
                    throw Failure.usage("no terminal to ask for it on; use --key-file PATH or --passphrase-env NAME")
                }
                return next
            },
            environment: environment)
    }
}
