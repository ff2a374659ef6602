# link/link.mk - the userspace bottleneck link daemon ckcd-link, and its unit
# test binary (frame parsing, JSON, units, the capture's pcapng), run by tests/link/.
# Included from datapath/Makefile: paths are relative to datapath/.
LINK_SRCS      := main.c pipe.c tx.c port.c report.c control.c json.c units.c frame.c host_key.c host_delay.c \
                  trace.c loss.c capture.c
LINK_OBJS      := $(LINK_SRCS:%.c=$(BUILD)/link/%.o)
LINK_UNIT_OBJS := $(BUILD)/link/unit_test.o $(BUILD)/link/frame.o $(BUILD)/link/host_key.o $(BUILD)/link/host_delay.o $(BUILD)/link/json.o \
                  $(BUILD)/link/units.o $(BUILD)/link/trace.o $(BUILD)/link/loss.o $(BUILD)/link/capture.o \
                  $(AQM_HOST_OBJ)
LINK_HDRS      := $(wildcard link/*.h) core/aqm.h host/aqm_host.h

all: $(BUILD)/ckcd-link $(BUILD)/link-unit-test

$(BUILD)/link:
	mkdir -p $@

$(BUILD)/link/%.o: link/%.c $(LINK_HDRS) | $(BUILD)/link
	$(CC) $(CFLAGS) -pthread -c -o $@ $<

$(BUILD)/ckcd-link: $(LINK_OBJS) $(AQM_HOST_OBJ) $(AQM_CORE_LIB)
	$(CC) $(CFLAGS) -pthread -o $@ $(LINK_OBJS) $(AQM_HOST_OBJ) $(AQM_CORE_LIB) -lm

$(BUILD)/link-unit-test: $(LINK_UNIT_OBJS)
	$(CC) $(CFLAGS) -pthread -o $@ $(LINK_UNIT_OBJS) -lm

.PHONY: link-objs
link-objs: $(LINK_OBJS)
