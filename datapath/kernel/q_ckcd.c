/* q_ckcd.c - tc's option parser and printer for qdisc kind "ckcd" (sch_ckcd.ko).
 *
 * tc loads it as $TC_LIB_DIR/q_ckcd.so and looks up ckcd_qdisc_util. The
 * options are the parameters of the core's own table (aqm_param_desc(), linked
 * in with the core), so names, units and the list in `help` cannot drift from
 * what the kernel accepts. Ranges are not checked here: the kernel checks them
 * with the same core parser and answers with an extack message naming the
 * option, so there is one authority.
 *
 *   tc qdisc add dev X root ckcd limit 80 delta 100ms d 5ms rate 100mbit rtt 20ms
 *   tc qdisc add dev X root ckcd limit=80 d_ms=5          (the core's own spelling)
 *   tc qdisc add dev X root ckcd disc red limit 200       (another core discipline)
 *   tc qdisc add dev X root ckcd spec "bands map=46:0 | ckcd | droptail"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

#include "utils.h"
#include "tc_util.h"

#include "aqm.h"
#include "ckcd_nl.h"

static void explain(const char *disc)
{
	struct aqm_param_desc d;
	unsigned int i;

	fprintf(stderr,
		"Usage: ... ckcd [ disc NAME ] [ OPTION VALUE | OPTION=VALUE ]...\n"
		"       ... ckcd spec \"CORE-SPEC\"\n"
		"An OPTION is a parameter of the core's table; time options take s/ms/us and\n"
		"rate options kbit/mbit/gbit suffixes, and may drop their _ms/_bps suffix.\n"
		"Options of %s:\n", disc);
	for (i = 0; aqm_param_desc(disc, i, &d); i++)
		fprintf(stderr, "  %-12s %s\n", d.name, d.unit);
}

/* The unit suffix a parameter's name carries, which its tc alias drops. */
static const char *name_suffix(const char *name)
{
	size_t n = strlen(name);

	if (n > 3 && !strcmp(name + n - 3, "_ms"))
		return "_ms";
	if (n > 4 && !strcmp(name + n - 4, "_bps"))
		return "_bps";
	return "";
}

static int find_param(const char *disc, const char *key, size_t keylen, struct aqm_param_desc *out)
{
	unsigned int i;

	for (i = 0; aqm_param_desc(disc, i, out); i++) {
		size_t n = strlen(out->name), sfx = strlen(name_suffix(out->name));

		if ((n == keylen || n - sfx == keylen) && !strncmp(out->name, key, keylen))
			return 1;
	}
	return 0;
}

/* A value for the core: its decimal text, with a tc unit suffix converted to
 * the parameter's own unit ("100us" for a _ms parameter -> "0.1"). */
static int core_value(const struct aqm_param_desc *d, const char *v, char *out, size_t outlen)
{
	static const struct { const char *sfx; unsigned __int128 num, den; } time_units[] = {
		{ "us", 1, 1000 }, { "usec", 1, 1000 }, { "ms", 1, 1 }, { "msec", 1, 1 },
		{ "s", 1000, 1 }, { "sec", 1000, 1 },
	}, rate_units[] = {
		{ "bit", 1, 1 }, { "kbit", 1000, 1 }, { "mbit", 1000000, 1 }, { "gbit", 1000000000, 1 },
		{ "bps", 8, 1 }, { "kbps", 8000, 1 }, { "mbps", 8000000, 1 }, { "gbps", 8000000000ULL, 1 },
	};
	unsigned __int128 nano = 0, num = 1, den = 1; /* value x 10^9 */
	const char *p = v, *sfx;
	unsigned int frac = 0, i;
	char digits[48];
	int n;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		nano = nano * 10 + (unsigned)(*p - '0');
		if (nano > (unsigned __int128)1 << 80)
			return -1;
	}
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			if (frac < 9) {
				nano = nano * 10 + (unsigned)(*p - '0');
				frac++;
			}
	for (; frac < 9; frac++)
		nano *= 10;
	sfx = p;
	if (*sfx) {
		int time = !strcmp(d->unit, "ms"), rate = !strcmp(d->unit, "bit/s");
		int found = 0;

		for (i = 0; time && i < ARRAY_SIZE(time_units); i++)
			if (!strcasecmp(sfx, time_units[i].sfx)) {
				num = time_units[i].num;
				den = time_units[i].den;
				found = 1;
			}
		for (i = 0; rate && i < ARRAY_SIZE(rate_units); i++)
			if (!strcasecmp(sfx, rate_units[i].sfx)) {
				num = rate_units[i].num;
				den = rate_units[i].den;
				found = 1;
			}
		if (!found)
			return -1;
	}
	nano = nano * num / den;
	n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)(nano / 1000000000));
	if (nano % 1000000000) {
		unsigned long long f = (unsigned long long)(nano % 1000000000);
		int w = 9;

		while (f % 10 == 0) {
			f /= 10;
			w--;
		}
		n += snprintf(digits + n, sizeof(digits) - n, ".%0*llu", w, f);
	}
	if ((size_t)n >= outlen)
		return -1;
	memcpy(out, digits, n + 1);
	return 0;
}

