/* q_ckcd.c - tc's option parser and printer for qdisc kind "ckcd" (sch_ckcd.ko).
 *
 * tc loads it as $TC_LIB_DIR/q_ckcd.so and looks up ckcd_qdisc_util. The
 * options are the parameters of the core's own table (aqm_param_desc(), linked
 * in with the core), so names, units and the list in `help` cannot drift from
 * what the kernel accepts. Ranges are not checked here: the kernel checks them
 * with the same core parser and answers with an extack message naming the
 * option, so there is one authority. The plugin refuses only what it cannot
 * represent exactly in the core's spelling (a number beyond 64 bits, more
 * decimal places than the parameter keeps, a value with a space or a '|',
 * options longer than TCA_CKCD_SPEC_LEN), and names it doesn't know.
 *
 *   tc qdisc add dev X root ckcd limit 80 delta 100ms d 5ms rate 100mbit rtt 20ms
 *   tc qdisc add dev X root ckcd limit=80 d_ms=5          (the core's own spelling)
 *   tc qdisc add dev X root ckcd disc red limit 200       (another core discipline)
 *   tc qdisc add dev X root ckcd spec "bands map=46:0 | ckcd | droptail"
 *
 * What goes to the kernel (ckcd_nl.h): `spec` alone as TCA_CKCD_SPEC;
 * otherwise TCA_CKCD_DISC when `disc` was given and TCA_CKCD_PARAMS
 * ("name=value ...", the core's names and units) when an option was, so a
 * change keeps what it is not told; no option at all, an empty TCA_OPTIONS
 * (init takes the defaults, change is refused by the kernel).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

#include "utils.h"
#include "tc_util.h"
#include "tc_common.h" /* TCA_BUF_MAX: the size of tc's request buffer */

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

static int find_param_in(const char *disc, const char *key, size_t keylen, struct aqm_param_desc *out)
{
	unsigned int i;

	for (i = 0; aqm_param_desc(disc, i, out); i++) {
		size_t n = strlen(out->name), sfx = strlen(name_suffix(out->name));

		if ((n == keylen || n - sfx == keylen) && !strncmp(out->name, key, keylen))
			return 1;
	}
	return 0;
}

/* Which tc unit suffixes a parameter takes: 1 time (s/ms/us), 2 rate, 0 none. */
static int unit_class(const struct aqm_param_desc *d)
{
	return !strcmp(d->unit, "ms") ? 1 : !strcmp(d->unit, "bit/s") ? 2 : 0;
}

/* The parameter `key` names: in `disc`'s table when `disc NAME` was given.
 * Without it the discipline is ckcd at add but the running one at change,
 * which the plugin cannot know, so ckcd's table is searched first and then
 * every other discipline's (`change ... ckcd max_p 0.1` reaches a running
 * red; the kernel refuses a name the discipline it configures lacks). A key
 * that two tables would convert differently (another name, unit class,
 * decimals or kind) is refused rather than guessed. 0 unknown, 1 found (*where: its table), -1 ambiguous
 * (*where and *other: two tables that differ). */
static int find_param(const char *disc, int disc_given, const char *key, size_t keylen,
		      struct aqm_param_desc *out, const char **where, const char **other)
{
	const char *const *names = aqm_discipline_names();
	struct aqm_param_desc d;
	int found;
	unsigned int i;

	found = find_param_in(disc, key, keylen, out);
	*where = disc;
	if (disc_given)
		return found;
	for (i = 0; names[i]; i++) {
		if (!strcmp(names[i], disc) || !find_param_in(names[i], key, keylen, &d))
			continue;
		if (!found) {
			*out = d;
			*where = names[i];
			found = 1;
		} else if (strcmp(d.name, out->name) || unit_class(&d) != unit_class(out) ||
			   d.decimals != out->decimals || d.text != out->text) {
			*other = names[i];
			return -1;
		}
	}
	return found;
}

enum { CV_OK, CV_NAN, CV_LARGE, CV_DECIMALS };

