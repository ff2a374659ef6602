/* ckcd_nl.h - what sch_ckcd.ko and tc's q_ckcd.so agree on: the netlink option
 * numbers and the xstats layout. Included by both sides (kernel and tc plugin).
 *
 * The configuration travels as the core's own spec text, validated by the
 * kernel with the core's parser against the core's one parameter table
 * (aqm_params.c), so no second table of names, units, defaults or ranges
 * exists here. Three attributes, as a Linux qdisc's change keeps what it is
 * not told:
 *
 *   TCA_CKCD_SPEC    a whole spec ("bands map=46:0 | ckcd | droptail"): the
 *                    new configuration, every parameter it leaves out at its
 *                    default. Sent alone.
 *   TCA_CKCD_DISC    the discipline (`tc ... ckcd disc red`). At change, a
 *                    discipline other than the running one starts from its
 *                    defaults; the running one keeps its values.
 *   TCA_CKCD_PARAMS  "name=value ..." in the core's spelling and units: the
 *                    parameters given. At change they replace the running
 *                    queue's values of the same names and keep the others;
 *                    at init they apply to TCA_CKCD_DISC (default: ckcd).
 *
 * A change with none of them is refused. dump returns TCA_CKCD_SPEC: the
 * core's aqm_describe() of the running queue (every parameter, defaults filled
 * in), sized from the spec itself, never cut.
 */
#ifndef CKCD_NL_H
#define CKCD_NL_H

#include <linux/types.h>

enum {
	TCA_CKCD_UNSPEC,
	TCA_CKCD_SPEC,   /* NUL-terminated core spec: the whole configuration */
	TCA_CKCD_DISC,   /* NUL-terminated discipline name */
	TCA_CKCD_PARAMS, /* NUL-terminated "name=value ..." */
	__TCA_CKCD_MAX
};
#define TCA_CKCD_MAX (__TCA_CKCD_MAX - 1)
/* The longest spec accepted (bytes, NUL included). What dump returns may be
 * longer only if a spec accepted here describes to more, which the core's
 * tables keep from happening: 8 bands of ckcd with every parameter at its
 * widest describe to under 2500 bytes. */
#define TCA_CKCD_SPEC_LEN 4096

/* 2: marks[] appended (ECN). A reader takes the marks only from a payload
 * long enough to hold them: a version 1 module sends none. */
#define CKCD_XSTATS_VERSION 2
#define CKCD_XSTATS_REASONS 8 /* >= AQM_DROP_REASONS; checked at build time */
#define CKCD_XSTATS_HAS_FLOWS 1 /* active_flows and fair_share_bps are reported */

struct tc_ckcd_xstats {
	__u32 version;
	__u32 nreasons; /* drops[] and marks[] entries in use, in enum aqm_drop_reason order */
	__u32 flags;
	__u32 active_flows; /* ckcd: flows counted in I for the current window */
	__u64 fair_share_bps; /* ckcd: C / I */
	__u64 enq_pkts, deq_pkts;
	__u64 drops[CKCD_XSTATS_REASONS];
	__u64 marks[CKCD_XSTATS_REASONS]; /* ECN CE marks instead of drops, by reason */
};
/* The length of a version 1 payload, which had no marks. */
#define CKCD_XSTATS_V1_LEN (sizeof(struct tc_ckcd_xstats) - CKCD_XSTATS_REASONS * sizeof(__u64))

#endif
