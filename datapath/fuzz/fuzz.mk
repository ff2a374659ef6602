# fuzz/fuzz.mk - libFuzzer targets for the three parsers that read outside
# input: the control socket's JSON (json_parse_flat), the core's spec
# (aqm_create), and frames (frame_check/frame_classify). clang only;
# tests/datapath/test_sanitized.py builds and runs them for a bounded time on
# the committed corpora (fuzz/corpus/<target>/).
FUZZ_CC     ?= clang
FUZZ_BUILD  := build-fuzz
FUZZ_CFLAGS := -O1 -g -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
FUZZ_TARGETS := $(FUZZ_BUILD)/fuzz_json $(FUZZ_BUILD)/fuzz_spec $(FUZZ_BUILD)/fuzz_frame

fuzz: $(FUZZ_TARGETS)

$(FUZZ_BUILD)/fuzz_json: fuzz/fuzz_json.c link/json.c link/json.h
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_json.c link/json.c -lm

$(FUZZ_BUILD)/fuzz_frame: fuzz/fuzz_frame.c link/frame.c link/frame.h
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_frame.c link/frame.c

$(FUZZ_BUILD)/fuzz_spec: fuzz/fuzz_spec.c host/aqm_host.c $(CORE_SRCS) $(CORE_HDRS) host/aqm_host.h
	@mkdir -p $(FUZZ_BUILD)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/fuzz_spec.c host/aqm_host.c $(CORE_SRCS)

.PHONY: fuzz