/* Digits of a number's text the conversion keeps (integer part, fraction).
 * More integer digits are beyond 64 bits whatever the unit (a unit divides
 * by 1000 at most); more significant fraction digits keep over 25 after any
 * unit (one multiplies by 8 x 10^9 at most, which ends at most 12 of them),
 * more than a 64-bit stored value can hold (decimals <= 18). */
#define CV_INT_DIGITS 40
#define CV_FRAC_DIGITS 40

/* A value for the core, exact or refused: the decimal text `v` with a tc unit
 * suffix converted to the parameter's own unit ("100us" for a _ms parameter
 * -> "0.1"). The conversion multiplies by 1 or 8 and shifts the decimal point,
 * done on the digits themselves, so nothing rounds and nothing wraps: a
 * result whose integer part exceeds 2^64 - 1 is CV_LARGE, one with more
 * decimal places than d->decimals (which the core would refuse too: it
 * stores value x 10^decimals) is CV_DECIMALS. A leading '-' is passed on
 * (bands' penalized takes -1); the range is the kernel's to check. */
static int core_value(const struct aqm_param_desc *d, const char *v, char *out, size_t outlen)
{
	static const struct unit { const char *sfx; unsigned int mul; int shift; } time_units[] = {
		{ "us", 1, -3 }, { "usec", 1, -3 }, { "ms", 1, 0 }, { "msec", 1, 0 },
		{ "s", 1, 3 }, { "sec", 1, 3 },
	}, rate_units[] = {
		{ "bit", 1, 0 }, { "kbit", 1, 3 }, { "mbit", 1, 6 }, { "gbit", 1, 9 },
		{ "bps", 8, 0 }, { "kbps", 8, 3 }, { "mbps", 8, 6 }, { "gbps", 8, 9 },
	};
	static const char u64_max[] = "18446744073709551615";
	/* one leading digit for the carry of the multiplication */
	unsigned char dig[1 + CV_INT_DIGITS + CV_FRAC_DIGITS];
	char ibuf[1 + CV_INT_DIGITS + CV_FRAC_DIGITS + 10], fbuf[1 + CV_FRAC_DIGITS + 10];
	const char *p = v, *ip, *ie, *fp = NULL, *fe = NULL;
	unsigned int mul = 1, carry = 0, i;
	int neg = 0, shift = 0, n, point, k, ni = 0, nf = 0, len;

	if (*p == '-') {
		neg = 1;
		p++;
	}
	for (ip = p; isdigit((unsigned char)*p); p++)
		;
	ie = p;
	if (ip == ie)
		return CV_NAN;
	if (*p == '.') {
		for (fp = ++p; isdigit((unsigned char)*p); p++)
			;
		fe = p;
	}
	if (*p) {
		int time = unit_class(d) == 1, rate = unit_class(d) == 2, found = 0;

		for (i = 0; time && i < ARRAY_SIZE(time_units); i++)
			if (!strcasecmp(p, time_units[i].sfx)) {
				mul = time_units[i].mul;
				shift = time_units[i].shift;
				found = 1;
			}
		for (i = 0; rate && i < ARRAY_SIZE(rate_units); i++)
			if (!strcasecmp(p, rate_units[i].sfx)) {
				mul = rate_units[i].mul;
				shift = rate_units[i].shift;
				found = 1;
			}
		if (!found)
			return CV_NAN;
	}
	while (ip < ie && *ip == '0')
		ip++;
	while (fp && fe > fp && fe[-1] == '0')
		fe--;
	if (ie - ip > CV_INT_DIGITS)
		return CV_LARGE;
	if (fp && fe - fp > CV_FRAC_DIGITS)
		return CV_DECIMALS;
	n = 0;
	dig[n++] = 0;
	for (; ip < ie; ip++)
		dig[n++] = (unsigned char)(*ip - '0');
	point = n; /* digits before the decimal point */
	for (; fp && fp < fe; fp++)
		dig[n++] = (unsigned char)(*fp - '0');
	for (k = n - 1; k >= 0; k--) { /* x mul, mul <= 8: the carry fits dig[0] */
		unsigned int t = dig[k] * mul + carry;

		dig[k] = (unsigned char)(t % 10);
		carry = t / 10;
	}
	point += shift;
	/* the integer part: digits before the point (zeros past the last digit),
	 * leading zeros off; then the fraction, trailing zeros off */
	for (k = 0; k < point; k++) {
		unsigned char c = k < n ? dig[k] : 0;

		if (c || ni)
			ibuf[ni++] = (char)('0' + c);
	}
	for (k = point; k < n; k++)
		fbuf[nf++] = (char)('0' + (k < 0 ? 0 : dig[k]));
	while (nf && fbuf[nf - 1] == '0')
		nf--;
	if (ni > (int)strlen(u64_max) ||
	    (ni == (int)strlen(u64_max) && memcmp(ibuf, u64_max, ni) > 0))
		return CV_LARGE;
	if (nf > (int)d->decimals)
		return CV_DECIMALS;
	len = snprintf(out, outlen, "%s%.*s%s%.*s", neg && (ni || nf) ? "-" : "",
		       ni ? ni : 1, ni ? ibuf : "0", nf ? "." : "", nf, fbuf);
	return len < 0 || (size_t)len >= outlen ? CV_LARGE : CV_OK;
}

