import Foundation

/// What `prefs` adds to a message so that the next command works: the closest name to one mistyped, and a command
/// line to copy.
enum Hints {
    /// `" (did you mean \"com.example.notes\"?)"` for the name among `candidates` closest to `name`, or "" when none
    /// is close: at most a third of its characters differ (at least one), or the two differ only in case.
    static func didYouMean(_ name: String, among candidates: some Sequence<String>) -> String {
        let limit = max(1, name.count / 3)
        var best: (candidate: String, distance: Int)?
        for candidate in candidates where candidate != name {
            let distance =
                candidate.lowercased() == name.lowercased() ? 0 : editDistance(name, candidate, atMost: limit)
            if distance <= limit, distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        return best.map { " (did you mean \(String(reflecting: ValueText.visible($0.candidate)))?)" } ?? ""
    }

    /// The number of characters to insert, delete or replace to turn `a` into `b`, or `limit + 1` once it is
    /// certain to be more than `limit` (so that a long list of long names costs little).
    static func editDistance(_ a: String, _ b: String, atMost limit: Int) -> Int {
        let (a, b) = (Array(a), Array(b))
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        var previous = Array(0...b.count)
        for (i, left) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, right) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (left == right ? 0 : 1))
            }
            if current.min()! > limit { return limit + 1 }
            previous = current
        }
        return previous[b.count]
    }

    /// `word` as a POSIX shell reads it back: bare when it is made of characters the shell leaves alone, else in
    /// single quotes.
    static func shellQuoted(_ word: String) -> String {
        let plain =
            !word.isEmpty
            && word.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                        || "-_./:=@%+,".unicodeScalars.contains(scalar))
            }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }

    /// The options of `invocation` among `names` as typed (`--app com.example.notes`), to repeat in a suggested
    /// command so that it reaches the same place.
    static func repeated(_ names: [String], of invocation: Invocation) -> String {
        names.compactMap { name in invocation[name].map { " \(name) \(shellQuoted($0))" } }.joined()
    }
}
