/* q_dualpi2.c - tc's option parser and printer for Linux's qdisc kind "dualpi2"
 * (net/sched/sch_dualpi2.c, RFC 9332), for the kernel lab's DualPI2 cross-check.
 *
 * Debian's iproute2 (6.1 on our machines, 6.15 in trixie) predates tc's own
 * dualpi2 support, and tc loads $TC_LIB_DIR/q_<kind>.so for a kind it does not
 * know, as it loads q_ckcd.so: the lab puts this plugin beside q_ckcd.so. It is
 * a lab tool, built by tests/kernel/linux_dualpi2.py against the host's tc
 * headers, not part of what the project ships.
 *
 * The options and units are those tc-dualpi2(8) documents:
 *   limit PACKETS            memlimit BYTES           target TIME   tupdate TIME
 *   alpha HZ  beta HZ        (sent x 256, rounded to the nearest 1/256 Hz)
 *   step_thresh TIME|PACKETS (a number and p, pkt(s) or packet(s))
 *   min_qlen_step PACKETS    coupling_factor 1..255
 *   classic_protection 0..100[%] (c_protection: the same)
 *   l4s_ect | any_ect        drop_on_overload | overflow
 *   drop_dequeue | drop_enqueue                        split_gso | no_split_gso
 * TIME is a number with s, ms or us (none: microseconds), exact to the
 * microsecond. A number is digits, with a fraction only as a '.' and more
 * digits ("5." and ".5" are refused). A value the kernel's netlink policy would
 * refuse, that does not fit its attribute, or that the kernel would change on
 * the way in is refused here with a message naming the option: tupdate and
 * step_thresh as a time go up to 4294967us, since the kernel keeps them in ns
 * in 32 bits and silently clamps a larger one to 4294967295ns
 * (convert_us_to_nsec); target, kept in 64 bits, takes all 2^32 - 1 us.
 * Only what is given is sent, so `change` keeps the rest.
 * These rules are exercised by the kernel lab's DualPI2 test in a VM
 * (tests/kernel/test_kernel_lines.py): make check has no tc to load this into.
 *
 * The attribute numbers, types and the xstats layout are the kernel's uapi
 * (include/uapi/linux/pkt_sched.h, TCA_DUALPI2_* and struct tc_dualpi2_xstats),
 * written out here because the host's headers lack them.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

#include "utils.h"
#include "tc_util.h"

enum { /* TCA_DUALPI2_*: the attribute numbers of the kernel's uapi */
	DP2_LIMIT = 1,		/* u32 packets */
	DP2_MEMORY_LIMIT,	/* u32 bytes */
	DP2_TARGET,		/* u32 us */
	DP2_TUPDATE,		/* u32 us */
	DP2_ALPHA,		/* u32 Hz x 256 */
	DP2_BETA,		/* u32 Hz x 256 */
	DP2_STEP_THRESH_PKTS,	/* u32 packets */
	DP2_STEP_THRESH_US,	/* u32 us */
	DP2_MIN_QLEN_STEP,	/* u32 packets */
	DP2_COUPLING,		/* u8 */
	DP2_DROP_OVERLOAD,	/* u8: 0 overflow, 1 drop */
	DP2_DROP_EARLY,		/* u8: 0 at dequeue, 1 at enqueue */
	DP2_C_PROTECTION,	/* u8 percent */
	DP2_ECN_MASK,		/* u8: 1 ECT(1) only, 3 any ECT */
	DP2_SPLIT_GSO,		/* u8 */
	DP2_PAD,
	DP2_MAX = DP2_PAD
};

#define DP2_ECN_L4S 1
#define DP2_ECN_ANY 3
/* The kernel's range for alpha and beta (ALPHA_BETA_MAX in sch_dualpi2.c). */
#define DP2_ALPHA_BETA_MAX 0x7fffffffULL
/* The most us of a time the kernel keeps in ns in a u32 (tupdate, step_thresh):
 * U32_MAX ns, rounded down to the microsecond. */