/* Appends " name=value" to the TCA_CKCD_PARAMS text, refusing what would
 * not fit (TCA_CKCD_SPEC_LEN, NUL included) rather than cutting it. */
static int put_param(char *buf, size_t *pos, const char *name, const char *value)
{
	int n = snprintf(buf + *pos, TCA_CKCD_SPEC_LEN - *pos, "%s%s=%s", *pos ? " " : "", name, value);

	if (n < 0 || (size_t)n >= TCA_CKCD_SPEC_LEN - *pos) {
		buf[*pos] = 0;
		fprintf(stderr, "ckcd: option \"%s\": a value of %zu bytes does not fit: the options "
			"take at most %d bytes in all\n", name, strlen(value), TCA_CKCD_SPEC_LEN - 1);
		return -1;
	}
	*pos += n;
	return 0;
}

static int ckcd_parse_opt(struct qdisc_util *qu, int argc, char **argv, struct nlmsghdr *n,
			  const char *dev)
{
	char params[TCA_CKCD_SPEC_LEN], val[96];
	const char *disc = "ckcd", *raw = NULL;
	struct aqm_param_desc d;
	struct rtattr *tail;
	int disc_given = 0, nopts = 0;
	size_t pos = 0;

	params[0] = 0;
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
		disc_given = 1;
		argc -= 2;
		argv += 2;
	}
	while (argc > 0) {
		const char *key = *argv, *eq = strchr(key, '='), *value, *where, *other = NULL;
		size_t keylen = eq ? (size_t)(eq - key) : strlen(key);
		int r;

		if (!strcmp(key, "help")) {
			explain(disc);
			return -1;
		}
		if (!strcmp(key, "spec")) {
			NEXT_ARG();
			if (raw) {
				fprintf(stderr, "ckcd: \"spec\" given twice\n");
				return -1;
			}
			raw = *argv;
			argc--;
			argv++;
			continue;
		}
		r = find_param(disc, disc_given, key, keylen, &d, &where, &other);
		if (r < 0) {
			fprintf(stderr, "ckcd: option \"%.*s\" means different things in %s and %s: "
				"say which with \"disc NAME\"\n", (int)keylen, key, where, other);
			return -1;
		}
		if (!r) {
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
			/* one word in the "name=value ..." text: a space would
			 * start the next option, a '|' the next child spec */
			if (strpbrk(value, " \t\n\r|")) {
				fprintf(stderr, "ckcd: option \"%s\": \"%s\" has a space or '|': "
					"a value is one word\n", d.name, value);
				return -1;
			}
			if (put_param(params, &pos, d.name, value))
				return -1;
		} else {
			switch (core_value(&d, value, val, sizeof(val))) {
			case CV_OK:
				break;
			case CV_LARGE:
				fprintf(stderr, "ckcd: option \"%s\": \"%s\" is too large\n", d.name, value);
				return -1;
			case CV_DECIMALS:
				fprintf(stderr, "ckcd: option \"%s\": \"%s\" has more decimal places than "
					"%s keeps (%u, in %s)\n", d.name, value, d.name, d.decimals, d.unit);
				return -1;
			default:
				fprintf(stderr, "ckcd: option \"%s\": \"%s\" is not a number of %s\n",
					d.name, value, d.unit);
				return -1;
			}
			if (put_param(params, &pos, d.name, val))
				return -1;
		}
		nopts++;
		argc--;
		argv++;
	}
	if (raw && (nopts || disc_given)) {
		fprintf(stderr, "ckcd: \"spec\" takes the whole configuration: no other options\n");
		return -1;
	}
	if (raw && strlen(raw) >= TCA_CKCD_SPEC_LEN) {
		fprintf(stderr, "ckcd: options longer than %d bytes\n", TCA_CKCD_SPEC_LEN - 1);
		return -1;
	}
	tail = addattr_nest(n, TCA_BUF_MAX, TCA_OPTIONS);
	if (raw && addattrstrz(n, TCA_BUF_MAX, TCA_CKCD_SPEC, raw))
		return -1;
	if (disc_given && addattrstrz(n, TCA_BUF_MAX, TCA_CKCD_DISC, disc))
		return -1;
	if (nopts && addattrstrz(n, TCA_BUF_MAX, TCA_CKCD_PARAMS, params))
		return -1;
	addattr_nest_end(n, tail);
	return 0;
}

