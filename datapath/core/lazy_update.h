/* lazy_update.h - a periodic update without a timer (pie, dualpi2).
 *
 * The core has no timers: its hosts call it on enqueue and dequeue with their
 * clock. A discipline whose state a timer would update every `period` (PIE's
 * and PI2's tupdate) runs those updates lazily instead: first thing at every
 * enqueue and dequeue, once for each period that has ended since the last
 * call, in order. Nothing changes a queue between two of its calls, so each
 * update sees the queue as it stood at the end of its period: the result is
 * the one a timer would have given, idle periods included.
 *
 * The first event starts the clock (the first update is one period after it).
 * The discipline's update is told how many periods are due and may account
 * for several at once: all the rest when no later one can change anything,
 * or the whole idle stretch of an empty queue in closed form, which is how
 * a long idle costs one call. What must run period by period (a link stalled
 * with packets queued, whose head delay grows each period) runs at most
 * AQM_LAZY_MAX calls at once; the periods beyond are skipped, though still
 * counted in `runs`.
 */
#ifndef CKCD_LAZY_UPDATE_H
#define CKCD_LAZY_UPDATE_H

#include "aqm_impl.h"

/* Update calls at once: the bound on an enqueue's or dequeue's extra work in
 * the kernel, where it runs under the qdisc's root lock with bottom halves
 * off. A call costs about 65 instructions (dualpi2) or 105 (pie, which
 * compares its state before and after): 64 of them, a second of 16 ms
 * periods, took 4,200 and 6,800 (callgrind). */
#define AQM_LAZY_MAX 64

struct aqm_lazy {
	uint64_t period_ns;
	uint64_t next_ns; /* end of the period now running */
	uint64_t runs;    /* periods ended since the first event */
	uint8_t started;
};

/* Every period ended by now_ns, in order: update(ctx, end of the first
 * period not yet run, periods due from it) runs that period and returns how
 * many it accounted for, 1 up to all that are due. Out of line from the hot
 * path: aqm_lazy_due() tests whether anything is due. */
static inline __attribute__((always_inline)) void
aqm_lazy_catch_up(struct aqm_lazy *l, uint64_t now_ns, void *ctx,
		  uint64_t (*update)(void *ctx, uint64_t end_ns, uint64_t due))
{
	uint64_t due;
	unsigned n;

	if (!l->started) {
		l->started = 1;
		l->next_ns = now_ns + l->period_ns;
		return;
	}
	if (l->next_ns > now_ns)
		return;
	due = (now_ns - l->next_ns) / l->period_ns + 1;
	for (n = 0; n < AQM_LAZY_MAX && due; n++) {
		uint64_t ran = update(ctx, l->next_ns, due);

		l->next_ns += ran * l->period_ns;
		l->runs += ran;
		due -= ran;
	}
	l->next_ns += due * l->period_ns; /* skipped: a stall past the cap */
	l->runs += due;
}

/* Whether an update is due (or the clock not started): the per-packet test. */
static inline int aqm_lazy_due(const struct aqm_lazy *l, uint64_t now_ns)
{
	return now_ns >= l->next_ns;
}

#endif
