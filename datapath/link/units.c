/* units.c - rate/delay parsing and limits for ckcd-link. */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int check_rate(uint64_t bps, char *err, size_t errlen)
{
	if (bps < LINK_RATE_MIN_BPS || bps > LINK_RATE_MAX_BPS) {
		snprintf(err, errlen, "%llu bit/s is out of range (1kbit..100gbit)",
			 (unsigned long long)bps);
		return -1;
	}
	return 0;
}

int check_delay(uint64_t ns, char *err, size_t errlen)
{
	if (ns > LINK_DELAY_MAX_NS) {
		snprintf(err, errlen, "%.3f ms is out of range (0..10 s)", ns / 1e6);
		return -1;
	}
	return 0;
}

/* Leading decimal number (no hex, no inf/nan), rest in *unit. */
static int parse_number(const char *s, double *v, const char **unit)
{
	char *end;

	if (!(*s >= '0' && *s <= '9') && *s != '.')
		return -1;
	errno = 0;
	*v = strtod(s, &end);
	if (end == s || errno || !isfinite(*v) || *v < 0)
		return -1;
	for (const char *q = s; q < end; q++)
		if (!strchr("0123456789.eE+-", *q))
			return -1;
	*unit = end;
	return 0;
}

int parse_rate(const char *s, uint64_t *bps, char *err, size_t errlen)
{
	const char *u;
	double v, mult = 1;

	if (parse_number(s, &v, &u) < 0) {
		snprintf(err, errlen, "'%s' is not a rate (e.g. 50mbit)", s);
		return -1;
	}
	switch (*u) {
	case 'k': case 'K': mult = 1e3; u++; break;
	case 'm': case 'M': mult = 1e6; u++; break;
	case 'g': case 'G': mult = 1e9; u++; break;
	case 't': case 'T': mult = 1e12; u++; break;
	default: break;
	}
	if (*u && strcmp(u, "bit") != 0 && strcmp(u, "bps") != 0 && strcmp(u, "b") != 0) {
		snprintf(err, errlen, "'%s': unknown rate unit '%s' (use bit, kbit, mbit, gbit)", s, u);
		return -1;
	}
	v *= mult;
	if (v > 1e15) {
		snprintf(err, errlen, "'%s' is out of range (1kbit..100gbit)", s);
		return -1;
	}
	*bps = (uint64_t)llround(v);
	return check_rate(*bps, err, errlen);
}

int parse_delay(const char *s, uint64_t *ns, char *err, size_t errlen)
{
	const char *u;
	double v, mult;

	if (parse_number(s, &v, &u) < 0) {
		snprintf(err, errlen, "'%s' is not a delay (e.g. 10ms)", s);
		return -1;
	}
	if (*u == '\0' || strcmp(u, "ms") == 0)
		mult = 1e6;
	else if (strcmp(u, "us") == 0)
		mult = 1e3;
	else if (strcmp(u, "ns") == 0)
		mult = 1;
	else if (strcmp(u, "s") == 0)
		mult = 1e9;
	else {
		snprintf(err, errlen, "'%s': unknown delay unit '%s' (use s, ms, us, ns)", s, u);
		return -1;
	}
	v *= mult;
	if (v > 1e12) {
		snprintf(err, errlen, "'%s' is out of range (0..10 s)", s);
		return -1;
	}
	*ns = (uint64_t)llround(v);
	return check_delay(*ns, err, errlen);
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	char *end;
	unsigned long long v;

	if (!(*s >= '0' && *s <= '9')) {
		snprintf(err, errlen, "'%s' is not a number", s);
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end) {
		snprintf(err, errlen, "'%s' is not a number", s);
		return -1;
	}
	if (v < min || v > max) {
		snprintf(err, errlen, "%llu is out of range (%llu..%llu)", v,
			 (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}
