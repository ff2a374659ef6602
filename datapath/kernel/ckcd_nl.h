/* ckcd_nl.h - what sch_ckcd.ko and tc's q_ckcd.so agree on: the netlink option
 * numbers and the xstats layout. Included by both sides (kernel and tc plugin).
 *
 * The configuration is one attribute, the core's own spec text
 * ("ckcd limit=80 d_ms=5 ..."): the kernel validates it with the core's parser
 * against the core's one parameter table (aqm_params.c), so no second table of
 * names, units, defaults or ranges exists here. dump returns the core's
 * aqm_describe() of the running queue: every parameter, defaults filled in.
 */
#ifndef CKCD_NL_H
#define CKCD_NL_H

#include <linux/types.h>

enum {
	TCA_CKCD_UNSPEC,
	TCA_CKCD_SPEC, /* NUL-terminated core spec */
	__TCA_CKCD_MAX
};
#define TCA_CKCD_MAX (__TCA_CKCD_MAX - 1)
#define TCA_CKCD_SPEC_LEN 1024 /* bytes, NUL included: a bands spec with 8 ckcd children fits */

#define CKCD_XSTATS_VERSION 1
#define CKCD_XSTATS_REASONS 8 /* >= AQM_DROP_REASONS; checked at build time */
#define CKCD_XSTATS_HAS_FLOWS 1 /* active_flows and fair_share_bps are reported */

struct tc_ckcd_xstats {
	__u32 version;
	__u32 nreasons; /* drops[] entries in use, in enum aqm_drop_reason order */
	__u32 flags;
	__u32 active_flows; /* ckcd: flows counted in I for the current window */
	__u64 fair_share_bps; /* ckcd: C / I */
	__u64 enq_pkts, deq_pkts;
	__u64 drops[CKCD_XSTATS_REASONS];
};

#endif
