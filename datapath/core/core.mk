# core/core.mk - the portable AQM core as build/libaqmcore.a.
# Built freestanding: -nostdinc with only the compiler's own headers
# (stdint.h, stddef.h) so a libc include fails the build, and on x86
# -mgeneral-regs-only so any floating point fails it too (the kernel qdisc
# will reuse these files).
CORE_SRCS := $(wildcard core/*.c)
CORE_OBJS := $(patsubst core/%.c,$(BUILD)/core/%.o,$(CORE_SRCS))
CORE_HDRS := $(wildcard core/*.h)
AQM_CORE_LIB := $(BUILD)/libaqmcore.a

CORE_CFLAGS := $(CFLAGS) -ffreestanding -nostdinc -isystem $(shell $(CC) -print-file-name=include)
ifneq ($(filter x86_64 i%86,$(shell uname -m)),)
CORE_CFLAGS += -mgeneral-regs-only
endif

all: $(AQM_CORE_LIB)

$(BUILD)/core/%.o: core/%.c $(CORE_HDRS) core/core.mk
	@mkdir -p $(BUILD)/core
	$(CC) $(CORE_CFLAGS) -c $< -o $@

$(AQM_CORE_LIB): $(CORE_OBJS)
	rm -f $@
	$(AR) rcs $@ $^
