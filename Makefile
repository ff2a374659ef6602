# ckcd-coex: the two commands a newcomer needs are `make demo` and `make test`.
PY := .venv/bin/python

.PHONY: setup setup-tests test check demo bench clean-lab datapath dkms deb

setup:            ## install Debian packages, the venv with pinned Ryu, build the datapath
	@bash scripts/setup.sh

setup-tests:      ## setup, plus what only the tests need (clang for the fuzz targets)
	@bash scripts/setup.sh --tests

# The controller's tests again under os-ken on Debian 13's Python 3.13 (tests/platform/trixie.py).
OSKEN_LEG := tests/platform tests/integration/test_forwarding.py tests/integration/test_rest.py \
	tests/integration/test_heavy_hitters.py tests/integration/test_observe.py tests/integration/test_readme_commands.py

# The tests that need no lab run on both cores (a file's tests on one core: test_sanitized's builds
# share a directory); then the lab's, one at a time, as the lab lock has them anyway.
test: setup-tests ## every test: unit, algorithm (also under ASan/UBSan and libFuzzer), integration (real OVS, ryu-manager, Mininet, iperf3, ckcd-link) and the kernel lab (sch_ckcd, OVS's kernel datapath in a qemu VM); then the controller's under os-ken on Python 3.13; what CI runs
	$(PY) -m pytest -n 2 --dist loadfile --durations=15 -m "not lab"
	$(PY) -m pytest --durations=40 -m lab
	$(PY) -m pytest --durations=10 --os-ken-leg $(OSKEN_LEG)

check:            ## the inner loop: unit, algorithm and replay tests, no root, no lab, no VM (pytest -m "not lab and not slow", on both cores)
	@test -x $(PY) || { echo "no .venv yet: run make test (or make setup) once"; exit 1; }
	@$(MAKE) -s -C datapath all >/dev/null
	$(PY) -m pytest -q -n 2 -m "not lab and not slow"

demo: setup       ## short lab run: dumbbell, controller, BBR vs CUBIC, printed table and report
	.venv/bin/ckcd-coex demo

bench: setup      ## benchmarks: JSON into bench/results/, compared with bench/baseline/
	@set -e; for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done

datapath:
	$(MAKE) -C datapath

dkms:             ## on a switch host, as root: sch_ckcd.ko through DKMS, installed for the running kernel and every later one
	@bash scripts/dkms.sh $(DKMS_ARGS)

deb:              ## a switch host's Debian packages (sch-ckcd-dkms, ckcd-tc-plugin, ckcd-qdisc-agent) into dist/deb/; no root, no network
	@bash scripts/deb.sh $(DEB_ARGS)

clean-lab:        ## remove what a crashed lab run left behind
	.venv/bin/ckcd-coex clean