/* Prints the running spec as the options that would set it: `ckcd` and
 * name/value pairs, or `disc NAME ...`, or `spec "..."` for one with bands.
 * The spec is as long as the kernel made it (8 bands describe to ~2500
 * bytes): copied whole, never into a fixed buffer. */
static int ckcd_print_opt(struct qdisc_util *qu, FILE *f, struct rtattr *opt)
{
	struct rtattr *tb[TCA_CKCD_MAX + 1];
	char *spec, *tok, *save = NULL;
	int first = 1;

	if (!opt)
		return 0;
	parse_rtattr_nested(tb, TCA_CKCD_MAX, opt);
	if (!tb[TCA_CKCD_SPEC])
		return -1;
	/* strndup: the attribute's own length bounds it, NUL or not */
	spec = strndup(RTA_DATA(tb[TCA_CKCD_SPEC]), RTA_PAYLOAD(tb[TCA_CKCD_SPEC]));
	if (!spec)
		return -1;
	print_string(PRINT_JSON, "spec", NULL, spec);
	if (is_json_context())
		goto out;
	if (strchr(spec, '|')) {
		fprintf(f, "spec \"%s\" ", spec);
		goto out;
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
out:
	free(spec);
	return 0;
}

/* One counter per core reason: "<label> overflow N early N ..." for the eye,
 * "<kind>_<reason>": N in JSON. */
static void print_reasons(const char *kind, const char *label, const __u64 *v, __u32 n)
{
	unsigned int i;
	char key[40];

	print_string(PRINT_FP, NULL, label, NULL);
	for (i = 0; i < n && i < CKCD_XSTATS_REASONS; i++) {
		snprintf(key, sizeof(key), "%s_%s", kind, aqm_drop_reason_name(i));
		print_u64(PRINT_JSON, key, NULL, v[i]);
		print_string(PRINT_FP, NULL, " %s", aqm_drop_reason_name(i));
		print_u64(PRINT_FP, NULL, " %llu", v[i]);
	}
}

static int ckcd_print_xstats(struct qdisc_util *qu, FILE *f, struct rtattr *xstats)
{
	const struct tc_ckcd_xstats *st;

	if (!xstats)
		return 0;
	if (RTA_PAYLOAD(xstats) < CKCD_XSTATS_V1_LEN)
		return -1;
	st = RTA_DATA(xstats);
	print_reasons("drop", "  drops:", st->drops, st->nreasons);
	if (RTA_PAYLOAD(xstats) >= sizeof(*st)) /* version 2 on: ECN marks */
		print_reasons("mark", "\n  marks:", st->marks, st->nreasons);
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
