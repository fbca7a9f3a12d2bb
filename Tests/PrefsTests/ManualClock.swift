import Foundation
import Synchronization

@testable import Prefs

/// A clock for the file engine that only the test moves: `clock.advance(by: .seconds(1))` runs, before it returns,
/// every timer due by then (a deferred store's window, the retry of a failed commit), in order, each on its queue.
/// Pauses move it too, at once, so a bounded wait costs no real time.
final class ManualClock: Sendable {
    private struct Timer {
        let due: Duration
        let order: Int
        let queue: DispatchQueue
        let work: @Sendable () -> Void
    }

    private let state = Mutex<(now: Duration, timers: [Timer], made: Int)>((.zero, [], 0))

    /// The clock to hand the engine: `EngineClock.withClock(clock.engineClock) { … }`.
    var engineClock: EngineClock {
        // Weakly: a timer's work holds the engine clock, and the clock's timers hold the work.
        EngineClock(
            now: { [weak self] in self?.state.withLock { $0.now } ?? .zero },
            pause: { [weak self] step in self?.state.withLock { $0.now += step } },
            schedule: { [weak self] delay, queue, work in
                self?.state.withLock { state in
                    state.made += 1
                    state.timers.append(Timer(due: state.now + delay, order: state.made, queue: queue, work: work))
                }
            })
    }

    /// How many timers wait to run.
    var pendingTimers: Int { state.withLock { $0.timers.count } }

    /// Moves the clock on by `step`, running each timer due by then (and any it sets that fall due too).
    func advance(by step: Duration) {
        let end = state.withLock { $0.now + step }
        while let timer = nextTimer(dueBy: end) { timer.queue.sync(execute: timer.work) }
        state.withLock { $0.now = max($0.now, end) }
    }

    private func nextTimer(dueBy end: Duration) -> Timer? {
        state.withLock { state in
            guard
                let index = state.timers.indices.filter({ state.timers[$0].due <= end })
                    .min(by: {
                        (state.timers[$0].due, state.timers[$0].order) < (state.timers[$1].due, state.timers[$1].order)
                    })
            else { return nil }
            let timer = state.timers.remove(at: index)
            state.now = max(state.now, timer.due)
            return timer
        }
    }
}
