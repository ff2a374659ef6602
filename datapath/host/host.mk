# host/host.mk - the userspace host of the core (aqm_env: random, memory,
# drops), one object linked into ckcd-link, ckcd-replay and aqm-bench.
AQM_HOST_OBJ := $(BUILD)/host/aqm_host.o

$(AQM_HOST_OBJ): host/aqm_host.c host/aqm_host.h core/aqm.h
	@mkdir -p $(BUILD)/host
	$(CC) $(CFLAGS) -c -o $@ $<
