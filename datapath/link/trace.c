/* trace.c - a direction's service from a delivery-opportunity trace
 * (trace.h). */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS 1000000ull

static int parse_line(const char *s, size_t len, uint32_t *ms)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i == len)
		return 1; /* blank */
	if (s[i] < '0' || s[i] > '9')
		return -1;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > TRACE_MAX_PERIOD_MS)
			return -1;
	}
	while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r'))
		i++;
	if (i != len)
		return -1;
	*ms = (uint32_t)v;
	return 0;
}

int trace_parse(struct trace *t, const char *text, size_t len, char *err, size_t errlen)
{
	size_t cap = 1024, pos = 0, line = 0;

	memset(t, 0, sizeof(*t));
	t->ms = malloc(cap * sizeof(*t->ms));
	if (!t->ms) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		uint32_t ms;
		int r = parse_line(text + pos, end - pos, &ms);

		line++;
		pos = end + 1;
		if (r > 0)
			continue;
		if (r < 0 || (t->n && ms < t->ms[t->n - 1])) {
			snprintf(err, errlen, "line %zu: %s", line, r < 0 ?
				 "not a time in ms (0..86400000)" : "earlier than the line before");
			goto fail;
		}
		if (t->n == TRACE_MAX_OPPS) {
			snprintf(err, errlen, "more than %u opportunities", TRACE_MAX_OPPS);
			goto fail;
		}
		if (t->n == cap) {
			uint32_t *more = realloc(t->ms, 2 * cap * sizeof(*t->ms));
			if (!more) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			t->ms = more;
			cap *= 2;
		}
		t->ms[t->n++] = ms;
	}
	if (t->n == 0 || t->ms[t->n - 1] == 0) {
		snprintf(err, errlen, "no opportunity after time 0: the trace's last time is its period");
		goto fail;
	}
	t->period_ns = (uint64_t)t->ms[t->n - 1] * NS_PER_MS;
	return 0;
fail:
	trace_free(t);
	return -1;
}

int trace_load(struct trace *t, const char *path, char *err, size_t errlen)
{
	/* 10 bytes a line on average for 4 Mi lines: 8 digits and a newline
	 * leave room for a CR or a blank */
	const size_t max_bytes = (size_t)TRACE_MAX_OPPS * 10;
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t len = 0, cap = 0;
	int r;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	for (;;) {
		size_t got;

		if (len == cap) {
			char *more;

			if (cap >= max_bytes) {
				snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
				free(text);
				fclose(f);
				return -1;
			}
			cap = cap ? 2 * cap : 65536;
			if (cap > max_bytes)
				cap = max_bytes;
			more = realloc(text, cap);
			if (!more) {
				snprintf(err, errlen, "out of memory");
				free(text);
				fclose(f);
				return -1;
			}
			text = more;
		}
		got = fread(text + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) { /* a directory, an I/O error: not a short trace */
		snprintf(err, errlen, "%s: cannot be read", path);
		free(text);
		fclose(f);
		return -1;
	}
	fclose(f);
	r = trace_parse(t, text, len, err, errlen);
	free(text);
	if (r < 0) {
		char inner[256];

		snprintf(inner, sizeof(inner), "%s", err);
		snprintf(err, errlen, "%s: %s", path, inner);
	}
	return r;
}

void trace_free(struct trace *t)
{
	free(t->ms);
	t->ms = NULL;
	t->n = 0;
}

void trace_start(struct trace *t, uint64_t t0)
{
	t->t0_ns = t0;
	t->cur = 0;
	t->cur_left = 0;
	t->have_cur = 0;
}

/* Opportunity j's time: period j / n, the (j % n)-th of it. Several may
 * share a time (the period's last and the next one's first at 0, too). */
static uint64_t opp_time(const struct trace *t, uint64_t j)
{
	return t->t0_ns + (j / t->n) * t->period_ns + (uint64_t)t->ms[j % t->n] * NS_PER_MS;
}

/* The first opportunity at or after `at`. */
static uint64_t first_at_or_after(const struct trace *t, uint64_t at)
{
	uint64_t rel = at > t->t0_ns ? at - t->t0_ns : 0, k = rel / t->period_ns;
	uint64_t off = rel - k * t->period_ns;
	uint32_t lo = 0, hi = t->n - 1; /* ms[n - 1] is the period, >= off: the answer is <= n - 1 */

	if (off == 0 && k > 0) { /* the last of period k - 1 is at this instant too */
		k--;
		off = t->period_ns;
	}

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((uint64_t)t->ms[mid] * NS_PER_MS < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return k * t->n + lo;
}

/* The opportunity a frame starting at or after `at` begins in: the one in
 * use if it has bytes left and is not past, else the first unused one at
 * or after `at` (one used up stays used, though others share its time). */
static uint64_t next_opp(const struct trace *t, uint64_t at)
{
	uint64_t j;

	if (t->have_cur && t->cur_left && opp_time(t, t->cur) >= at)
		return t->cur;
	j = first_at_or_after(t, at);
	if (t->have_cur && j <= t->cur)
		j = t->cur + 1;
	return j;
}

uint64_t trace_next(const struct trace *t, uint64_t at)
{
	return opp_time(t, next_opp(t, at));
}

uint64_t trace_take(struct trace *t, uint64_t start, uint32_t bytes)
{
	uint64_t j = next_opp(t, start);
	uint32_t left = t->have_cur && j == t->cur ? t->cur_left : TRACE_OPP_BYTES;

	while (bytes > left) {
		bytes -= left;
		j++;
		left = TRACE_OPP_BYTES;
	}
	t->cur = j;
	t->cur_left = left - bytes;
	t->have_cur = 1;
	return opp_time(t, j);
}

uint64_t trace_rate_bps(const struct trace *t)
{
	/* n opportunities per period, as Mahimahi loops the trace */
	return (uint64_t)((double)t->n * TRACE_OPP_BYTES * 8 * 1e9 / (double)t->period_ns);
}
