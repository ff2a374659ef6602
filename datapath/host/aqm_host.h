/* aqm_host.h - the one userspace host of the AQM core: the struct aqm_env that
 * ckcd-link, ckcd-replay and aqm-bench hand to aqm_create().
 *
 * The core takes its clock, random numbers and memory from its host (aqm.h).
 * Every userspace host gets them here, so one --seed draws the same random
 * numbers in the replay tool and in one direction of the link daemon, and a
 * discipline behaves the same in both for the same arrivals. The kernel qdisc
 * will be the other host (kernel clock, get_random_u32, kmalloc).
 */
#ifndef CKCD_AQM_HOST_H
#define CKCD_AQM_HOST_H

#include <stdint.h>

#include "../core/aqm.h"

/* xorshift128+ (Vigna 2014, shift triple 23/17/26); the state is seeded by
 * splitmix64, so any seed, 0 included, gives a non-zero state. */
struct aqm_rng {
	uint64_t s[2];
};

void aqm_rng_seed(struct aqm_rng *r, uint64_t seed);
uint32_t aqm_rng_u32(struct aqm_rng *r); /* the high 32 bits: all uniform */

/* splitmix64 step: a well-mixed 64-bit value per call, for deriving seeds. */
uint64_t aqm_splitmix64(uint64_t *state);

/* Called with every packet the core drops, and the reason. */
typedef void (*aqm_host_drop_fn)(void *owner, struct aqm_pkt *pkt, enum aqm_drop_reason why);

struct aqm_host {
	struct aqm_rng rng;
	aqm_host_drop_fn drop;
	/* Optional: told of every packet the core marks CE instead of dropping
	 * (aqm_env.mark), with the reason; set after aqm_host_init, before
	 * aqm_host_env. NULL: not told. */
	aqm_host_drop_fn mark;
	void *owner; /* handed to drop and mark */
};

/* The host's random numbers start from seed; drop(owner, ...) receives the drops. */
void aqm_host_init(struct aqm_host *h, uint64_t seed, aqm_host_drop_fn drop, void *owner);

/* The env to create queues with: calloc/free memory, the host's random
 * numbers and drop callback, and the rate the caller drains the queue at
 * (a spec's missing rate_bps; 0 for the parameter table's default). The env
 * points at h: h must outlive every queue made with it. */
struct aqm_env aqm_host_env(struct aqm_host *h, uint64_t rate_bps);

#endif
