/* loss.h - random loss on a link direction, apart from the queue's drops:
 * a frame that has taken its time on the link is lost on the way (a radio
 * link's corruption), so the capacity it used is gone too.
 *
 * Two models, as ns-3's error models and netem name them:
 *   bernoulli p=P                   each frame lost with probability P
 *   gilbert p=P r=R [bad=B] [good=G] Gilbert-Elliott: a two-state chain
 *       stepped once per frame, good -> bad with probability P, bad -> good
 *       with R; a frame is lost with probability B in the bad state
 *       (default 1) and G in the good one (default 0). The long-run loss
 *       rate is (P * B + R * G) / (P + R), in bursts of 1 / R frames on
 *       average (B = 1). netem's gemodel with p, r, 1-h = B, 1-k = G.
 * Probabilities are 0, or 1e-9..1, kept as 32-bit fractions. Each direction draws
 * from a stream of its own (seeded from --seed), so turning loss on leaves
 * the disciplines' draws as they were. */
#ifndef CKCD_LINK_LOSS_H
#define CKCD_LINK_LOSS_H

#include <stddef.h>
#include <stdint.h>

#include "../host/aqm_host.h"

#define LOSS_SPEC_MAX 128

enum loss_kind { LOSS_NONE = 0, LOSS_BERNOULLI, LOSS_GILBERT };

struct loss {
	enum loss_kind kind;
	uint64_t p, r, bad, good; /* probabilities as fractions of 2^32 (2^32: certain) */
	int in_bad;
	struct aqm_rng rng;
	char spec[LOSS_SPEC_MAX]; /* as given, for show */
};

/* Parses a spec ("" or "none": no loss). 0, or -1 with err naming the
 * key. Leaves *l as it was on error. */
int loss_parse(const char *spec, struct loss *l, char *err, size_t errlen);
void loss_seed(struct loss *l, uint64_t seed);
/* Whether the next frame is lost; steps the chain. */
int loss_drop(struct loss *l);
/* The long-run loss rate the spec gives, 0..1. */
double loss_rate(const struct loss *l);

#endif
