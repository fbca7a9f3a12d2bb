#!/usr/bin/env python3
"""The mutation check of the promises table (`make mutants`, through scripts/mutants.sh).

Each entry of Tests/Mutants/mutations.txt breaks one promise of docs/PROMISES.md with a one-line change of the code
and names the tests that must then fail. For each entry, in a scratch copy of this checkout, the change is made, the
package built, and only the named tests run: a mutation they do not catch survives, and a survivor fails the check
with its row. Before the first mutation the named tests run on the unchanged copy, and must pass there.

An entry is a block of `field: value` lines, blocks apart by a blank line, `#` starting a comment line:

    id: distinct-values                      unique name of the entry
    section: observation                     values, files, cross-process, observation, vault, layers, schemas, cli,
                                             postgres or keyring (the sections of the promises table)
    row: `values` yields ... no repeats      the promise, as its row in docs/PROMISES.md says it
    file: Sources/Prefs/Wrappers/StoredValueBox.swift
    search: subscriber.last != new          text that occurs exactly once in the file
    replace: true                            what it becomes
    tests: StoredValueTests/anUnchangedKeyPublishedTwiceIsYieldedOnce, ...   Suite/test, comma-separated
    tags: slow                               optional, comma-separated (--tag, --skip-tag select by them)

In `search` and `replace`, `{newline}` stands for a line break, for a change a single line cannot tell apart. A
search text that is no longer in its file, or is there more than once, stops the check before anything is built.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

SECTIONS = ["values", "files", "cross-process", "observation", "vault", "layers", "schemas", "cli", "postgres",
            "keyring"]
FIELDS = ["id", "section", "row", "file", "search", "replace", "tests"]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
LIST = os.path.join(ROOT, "Tests", "Mutants", "mutations.txt")


def fail(message):
    print(f"mutants: {message}", file=sys.stderr)
    sys.exit(2)


def parse(path):
    entries, entry, problems = [], {}, []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines + [""], start=1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if entry:
                entries.append(entry)
                entry = {}
            continue
        name, separator, value = line.partition(":")
        name = name.strip()
        if not separator or name not in FIELDS + ["tags"]:
            problems.append(f"{path}:{number}: not a `field: value` line of an entry: {line!r}")
            continue
        if name in entry:
            problems.append(f"{path}:{number}: {name} given twice")
        entry[name] = value.strip() if name != "replace" else value[1:] if value.startswith(" ") else value
        entry.setdefault("line", number)
    seen = set()
    for entry in entries:
        where = f"{path}:{entry['line']}"
        missing = [field for field in FIELDS if field not in entry or (field != "replace" and not entry[field])]
        if missing:
            problems.append(f"{where}: missing {', '.join(missing)}")
            continue
        if entry["id"] in seen:
            problems.append(f"{where}: id {entry['id']} given twice")
        seen.add(entry["id"])
        if entry["section"] not in SECTIONS:
            problems.append(f"{where}: section {entry['section']!r} is not one of {', '.join(SECTIONS)}")
        for field in ("search", "replace"):
            entry[field] = entry[field].replace("{newline}", "\n")
        entry["tests"] = [test.strip() for test in entry["tests"].split(",") if test.strip()]
        entry["tags"] = [tag.strip() for tag in entry.get("tags", "").split(",") if tag.strip()]
        for test in entry["tests"]:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*/[A-Za-z_][A-Za-z0-9_]*", test):
                problems.append(f"{where}: test {test!r} is not Suite/testName")
    if problems:
        fail("the list is malformed:\n  " + "\n  ".join(problems))
    return entries


def check_searches(entries):
    """Every selected entry's search text is in its file exactly once, else the check stops here."""
    problems = []
    for entry in entries:
        path = os.path.join(ROOT, entry["file"])
        if not os.path.isfile(path):
            problems.append(f"{entry['id']}: no file {entry['file']}")
            continue
        with open(path, encoding="utf-8") as handle:
            count = handle.read().count(entry["search"])
        if count != 1:
            where = "is not in" if count == 0 else f"occurs {count} times in"
            problems.append(f"{entry['id']}: the search text {where} {entry['file']}: {entry['search']!r}")
    if problems:
        fail("entries that no longer apply (update them to the code):\n  " + "\n  ".join(problems))


def filters(tests):
    arguments = []
    for test in tests:
        suite, name = test.split("/")
        arguments += ["--filter", rf"[./]{suite}/{name}\("]
    return arguments


