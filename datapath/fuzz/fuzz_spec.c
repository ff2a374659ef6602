/* fuzz_spec.c - libFuzzer target: the core's spec parser and every
 * discipline's init (core/aqm_params.c, aqm_create), with the property the
 * docs promise: a spec that is accepted describes itself as a spec that parses
 * back to the same description. A few packets go through the queue, a
 * reconfiguration to that description, a flush and a few more packets, so
 * init's state is used, not only made, and restarted.
 * Built with clang -fsanitize=fuzzer,address,undefined (fuzz.mk). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/aqm.h"
#include "../host/aqm_host.h"

static void drop_nothing(void *owner, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	(void)owner;
	(void)pkt;
	(void)why;
}

static void exercise(struct aqm_queue **q)
{
	static struct aqm_pkt pkts[16];
	uint64_t t = 1000;

	for (unsigned i = 0; i < 16; i++) {
		memset(&pkts[i], 0, sizeof(pkts[i]));
		pkts[i].flow_hash = i % 3;
		pkts[i].len = 64 + 100 * i;
		pkts[i].dscp = (uint8_t)(i * 5 % 64);
		pkts[i].ecn = (uint8_t)(i & 3); /* every codepoint: the marking paths too */
		aqm_enqueue(*q, &pkts[i], t += 1000);
	}
	for (unsigned i = 0; i < 8; i++)
		aqm_dequeue(*q, t += 500000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char spec[4096], first[4096], again[4096], err[512];
	struct aqm_host host;
	struct aqm_env env;
	struct aqm_queue *q, *q2;

	if (size >= sizeof(spec))
		return 0;
	memcpy(spec, data, size);
	spec[size] = '\0';
	aqm_host_init(&host, 1, drop_nothing, NULL);
	env = aqm_host_env(&host, size % 2 ? 50000000 : 0);
	q = aqm_create(spec, &env, err, sizeof(err));
	if (!q)
		return 0;
	aqm_describe(q, first, sizeof(first));
	q2 = aqm_create(first, &env, err, sizeof(err));
	if (!q2)
		abort(); /* a description must parse */
	aqm_describe(q2, again, sizeof(again));
	if (strcmp(first, again))
		abort(); /* ... back to itself */
	aqm_destroy(q2);
	exercise(&q);
	if (aqm_reconfigure(&q, first, err, sizeof(err)))
		abort();
	aqm_xstats(q, again, sizeof(again));
	aqm_flush(q); /* a kernel reset: every packet dropped, the state afresh ... */
	exercise(&q); /* ... and the queue runs on from there */
	aqm_destroy(q); /* queued packets go to drop_nothing as flush */
	return 0;
}
