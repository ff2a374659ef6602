/* stdint.h for the core inside the kernel: the kernel builds with -nostdinc and
 * ships no <stdint.h>, but <linux/types.h> has the same fixed-width types.
 * This directory is on the module's include path only, so datapath/core/ is
 * compiled unchanged. */
#ifndef CKCD_KERNEL_STDINT_H
#define CKCD_KERNEL_STDINT_H
#include <linux/types.h>
#include <linux/limits.h>
#define UINT64_C(c) c##ULL
#define INT64_C(c) c##LL
#define UINT32_C(c) c##U
#define UINT64_MAX U64_MAX
#define INT64_MAX S64_MAX
#define INT64_MIN S64_MIN
#define UINT32_MAX U32_MAX
#define INT32_MAX S32_MAX
/* The kernel's compiler_attributes.h makes `noinline` a macro, which breaks
 * the core's __attribute__((noinline)): the core names the GCC attribute. This
 * header is included by the core (and by sch_ckcd_qdisc.c after every kernel
 * header), so undefining it here reaches only that code. */
#undef noinline
#endif