static int ckcd_parse_opt(struct qdisc_util *qu, int argc, char **argv, struct nlmsghdr *n,
			  const char *dev)
{
	char spec[TCA_CKCD_SPEC_LEN], val[48];
	const char *disc = "ckcd", *raw = NULL;
	struct aqm_param_desc d;
	struct rtattr *tail;
	size_t pos;

	if (argc >= 2 && !strcmp(argv[0], "disc")) {
		const char *const *names = aqm_discipline_names();
		unsigned int i;

		for (i = 0; names[i] && strcmp(names[i], argv[1]); i++)
			;
		if (!names[i]) {
			fprintf(stderr, "ckcd: unknown discipline \"%s\"\n", argv[1]);
			return -1;
		}
		disc = names[i];
		argc -= 2;
		argv += 2;
	}
	pos = snprintf(spec, sizeof(spec), "%s", disc);
	while (argc > 0) {
		const char *key = *argv, *eq = strchr(key, '='), *value;
		size_t keylen = eq ? (size_t)(eq - key) : strlen(key);

		if (!strcmp(key, "help")) {
			explain(disc);
			return -1;
		}
		if (!strcmp(key, "spec")) {
			NEXT_ARG();
			raw = *argv;
			argc--;
			argv++;
			continue;
		}
		if (!find_param(disc, key, keylen, &d)) {
			fprintf(stderr, "ckcd: %s has no option \"%.*s\" (ckcd help lists them)\n",
				disc, (int)keylen, key);
			return -1;
		}
		if (eq) {
			value = eq + 1;
		} else {
			NEXT_ARG();
			value = *argv;
		}
		if (d.text) {
			snprintf(val, sizeof(val), "%s", value);
		} else if (core_value(&d, value, val, sizeof(val))) {
			fprintf(stderr, "ckcd: option \"%s\": \"%s\" is not a number of %s\n",
				d.name, value, d.unit);
			return -1;
		}
		pos += snprintf(spec + pos, pos < sizeof(spec) ? sizeof(spec) - pos : 0, " %s=%s",
				d.name, val);
		argc--;
		argv++;
	}
	if (raw) {
		if (strcmp(spec, disc)) {
			fprintf(stderr, "ckcd: \"spec\" takes the whole configuration: no other options\n");
			return -1;
		}
		pos = snprintf(spec, sizeof(spec), "%s", raw);
	}
	if (pos >= sizeof(spec)) {
		fprintf(stderr, "ckcd: options longer than %d bytes\n", TCA_CKCD_SPEC_LEN - 1);
		return -1;
	}
	tail = addattr_nest(n, 4096, TCA_OPTIONS);
	addattrstrz(n, 4096, TCA_CKCD_SPEC, spec);
	addattr_nest_end(n, tail);
	return 0;
}

/* Prints the running spec as the options that would set it: `ckcd` and
 * name/value pairs, or `disc NAME ...`, or `spec "..."` for one with bands. */
static int ckcd_print_opt(struct qdisc_util *qu, FILE *f, struct rtattr *opt)
{
	struct rtattr *tb[TCA_CKCD_MAX + 1];
	char spec[TCA_CKCD_SPEC_LEN], *tok, *save = NULL;
	int first = 1;

	if (!opt)
		return 0;
	parse_rtattr_nested(tb, TCA_CKCD_MAX, opt);
	if (!tb[TCA_CKCD_SPEC])
		return -1;
	snprintf(spec, sizeof(spec), "%s", rta_getattr_str(tb[TCA_CKCD_SPEC]));
	print_string(PRINT_JSON, "spec", NULL, spec);
	if (is_json_context())
		return 0;
	if (strchr(spec, '|')) {
		fprintf(f, "spec \"%s\" ", spec);
		return 0;
	}
	for (tok = strtok_r(spec, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');

		if (first) {
			if (strcmp(tok, "ckcd"))
				fprintf(f, "disc %s ", tok);
			first = 0;
		} else if (eq) {
			*eq = 0;
			fprintf(f, "%s %s ", tok, eq + 1);
		}
	}
	return 0;
}

static int ckcd_print_xstats(struct qdisc_util *qu, FILE *f, struct rtattr *xstats)
{
	const struct tc_ckcd_xstats *st;
	unsigned int i;
	char key[40];

	if (!xstats)
		return 0;
	if (RTA_PAYLOAD(xstats) < sizeof(*st))
		return -1;
	st = RTA_DATA(xstats);
	print_string(PRINT_FP, NULL, "  drops:", NULL);
	for (i = 0; i < st->nreasons && i < CKCD_XSTATS_REASONS; i++) {
		snprintf(key, sizeof(key), "drop_%s", aqm_drop_reason_name(i));
		print_u64(PRINT_JSON, key, NULL, st->drops[i]);
		print_string(PRINT_FP, NULL, " %s", aqm_drop_reason_name(i));
		print_u64(PRINT_FP, NULL, " %llu", st->drops[i]);
	}
	print_u64(PRINT_ANY, "enq_pkts", "\n  enq_pkts %llu", st->enq_pkts);
	print_u64(PRINT_ANY, "deq_pkts", " deq_pkts %llu", st->deq_pkts);
	if (st->flags & CKCD_XSTATS_HAS_FLOWS) {
		print_uint(PRINT_ANY, "active_flows", " active_flows %u", st->active_flows);
		print_u64(PRINT_ANY, "fair_share_bps", " fair_share_bps %llu", st->fair_share_bps);
	}
	return 0;
}

struct qdisc_util ckcd_qdisc_util = {
	.id = "ckcd",
	.parse_qopt = ckcd_parse_opt,
	.print_qopt = ckcd_print_opt,
	.print_xstats = ckcd_print_xstats,
};
