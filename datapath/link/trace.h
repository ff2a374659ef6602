/* trace.h - a link direction whose service follows a delivery-opportunity
 * trace, in Mahimahi's format (Netravali et al., "Mahimahi: Accurate
 * Record-and-Replay for HTTP", USENIX ATC 2015): one line per opportunity,
 * its time in milliseconds from the start of the trace, non-decreasing;
 * several lines with one time are several opportunities then. Each
 * opportunity may deliver TRACE_OPP_BYTES bytes; an opportunity nobody
 * uses is lost (a cellular link does not save capacity for later). The
 * trace loops: its last time is its period.
 *
 * The serializer asks two things: when the next byte could leave at or
 * after a time (trace_next, which changes nothing), and when a frame of
 * some bytes that starts then has left (trace_take, which uses the
 * opportunities up). A frame longer than what is left of an opportunity
 * goes on in the next one, as in Mahimahi, and the bytes an opportunity
 * has left after a frame are the next frame's if it starts by then. */
#ifndef CKCD_LINK_TRACE_H
#define CKCD_LINK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_OPP_BYTES 1504u        /* Mahimahi's delivery opportunity: one MTU frame */
#define TRACE_TUN_BYTES 4u           /* what Mahimahi counts beyond the IP packet: its tun header */
#define TRACE_MAX_OPPS (1u << 22)    /* 4 Mi opportunities (16 MiB) per trace */
#define TRACE_MAX_PERIOD_MS 86400000u /* a day */

struct trace {
	uint32_t *ms;       /* the opportunities' times in one period */
	uint32_t n;
	uint64_t period_ns; /* the last time: the trace starts again after it */
	uint64_t t0_ns;     /* when the first period began (trace_start) */
	/* The opportunity last used, numbered from the start (period k's i-th
	 * is k * n + i), and the bytes it has left; none before the first. */
	uint64_t cur;
	uint32_t cur_left;
	int have_cur;
};

/* Reads a trace file (at most TRACE_MAX_OPPS lines). 0, or -1 with err
 * naming the line that is not a time. */
int trace_load(struct trace *t, const char *path, char *err, size_t errlen);
/* The same from text in memory (the unit tests'). */
int trace_parse(struct trace *t, const char *text, size_t len, char *err, size_t errlen);
void trace_free(struct trace *t);

/* Time 0 of the trace is t0 (the daemon's start). */
void trace_start(struct trace *t, uint64_t t0);
/* The earliest time >= at when a byte may leave. */
uint64_t trace_next(const struct trace *t, uint64_t at);
/* A frame of bytes starting at start (a trace_next() time): when its last
 * byte leaves. */
uint64_t trace_take(struct trace *t, uint64_t start, uint32_t bytes);
/* The trace's average rate, bit/s: what a discipline that follows the link
 * rate is given. */
uint64_t trace_rate_bps(const struct trace *t);

#endif