#define DP2_NS32_MAX_US (UINT32_MAX / 1000ULL)

struct dp2_xstats { /* struct tc_dualpi2_xstats */
	uint32_t prob;		/* PI's p' over 2^32 - 1 */
	uint32_t delay_c;	/* us, the C queue's head now */
	uint32_t delay_l;	/* us, the L queue's head now */
	uint32_t packets_in_c;	/* enqueued into C, in all */
	uint32_t packets_in_l;	/* enqueued into L, in all */
	uint32_t maxq;		/* the most packets queued */
	uint32_t ecn_mark;	/* every CE mark, step ones included */
	uint32_t step_marks;	/* the L queue's step marks */
	int32_t credit;		/* WRR credit: > 0 the C queue's turn */
	uint32_t memory_used;
	uint32_t max_memory_used;
	uint32_t memory_limit;
};

static void explain(void)
{
	fprintf(stderr,
		"Usage: ... dualpi2 [ limit PACKETS ] [ memlimit BYTES ] [ target TIME ] [ tupdate TIME ]\n"
		"                   [ alpha HZ ] [ beta HZ ] [ step_thresh TIME|NUMpackets ] [ min_qlen_step PACKETS ]\n"
		"                   [ coupling_factor 1..255 ] [ classic_protection PERCENT ] [ l4s_ect | any_ect ]\n"
		"                   [ drop_on_overload | overflow ] [ drop_dequeue | drop_enqueue ]\n"
		"                   [ split_gso | no_split_gso ]\n"
		"TIME takes s, ms or us (default us).\n");
}

static int bad(const char *opt, const char *value, const char *why)
{
	fprintf(stderr, "dualpi2: option \"%s\": \"%s\" %s\n", opt, value, why);
	return -1;
}

/* The integer part of a decimal number. Larger is refused, whatever the
 * option: none takes more than 2^32 x 256 (alpha, beta) before its range check. */
#define DEC_MAX 1000000000000000ULL

/* Decimal digits: the integer part into *ip, the fraction's digits into *fp
 * as a number of *nf digits. Returns the first character after the number,
 * or NULL when v does not start with one; *big when the integer part is over
 * DEC_MAX or the fraction has more than 9 significant digits. A '.' with no
 * digit after it is no fraction: it is left as the first character after the
 * number, so "5." is refused as 5 with something after it. */
static const char *decimal(const char *s, uint64_t *ip, uint64_t *fp, int *nf, int *big)
{
	const char *p = s;

	*ip = *fp = 0;
	*nf = *big = 0;
	if (!isdigit((unsigned char)*p))
		return NULL;
	for (; isdigit((unsigned char)*p); p++) {
		if (*ip <= DEC_MAX)
			*ip = *ip * 10 + (uint64_t)(*p - '0');
		if (*ip > DEC_MAX)
			*big = 1;
	}
	if (p[0] == '.' && isdigit((unsigned char)p[1])) {
		const char *q = ++p;

		while (isdigit((unsigned char)*p))
			p++;
		for (; q < p; q++) {
			if (*nf == 9) {
				if (*q != '0')
					*big = 1;
				continue;
			}
			*fp = *fp * 10 + (uint64_t)(*q - '0');
			(*nf)++;
		}
	}
	return p;
}

static uint64_t pow10u(int n)
{
	uint64_t r = 1;

	while (n-- > 0)
		r *= 10;
	return r;
}

static int out_of_range(const char *opt, const char *v, uint64_t min, uint64_t max, const char *unit)
{
	fprintf(stderr, "dualpi2: option \"%s\": \"%s\" is out of range %llu%s..%llu%s\n", opt, v,
		(unsigned long long)min, unit, (unsigned long long)max, unit);
	return -1;
}

