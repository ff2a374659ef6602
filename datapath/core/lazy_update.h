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
 * A run of updates stops early once the discipline says that no later one
 * can change anything (an idle queue whose probability is back at 0), and
 * after AQM_LAZY_MAX updates at once (a link stalled with packets queued);
 * the periods skipped either way are still counted in `runs`.
 */
#ifndef CKCD_LAZY_UPDATE_H
#define CKCD_LAZY_UPDATE_H

#include "aqm_impl.h"

#define AQM_LAZY_MAX 8192 /* updates run at once: two minutes of 15 ms periods */

struct aqm_lazy {
	uint64_t period_ns;
	uint64_t next_ns; /* end of the period now running */
	uint64_t runs;    /* periods ended since the first event */
	uint8_t started;
};

/* Every period ended by now_ns: update(ctx, end of that period) for each, in
 * order. update returns 0 when the periods after this one would change
 * nothing; they are then only counted. Out of line from the hot path:
 * aqm_lazy_tick() tests whether anything is due. */
static inline __attribute__((always_inline)) void
aqm_lazy_catch_up(struct aqm_lazy *l, uint64_t now_ns, void *ctx, int (*update)(void *ctx, uint64_t end_ns))
{
	unsigned n;

	if (!l->started) {
		l->started = 1;
		l->next_ns = now_ns + l->period_ns;
		return;
	}
	for (n = 0; n < AQM_LAZY_MAX && l->next_ns <= now_ns; n++) {
		int more = update(ctx, l->next_ns);

		l->next_ns += l->period_ns;
		l->runs++;
		if (!more)
			break;
	}
	if (l->next_ns <= now_ns) { /* what is left changes nothing (or is cut) */
		uint64_t left = (now_ns - l->next_ns) / l->period_ns + 1;

		l->next_ns += left * l->period_ns;
		l->runs += left;
	}
}

/* Whether an update is due (or the clock not started): the per-packet test. */
static inline int aqm_lazy_due(const struct aqm_lazy *l, uint64_t now_ns)
{
	return now_ns >= l->next_ns;
}

#endif
