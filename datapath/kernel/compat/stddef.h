/* stddef.h for the core inside the kernel (see stdint.h here): size_t and NULL. */
#ifndef CKCD_KERNEL_STDDEF_H
#define CKCD_KERNEL_STDDEF_H
#include <linux/types.h>
#include <linux/stddef.h>
#endif