/* A whole number in [min, max], nothing after it but an optional suffix. */
static int whole(const char *opt, const char *v, uint64_t min, uint64_t max, const char *suffix, uint32_t *out)
{
	uint64_t i, f;
	int nf, big;
	const char *end = decimal(v, &i, &f, &nf, &big);

	if (!end || nf || (*end && (!suffix || strcmp(end, suffix))))
		return bad(opt, v, "is not a whole number");
	if (big || i < min || i > max)
		return out_of_range(opt, v, min, max, "");
	*out = (uint32_t)i;
	return 0;
}

/* TIME: a number with s, ms or us (none: us), exactly a whole number of us
 * in [min, max]. 1 when v is no time at all (step_thresh then tries packets),
 * -1 when it is one the kernel cannot take or would clamp (said why). */
static int time_us(const char *opt, const char *v, uint64_t min, uint64_t max, uint32_t *out)
{
	static const struct { const char *sfx; int exp; } units[] = {
		{ "", 0 }, { "us", 0 }, { "usec", 0 }, { "ms", 3 }, { "msec", 3 }, { "s", 6 }, { "sec", 6 },
	};
	uint64_t i, f, us;
	int nf, big, k;
	const char *end = decimal(v, &i, &f, &nf, &big);
	size_t u;

	if (!end)
		return 1;
	for (u = 0; u < sizeof(units) / sizeof(units[0]); u++)
		if (!strcasecmp(end, units[u].sfx))
			break;
	if (u == sizeof(units) / sizeof(units[0]))
		return 1;
	k = units[u].exp;
	if (nf > k && f % pow10u(nf - k))
		return bad(opt, v, "is not a whole number of microseconds");
	if (big || i > UINT32_MAX) /* before i x 10^6, which could overflow */
		return out_of_range(opt, v, min, max, "us");
	us = i * pow10u(k) + (nf > k ? f / pow10u(nf - k) : f * pow10u(k - nf));
	if (us < min || us > max)
		return out_of_range(opt, v, min, max, "us");
	*out = (uint32_t)us;
	return 0;
}

/* PACKETS for step_thresh: a whole number with p, pkt, pkts, packet or
 * packets (tc-dualpi2(8)'s spellings). 1 when v has none of them. */
static int packets(const char *opt, const char *v, uint32_t *out)
{
	static const char *const sfx[] = { "p", "pkt", "pkts", "packet", "packets" };
	uint64_t i, f;
	int nf, big;
	const char *end = decimal(v, &i, &f, &nf, &big);
	size_t u;

	if (!end)
		return 1;
	for (u = 0; u < sizeof(sfx) / sizeof(sfx[0]); u++)
		if (!strcmp(end, sfx[u]))
			break;
	if (u == sizeof(sfx) / sizeof(sfx[0]))
		return 1;
	if (nf)
		return bad(opt, v, "is not a whole number of packets");
	if (big || i > UINT32_MAX)
		return bad(opt, v, "is out of range 0..4294967295 packets");
	*out = (uint32_t)i;
	return 0;
}

/* alpha, beta: Hz, sent x 256 rounded to the nearest, 1..2^31 - 1 after
 * (the kernel's range). */
static int hz256(const char *opt, const char *v, uint32_t *out)
{
	uint64_t i, f, scaled, den;
	int nf, big;
	const char *end = decimal(v, &i, &f, &nf, &big);

	if (!end || *end)
		return bad(opt, v, "is not a frequency in Hz (a number such as 0.16)");
	if (big || i > DP2_ALPHA_BETA_MAX)
		return bad(opt, v, "is too large or too precise (at most 8388607.99 Hz, 9 decimals)");
	den = pow10u(nf);
	scaled = i * 256 + (f * 256 + den / 2) / den;
	if (scaled < 1)
		return bad(opt, v, "rounds to 0 in 1/256 Hz (at least 0.00390625)");
	if (scaled > DP2_ALPHA_BETA_MAX)
		return bad(opt, v, "is too large (at most 8388607.99 Hz)");
	*out = (uint32_t)scaled;
	return 0;
}

