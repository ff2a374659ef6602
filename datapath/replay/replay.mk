# replay/replay.mk - ckcd-replay (trace replay through an AQM and a simulated
# link) and aqm-bench (per-packet cost), both linked with the core library.
REPLAY_TOOLS := $(BUILD)/ckcd-replay $(BUILD)/aqm-bench

all: $(REPLAY_TOOLS)

$(BUILD)/ckcd-replay: replay/ckcd_replay.c core/aqm.h host/aqm_host.h $(AQM_HOST_OBJ) $(AQM_CORE_LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ replay/ckcd_replay.c $(AQM_HOST_OBJ) $(AQM_CORE_LIB)

$(BUILD)/aqm-bench: replay/aqm_bench.c core/aqm.h host/aqm_host.h $(AQM_HOST_OBJ) $(AQM_CORE_LIB)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ replay/aqm_bench.c $(AQM_HOST_OBJ) $(AQM_CORE_LIB)
