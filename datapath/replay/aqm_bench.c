/* aqm-bench - per-packet cost of a discipline: enqueue + dequeue loops on an
 * in-memory queue held near a target length, timed with clock_gettime, no
 * I/O in the timed loop. Driven by bench/bench_aqm_replay.py.
 *
 *   aqm-bench --qdisc "ckcd limit=80" --flows 100 --load 1.1 --packets 2000000
 *
 * The loop is the replay link without I/O: arrivals every 1500-byte packet
 * time / --load on a simulated clock, the link (--rate-bps) takes the next
 * packet whenever it is free. At the default load 1.1 the buffer is the
 * bottleneck, so every discipline runs its full decision path (and DropTail
 * sits at its limit). Prints one JSON object: ns per packet (arrival, its
 * enqueue and its share of dequeues, drops included), the mean queue length
 * and the drop counts, so a result can be checked for sanity.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/aqm.h"
#include "../host/aqm_host.h"

static struct aqm_pkt **freelist;
static size_t nfree;

static void on_drop(void *owner, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	(void)owner;
	(void)why;
	freelist[nfree++] = pkt;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	const char *spec = "droptail limit=80";
	unsigned long flows = 2, packets = 2000000, rate_bps = 100000000;
	double load = 1.1;
	uint64_t t_free = 0, pkt_ns, qsum = 0;
	struct aqm_host host;
	struct aqm_rng flow_rng;
	struct aqm_env env;
	struct aqm_queue *q;
	struct aqm_pkt *pool;
	char err[256];
	size_t npool, i;
	uint64_t now = 1000000, gap_ns, t0, t1;
	const struct aqm_stats *st;
	uint32_t *flow_of;

	for (int a = 1; a + 1 < argc; a += 2) {
		if (!strcmp(argv[a], "--qdisc"))
			spec = argv[a + 1];
		else if (!strcmp(argv[a], "--flows"))
			flows = strtoul(argv[a + 1], 0, 10);
		else if (!strcmp(argv[a], "--packets"))
			packets = strtoul(argv[a + 1], 0, 10);
		else if (!strcmp(argv[a], "--load"))
			load = strtod(argv[a + 1], 0);
		else if (!strcmp(argv[a], "--rate-bps"))
			rate_bps = strtoul(argv[a + 1], 0, 10);
		else {
			fprintf(stderr, "aqm-bench: unknown option %s\n", argv[a]);
			return 2;
		}
	}
	if (!flows || !packets || !rate_bps || load <= 0) {
		fprintf(stderr, "aqm-bench: --flows, --packets, --rate-bps must be > 0\n");
		return 2;
	}
	aqm_host_init(&host, 1, on_drop, NULL);
	env = aqm_host_env(&host, rate_bps); /* as ckcd-link does: a spec without rate_bps follows the link */
	q = aqm_create(spec, &env, err, sizeof(err));
	if (!q) {
		fprintf(stderr, "aqm-bench: %s\n", err);
		return 2;
	}
	npool = 1u << 16; /* more than any queue limit we bench */
	pool = calloc(npool, sizeof(*pool));
	freelist = calloc(npool, sizeof(*freelist));
	flow_of = malloc(65536 * sizeof(*flow_of));
	if (!pool || !freelist || !flow_of) {
		fprintf(stderr, "aqm-bench: out of memory\n");
		return 1;
	}
	for (i = 0; i < npool; i++)
		freelist[nfree++] = &pool[i];
	/* flow of each arrival drawn up front: keep the RNG out of the loop */
	aqm_rng_seed(&flow_rng, 2);
	for (i = 0; i < 65536; i++)
		flow_of[i] = 1 + aqm_rng_u32(&flow_rng) % flows;
	/* simulated clock: arrivals at load x the link rate, 1500-byte packets */
	pkt_ns = 1500ull * 8 * 1000000000ull / rate_bps;
	gap_ns = (uint64_t)((double)pkt_ns / load);
	t0 = mono_ns();
	for (i = 0; i < packets; i++) {
		struct aqm_pkt *p = freelist[--nfree];

		p->len = 1500;
		p->flow_hash = flow_of[i & 65535];
		now += gap_ns;
		aqm_enqueue(q, p, now);
		while (t_free <= now && aqm_qlen_pkts(q)) {
			uint64_t at = t_free > now - gap_ns ? t_free : now - gap_ns;

			p = aqm_dequeue(q, at);
			if (!p)
				break;
			freelist[nfree++] = p;
			t_free = at + pkt_ns;
		}
		qsum += aqm_qlen_pkts(q);
	}
	t1 = mono_ns();
	st = aqm_get_stats(q);
	printf("{\"spec\":\"%s\",\"flows\":%lu,\"load\":%.3f,\"packets\":%lu,\"ns_per_pkt\":%.2f,"
	       "\"mean_qlen\":%.1f,\"deq_pkts\":%" PRIu64 ",\"drops\":{",
	       spec, flows, load, packets, (double)(t1 - t0) / (double)packets,
	       (double)qsum / (double)packets, st->deq_pkts);
	for (int r = 0; r < AQM_DROP_REASONS; r++)
		printf("%s\"%s\":%" PRIu64, r ? "," : "", aqm_drop_reason_name(r), st->drops[r]);
	printf("}}\n");
	aqm_destroy(q);
	free(pool);
	free(freelist);
	free(flow_of);
	return 0;
}