static int percent(const char *opt, const char *v, uint32_t *out)
{
	uint64_t i, f;
	int nf, big;
	const char *end = decimal(v, &i, &f, &nf, &big);

	if (!end || nf || (*end && strcmp(end, "%")))
		return bad(opt, v, "is not a whole percentage");
	if (big || i > 100)
		return bad(opt, v, "is out of range 0..100");
	*out = (uint32_t)i;
	return 0;
}

/* Which values were given, as attributes in order. */
struct dp2_opts {
	uint32_t u32[DP2_MAX + 1];
	uint8_t u8[DP2_MAX + 1];
	int given[DP2_MAX + 1];
};

static void set_u8(struct dp2_opts *o, int attr, uint8_t v)
{
	o->u8[attr] = v;
	o->given[attr] = 1;
}

static int dualpi2_parse_opt(struct qdisc_util *qu, int argc, char **argv, struct nlmsghdr *n,
			     const char *dev)
{
	static const struct { const char *name; int attr; uint8_t value; } flags[] = {
		{ "l4s_ect", DP2_ECN_MASK, DP2_ECN_L4S }, { "any_ect", DP2_ECN_MASK, DP2_ECN_ANY },
		{ "drop_on_overload", DP2_DROP_OVERLOAD, 1 }, { "overflow", DP2_DROP_OVERLOAD, 0 },
		{ "drop_enqueue", DP2_DROP_EARLY, 1 }, { "drop_dequeue", DP2_DROP_EARLY, 0 },
		{ "split_gso", DP2_SPLIT_GSO, 1 }, { "no_split_gso", DP2_SPLIT_GSO, 0 },
	};
	struct dp2_opts o;
	struct rtattr *tail;
	uint32_t v;
	size_t i;
	int attr;

	memset(&o, 0, sizeof(o));
	for (; argc > 0; argc--, argv++) {
		const char *opt = *argv, *val;
		int done = 0;

		for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
			if (!strcmp(opt, flags[i].name)) {
				set_u8(&o, flags[i].attr, flags[i].value);
				done = 1;
			}
		if (done)
			continue;
		if (!strcmp(opt, "help")) {
			explain();
			return -1;
		}
		if (strcmp(opt, "limit") && strcmp(opt, "memlimit") && strcmp(opt, "target") &&
		    strcmp(opt, "tupdate") && strcmp(opt, "alpha") && strcmp(opt, "beta") &&
		    strcmp(opt, "step_thresh") && strcmp(opt, "min_qlen_step") &&
		    strcmp(opt, "coupling_factor") && strcmp(opt, "classic_protection") &&
		    strcmp(opt, "c_protection")) {
			fprintf(stderr, "dualpi2: unknown option \"%s\"\n", opt);
			explain();
			return -1;
		}
		if (argc < 2) {
			fprintf(stderr, "dualpi2: option \"%s\" needs a value\n", opt);
			return -1;
		}
		argc--;
		val = *++argv;
		if (!strcmp(opt, "limit")) {
			attr = DP2_LIMIT;
			if (whole(opt, val, 1, UINT32_MAX, NULL, &v))
				return -1;
		} else if (!strcmp(opt, "memlimit")) {
			attr = DP2_MEMORY_LIMIT;
			if (whole(opt, val, 1, UINT32_MAX, NULL, &v))
				return -1;
		} else if (!strcmp(opt, "min_qlen_step")) {
			attr = DP2_MIN_QLEN_STEP;
			if (whole(opt, val, 0, UINT32_MAX, NULL, &v))
				return -1;
		} else if (!strcmp(opt, "target") || !strcmp(opt, "tupdate")) {
			int r;

			attr = !strcmp(opt, "target") ? DP2_TARGET : DP2_TUPDATE;
			r = attr == DP2_TUPDATE ? time_us(opt, val, 1, DP2_NS32_MAX_US, &v) :
						  time_us(opt, val, 0, UINT32_MAX, &v);
			if (r > 0)
				return bad(opt, val, "is not a time (a number with s, ms or us)");
			if (r < 0)
				return -1;
		} else if (!strcmp(opt, "alpha") || !strcmp(opt, "beta")) {
			attr = !strcmp(opt, "alpha") ? DP2_ALPHA : DP2_BETA;
			if (hz256(opt, val, &v))
				return -1;
		} else if (!strcmp(opt, "step_thresh")) {
			int r = time_us(opt, val, 0, DP2_NS32_MAX_US, &v);

			if (r < 0)
				return -1;
			attr = DP2_STEP_THRESH_US;
			if (r > 0) {
				r = packets(opt, val, &v);
				if (r > 0)
					return bad(opt, val, "is neither a time (s, ms, us) nor packets (a number and p, "
						   "pkt(s) or packet(s))");
				if (r < 0)
					return -1;
				attr = DP2_STEP_THRESH_PKTS;
			}
			/* one step threshold: the kernel refuses both */
			o.given[DP2_STEP_THRESH_US] = o.given[DP2_STEP_THRESH_PKTS] = 0;
		} else if (!strcmp(opt, "coupling_factor")) {
			if (whole(opt, val, 1, 255, NULL, &v))
				return -1;
			set_u8(&o, DP2_COUPLING, (uint8_t)v);
			continue;
		} else {
			if (percent(opt, val, &v))
				return -1;
			set_u8(&o, DP2_C_PROTECTION, (uint8_t)v);
			continue;
		}
		o.u32[attr] = v;
		o.given[attr] = 1;
	}

	tail = addattr_nest(n, 1024, TCA_OPTIONS | NLA_F_NESTED);
	for (attr = DP2_LIMIT; attr <= DP2_MIN_QLEN_STEP; attr++)
		if (o.given[attr])
			addattr32(n, 1024, attr, o.u32[attr]);
	for (attr = DP2_COUPLING; attr <= DP2_SPLIT_GSO; attr++)
		if (o.given[attr])
			addattr8(n, 1024, attr, o.u8[attr]);
	addattr_nest_end(n, tail);
	return 0;
}

