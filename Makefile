# ckcd-coex: the two commands a newcomer needs are `make demo` and `make test`.
PY := .venv/bin/python

.PHONY: setup setup-tests test demo bench clean-lab datapath dkms

setup:            ## install Debian packages, the venv with pinned Ryu, build the datapath
	@bash scripts/setup.sh

setup-tests:      ## setup, plus what only the tests need (clang for the fuzz targets)
	@bash scripts/setup.sh --tests

test: setup-tests ## unit, algorithm (also under ASan/UBSan and libFuzzer) and integration tests (real OVS, ryu-manager, Mininet, iperf3)
	$(PY) -m pytest

demo: setup       ## short lab run: dumbbell, controller, BBR vs CUBIC, printed table and report
	.venv/bin/ckcd-coex demo

bench: setup      ## benchmarks: JSON into bench/results/, compared with bench/baseline/
	@set -e; for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b; done

datapath:
	$(MAKE) -C datapath

dkms:             ## on a switch host, as root: sch_ckcd.ko through DKMS, installed for the running kernel and every later one
	@bash scripts/dkms.sh $(DKMS_ARGS)

clean-lab:        ## remove what a crashed lab run left behind
	.venv/bin/ckcd-coex clean