class Scratch:
    def __init__(self, directory):
        self.directory = directory
        self.source = os.path.join(directory, "src")
        self.mutated = []

    def sync(self):
        """Makes the copy's files those of this checkout (not its build), copying only what differs, so that the
        copy's own build stays incremental across runs."""
        left_out = {".build", ".git", ".swiftpm", "docs-out"}
        wanted = set()
        for folder, folders, files in os.walk(ROOT):
            if folder == ROOT:
                folders[:] = [name for name in folders if name not in left_out]
            for name in files:
                relative = os.path.relpath(os.path.join(folder, name), ROOT)
                if folder == ROOT and name in left_out:
                    continue
                wanted.add(relative)
                origin, copy = os.path.join(ROOT, relative), os.path.join(self.source, relative)
                if os.path.islink(origin):
                    if not os.path.islink(copy) or os.readlink(copy) != os.readlink(origin):
                        os.makedirs(os.path.dirname(copy), exist_ok=True)
                        if os.path.lexists(copy):
                            os.remove(copy)
                        os.symlink(os.readlink(origin), copy)
                    continue
                mine, theirs = os.stat(origin), os.stat(copy) if os.path.lexists(copy) else None
                if theirs is None or (theirs.st_size, theirs.st_mtime_ns) != (mine.st_size, mine.st_mtime_ns):
                    os.makedirs(os.path.dirname(copy), exist_ok=True)
                    shutil.copy2(origin, copy)
        for folder, folders, files in os.walk(self.source):
            if folder == self.source:
                folders[:] = [name for name in folders if name not in left_out]
            for name in files:
                relative = os.path.relpath(os.path.join(folder, name), self.source)
                if relative not in wanted:
                    os.remove(os.path.join(folder, name))

    def restore(self):
        """Puts back the file the last mutation changed, as the copy held it (edits made to the checkout during a
        run never reach the copy)."""
        for path, text in self.mutated:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        self.mutated = []

    def mutate(self, entry):
        path = os.path.join(self.source, entry["file"])
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if text.count(entry["search"]) != 1:
            fail(f"{entry['id']}: the copy of {entry['file']} does not hold the search text once")
        self.mutated.append((path, text))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(entry["search"], entry["replace"], 1))

    def build(self, log):
        with open(log, "w") as output:
            return subprocess.run(["swift", "build", "--build-tests"], cwd=self.source, stdout=output,
                                  stderr=subprocess.STDOUT).returncode == 0

    def bundle(self):
        binary = subprocess.run(["swift", "build", "--show-bin-path"], cwd=self.source, check=True,
                                capture_output=True, text=True).stdout.strip()
        return os.path.join(binary, "PrefsPackageTests.xctest")

    def missing_tests(self, tests):
        """The named tests the built bundle does not have."""
        listed = subprocess.run([self.bundle(), "--testing-library", "swift-testing", "--list-tests"],
                                cwd=self.source, capture_output=True, text=True).stdout
        return [test for test in tests if not re.search(r"[./]" + re.escape(test) + r"\(", listed)]

    def run_tests(self, tests, log, timeout):
        """Runs the tests; returns (status, timed out). Private XDG folders, as scripts/suite.sh gives the suite."""
        with tempfile.TemporaryDirectory(prefix="prefs-mutant-") as home:
            environment = dict(os.environ, XDG_CONFIG_HOME=f"{home}/config", XDG_DATA_HOME=f"{home}/data",
                               XDG_STATE_HOME=f"{home}/state")
            command = [self.bundle(), "--testing-library", "swift-testing", "--parallel"] + filters(tests)
            with open(log, "w") as output:
                process = subprocess.Popen(command, cwd=self.source, env=environment, stdout=output,
                                           stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    return process.wait(timeout=timeout), False
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    return None, True


def first_failure(log):
    """Where the first failing expectation of a run's log is, or what else ended the run."""
    with open(log, errors="replace") as handle:
        text = handle.read()
    found = re.search(r"recorded an issue (?:with \d+ arguments? .*? )?at (\S+?:\d+):\d+", text)
    if found:
        return found.group(1)
    return "the run failed without an issue recorded (a crash?)"


def main():
    parser = argparse.ArgumentParser(description="Mutation check of docs/PROMISES.md (Tests/Mutants/mutations.txt)")
    parser.add_argument("--section", action="append", default=[], help="only this section (repeatable)")
    parser.add_argument("--tag", action="append", default=[], help="only entries with this tag (repeatable)")
    parser.add_argument("--skip-tag", action="append", default=[], help="leave out entries with this tag")
    parser.add_argument("--id", action="append", default=[], help="only this entry (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the selected entries and stop")
    parser.add_argument("--check", action="store_true", help="check the list against the code and stop")
    arguments = parser.parse_args()

    entries = parse(LIST)
    for section in arguments.section:
        if section not in SECTIONS:
            fail(f"no section {section!r}; the sections are {', '.join(SECTIONS)}")
    known = {entry["id"] for entry in entries}
    for identifier in arguments.id:
        if identifier not in known:
            fail(f"no entry {identifier!r}")
    selected = [
        entry for entry in entries
        if (not arguments.section or entry["section"] in arguments.section)
        and (not arguments.tag or set(arguments.tag) & set(entry["tags"]))
        and not set(arguments.skip_tag) & set(entry["tags"])
        and (not arguments.id or entry["id"] in arguments.id)
    ]
    if not selected:
        fail("no entry selected")
    check_searches(selected)
    if arguments.list or arguments.check:
        for entry in selected:
            tags = f" [{', '.join(entry['tags'])}]" if entry["tags"] else ""
            print(f"{entry['id']} ({entry['section']}{tags}): {entry['row']}")
        print(f"{len(selected)} mutations, every search text found once")
        return 0

    directory = os.environ.get("PREFS_MUTANTS_DIR") or os.path.join(
        tempfile.gettempdir(), f"prefs-mutants-{os.getuid()}-{zlib.crc32(ROOT.encode()):08x}")
    timeout = int(os.environ.get("PREFS_MUTANT_TIMEOUT", "900"))
    scratch = Scratch(directory)
    logs = os.path.join(directory, "logs")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    started = time.monotonic()
    print(f"mutants: {len(selected)} mutations; scratch copy and logs in {directory}", flush=True)
    scratch.sync()

    # The named tests must pass on the unchanged code, and each must exist: a test that does not run kills nothing.
    if not scratch.build(os.path.join(logs, "baseline-build.log")):
        fail(f"the unchanged copy does not build: {logs}/baseline-build.log")
    every_test = sorted({test for entry in selected for test in entry["tests"]})
    missing = scratch.missing_tests(every_test)
    if missing:
        fail("named tests that do not exist (a renamed or removed test kills nothing): " + ", ".join(missing))
    baseline_log = os.path.join(logs, "baseline-tests.log")
    status, timed_out = scratch.run_tests(every_test, baseline_log, timeout * 2)
    if status != 0:
        fail(f"the named tests must pass on the unchanged code (status {status}, timed out {timed_out}): "
             f"{baseline_log}")
    print(f"mutants: baseline: {len(every_test)} named tests pass ({time.monotonic() - started:.0f} s)", flush=True)

    results = []
    for number, entry in enumerate(selected, start=1):
        began = time.monotonic()
        scratch.restore()
        scratch.mutate(entry)
        build_log = os.path.join(logs, f"{entry['id']}.build.log")
        test_log = os.path.join(logs, f"{entry['id']}.tests.log")
        if not scratch.build(build_log):
            outcome = "does not build"
        else:
            status, timed_out = scratch.run_tests(entry["tests"], test_log, timeout)
            outcome = "killed (hung)" if timed_out else "killed" if status != 0 else "SURVIVED"
        seconds = time.monotonic() - began
        if outcome == "killed":
            outcome += ": " + first_failure(test_log)
        results.append((entry, outcome, seconds))
        print(f"mutants: [{number}/{len(selected)}] {entry['id']} ({entry['section']}): {outcome} "
              f"({seconds:.0f} s)", flush=True)
    scratch.restore()
    scratch.build(os.path.join(logs, "restored-build.log"))

    total = time.monotonic() - started
    killed = [result for result in results if result[1].startswith("killed")]
    survivors = [result for result in results if result[1] == "SURVIVED"]
    broken = [result for result in results if result[1] == "does not build"]
    summary = os.path.join(directory, "last-run.txt")
    with open(summary, "w") as output:
        output.write(f"{len(results)} mutations, {len(killed)} killed, {len(survivors)} survived, "
                     f"{len(broken)} did not build, in {total / 60:.1f} min\n")
        for section in SECTIONS:
            of_section = [result for result in results if result[0]["section"] == section]
            if of_section:
                dead = sum(result[1].startswith("killed") for result in of_section)
                output.write(f"  {section}: {len(of_section)} mutations, {dead} killed\n")
        for entry, outcome, seconds in results:
            output.write(f"{seconds:5.0f} s  {entry['id']} ({entry['section']}): {outcome}\n")
    with open(summary) as handle:
        print("\n" + handle.read(), end="")
    for entry, outcome, _ in survivors + broken:
        print(f"mutants: {entry['id']} {outcome}: the promise `{entry['row']}` is not checked by "
              f"{', '.join(entry['tests'])} ({LIST}:{entry['line']}; log {logs}/{entry['id']}.*.log)",
              file=sys.stderr)
    return 1 if survivors or broken else 0


if __name__ == "__main__":
    sys.exit(main())