static int attr_u32(struct rtattr *tb[], int attr, uint32_t *v)
{
	if (!tb[attr] || RTA_PAYLOAD(tb[attr]) < sizeof(uint32_t))
		return 0;
	*v = rta_getattr_u32(tb[attr]);
	return 1;
}

static int attr_u8(struct rtattr *tb[], int attr, uint8_t *v)
{
	if (!tb[attr] || RTA_PAYLOAD(tb[attr]) < sizeof(uint8_t))
		return 0;
	*v = rta_getattr_u8(tb[attr]);
	return 1;
}

/* A time in us as tc-dualpi2(8) writes it (15ms, 1ms, 500us), and the us in JSON. */
static void print_us(const char *key, uint32_t us)
{
	char text[32], fmt[48];

	if (us && us % 1000000 == 0)
		snprintf(text, sizeof(text), "%us", us / 1000000);
	else if (us && us % 1000 == 0)
		snprintf(text, sizeof(text), "%ums", us / 1000);
	else
		snprintf(text, sizeof(text), "%uus", us);
	print_uint(PRINT_JSON, key, NULL, us);
	snprintf(fmt, sizeof(fmt), "%s %%s ", key);
	print_string(PRINT_FP, NULL, fmt, text);
}

static int dualpi2_print_opt(struct qdisc_util *qu, FILE *f, struct rtattr *opt)
{
	struct rtattr *tb[DP2_MAX + 1];
	uint32_t v;
	uint8_t b;

	if (!opt)
		return 0;
	parse_rtattr_nested(tb, DP2_MAX, opt);
	if (attr_u32(tb, DP2_LIMIT, &v))
		print_uint(PRINT_ANY, "limit", "limit %up ", v);
	if (attr_u32(tb, DP2_MEMORY_LIMIT, &v))
		print_uint(PRINT_ANY, "memlimit", "memlimit %uB ", v);
	if (attr_u32(tb, DP2_TARGET, &v))
		print_us("target", v);
	if (attr_u32(tb, DP2_TUPDATE, &v))
		print_us("tupdate", v);
	if (attr_u32(tb, DP2_ALPHA, &v))
		print_float(PRINT_ANY, "alpha", "alpha %f ", v / 256.0);
	if (attr_u32(tb, DP2_BETA, &v))
		print_float(PRINT_ANY, "beta", "beta %f ", v / 256.0);
	if (attr_u32(tb, DP2_STEP_THRESH_PKTS, &v))
		print_uint(PRINT_ANY, "step_thresh_pkts", "step_thresh %up ", v);
	if (attr_u32(tb, DP2_STEP_THRESH_US, &v))
		print_us("step_thresh", v);
	if (attr_u32(tb, DP2_MIN_QLEN_STEP, &v))
		print_uint(PRINT_ANY, "min_qlen_step", "min_qlen_step %up ", v);
	if (attr_u8(tb, DP2_COUPLING, &b))
		print_uint(PRINT_ANY, "coupling_factor", "coupling_factor %u ", b);
	if (attr_u8(tb, DP2_DROP_OVERLOAD, &b))
		print_string(PRINT_ANY, "overload", "%s ", b ? "drop_on_overload" : "overflow");
	if (attr_u8(tb, DP2_DROP_EARLY, &b))
		print_string(PRINT_ANY, "drop_at", "%s ", b ? "drop_enqueue" : "drop_dequeue");
	if (attr_u8(tb, DP2_C_PROTECTION, &b))
		print_uint(PRINT_ANY, "classic_protection", "classic_protection %u%% ", b);
	if (attr_u8(tb, DP2_ECN_MASK, &b))
		print_string(PRINT_ANY, "ecn", "%s ", b == DP2_ECN_L4S ? "l4s_ect" : b == DP2_ECN_ANY ? "any_ect" :
			     "ecn_mask_other");
	if (attr_u8(tb, DP2_SPLIT_GSO, &b))
		print_string(PRINT_ANY, "gso", "%s ", b ? "split_gso" : "no_split_gso");
	return 0;
}

