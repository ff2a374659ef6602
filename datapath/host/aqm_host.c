/* aqm_host.c - see aqm_host.h. */
#include "aqm_host.h"

#include <stdlib.h>

uint64_t aqm_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void aqm_rng_seed(struct aqm_rng *r, uint64_t seed)
{
	r->s[0] = aqm_splitmix64(&seed);
	r->s[1] = aqm_splitmix64(&seed);
	if (!(r->s[0] | r->s[1])) /* the one state xorshift never leaves */
		r->s[1] = 1;
}

uint32_t aqm_rng_u32(struct aqm_rng *r)
{
	uint64_t x = r->s[0], y = r->s[1];

	r->s[0] = y;
	x ^= x << 23;
	r->s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
	return (uint32_t)((r->s[1] + y) >> 32);
}

static uint32_t host_random(void *ctx)
{
	struct aqm_host *h = ctx;

	return aqm_rng_u32(&h->rng);
}

static void *host_alloc(void *ctx, size_t bytes)
{
	(void)ctx;
	return calloc(1, bytes);
}

static void host_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void host_drop(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct aqm_host *h = ctx;

	h->drop(h->owner, pkt, why);
}

static void host_mark(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct aqm_host *h = ctx;

	h->mark(h->owner, pkt, why);
}

void aqm_host_init(struct aqm_host *h, uint64_t seed, aqm_host_drop_fn drop, void *owner)
{
	aqm_rng_seed(&h->rng, seed);
	h->drop = drop;
	h->mark = 0;
	h->owner = owner;
}

struct aqm_env aqm_host_env(struct aqm_host *h, uint64_t rate_bps)
{
	struct aqm_env env = {
		.ctx = h,
		.random_u32 = host_random,
		.alloc = host_alloc,
		.free = host_free,
		.drop = host_drop,
		.rate_bps = rate_bps,
		.mark = h->mark ? host_mark : 0,
	};
	return env;
}
