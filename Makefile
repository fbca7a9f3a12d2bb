# `make demo` runs the demo (it ends with `prefs describe` of its own domain, so the tool is built first) in the build
# `make test` makes (scripts/suite.sh), `make test` the first of the checks CI runs. Both install libsodium first if
# needed.
# `make test` also compares the public API of the four library products with api/*.txt (scripts/api.sh);
# `make api-baseline` rewrites those files from the build (its flags are scripts/suite.sh's), for a change to the API
# that is meant.
.PHONY: deps demo test format api-baseline

deps:
	@scripts/install-deps.sh

demo: deps
	scripts/demo.sh

test: deps
	scripts/test.sh

api-baseline: deps
	for target in PrefsTesting PrefsPostgres PrefsKeyring; do \
		swift build --enable-code-coverage -Xswiftc -warnings-as-errors -Xswiftc -index-ignore-system-modules \
			--target $$target || exit 1; done
	scripts/api.sh baseline "$$(swift build --enable-code-coverage --show-bin-path)"

format:
	swift format -i -r Sources Tests Package.swift Benchmarks/Package.swift Benchmarks/Sources/PrefsBench

# `make cli` builds the `prefs` command-line tool: .build/release/prefs
.PHONY: cli
cli: deps
	swift build -c release --product prefs
	@echo "built $$(swift build -c release --show-bin-path)/prefs"

# `make docs` builds the DocC catalog with the toolchain's docc and fails on any warning. Every `make test` measures
# coverage and fails below 90% line coverage of the library; `make coverage` is that run, printing every uncovered
# line as well.
.PHONY: docs coverage

docs: deps
	scripts/docs.sh

coverage: deps
	scripts/coverage.sh

# `make bench` runs every benchmark (about 25 s), `make bench-quick` a smoke run (a few seconds after its build). prefs-bench is
# a package of its own, Benchmarks/, so that no package depending on Prefs sees it.
.PHONY: bench bench-quick bench-scaling
BENCH = swift run --package-path Benchmarks -c release prefs-bench
bench: deps
	$(BENCH)

bench-quick: deps
	$(BENCH) --quick --json

bench-scaling: deps
	$(BENCH) --scaling

# Reliability: `make reliability` is the CI-sized suite on `make test`'s build, `make soak` the same ten times
# longer (figures in docs/RELIABILITY.md), `make tsan` the library's tests under ThreadSanitizer, `make fuzz`
# libFuzzer over the store decoders (PREFS_FUZZ_SECONDS, default 60), `make asan` the library's tests under
# AddressSanitizer with LeakSanitizer (`make asan PREFS_ASAN_SCOPE=address-ci`: without the PostgreSQL store's, as CI
# runs it).
.PHONY: reliability soak tsan fuzz asan

reliability: deps
	scripts/reliability.sh

soak: deps
	PREFS_SOAK=1 scripts/reliability.sh

tsan: deps
	scripts/tsan.sh

fuzz: deps
	scripts/fuzz.sh

asan: deps
	scripts/asan.sh

# `make mutants`: the mutation check of docs/PROMISES.md (scripts/mutants.sh). Each entry of
# Tests/Mutants/mutations.txt breaks one promise with a one-line change in a scratch copy of this checkout (its build
# kept between runs under /tmp, or $PREFS_MUTANTS_DIR) and runs only the tests it names; a mutation they do not catch
# fails the check, naming its row. Not in CI: about half an hour here (docs/RELIABILITY.md, "Mutation check").
# `scripts/mutants.sh --section vault`, `--id ID`, `--tag T` run part of it.
.PHONY: mutants

mutants: deps
	scripts/mutants.sh