static int dualpi2_print_xstats(struct qdisc_util *qu, FILE *f, struct rtattr *xstats)
{
	struct dp2_xstats st;

	if (!xstats)
		return 0;
	if (RTA_PAYLOAD(xstats) < sizeof(st))
		return -1;
	memcpy(&st, RTA_DATA(xstats), sizeof(st));
	print_float(PRINT_ANY, "prob", "  prob %f", st.prob / 4294967295.0);
	print_uint(PRINT_ANY, "delay_c_us", " delay_c %uus", st.delay_c);
	print_uint(PRINT_ANY, "delay_l_us", " delay_l %uus", st.delay_l);
	print_uint(PRINT_ANY, "pkts_in_c", "\n  pkts_in_c %u", st.packets_in_c);
	print_uint(PRINT_ANY, "pkts_in_l", " pkts_in_l %u", st.packets_in_l);
	print_uint(PRINT_ANY, "maxq", " maxq %u", st.maxq);
	print_uint(PRINT_ANY, "ecn_mark", "\n  ecn_mark %u", st.ecn_mark);
	print_uint(PRINT_ANY, "step_marks", " step_marks %u", st.step_marks);
	print_int(PRINT_ANY, "credit", " credit %d", st.credit);
	print_uint(PRINT_ANY, "memory_used", "\n  memory_used %u", st.memory_used);
	print_uint(PRINT_ANY, "max_memory_used", " max_memory_used %u", st.max_memory_used);
	print_uint(PRINT_ANY, "memory_limit", " memory_limit %u", st.memory_limit);
	return 0;
}

struct qdisc_util dualpi2_qdisc_util = {
	.id = "dualpi2",
	.parse_qopt = dualpi2_parse_opt,
	.print_qopt = dualpi2_print_opt,
	.print_xstats = dualpi2_print_xstats,
};
