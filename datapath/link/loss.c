/* loss.c - random loss of a link direction (loss.h). */
#define _GNU_SOURCE
#include "loss.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONE (1ull << 32)

/* "0.01", "1e-3", "0", "1": a probability as a fraction of 2^32. */
static int parse_prob(const char *s, uint64_t *out)
{
	char *end;
	double v;

	v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || v < 0 || v > 1)
		return -1;
	if (v > 0 && v < 1e-9) /* near 2^-32, the fraction's step: it would be no loss, or another rate */
		return -1;
	*out = (uint64_t)llround(v * (double)ONE);
	return 0;
}

/* The key's slot in l and its bit in a "given" mask; NULL when the model
 * does not take it. */
static uint64_t *key_slot(struct loss *l, const char *key, unsigned *bit)
{
	static const char *const keys[] = {"p", "r", "bad", "good"};
	uint64_t *slots[] = {&l->p, &l->r, &l->bad, &l->good};

	for (unsigned i = 0; i < 4; i++) {
		if (strcmp(key, keys[i]) == 0 && (i == 0 || l->kind == LOSS_GILBERT)) {
			*bit = 1u << i;
			return slots[i];
		}
	}
	return NULL;
}

static int parse_keys(char *rest, struct loss *l, char *err, size_t errlen)
{
	unsigned given = 0, bit = 0;
	char *save = NULL;

	for (char *tok = strtok_r(rest, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '=');
		uint64_t *slot = NULL;

		if (eq) {
			*eq = 0;
			slot = key_slot(l, tok, &bit);
		}
		if (!slot) {
			snprintf(err, errlen, "unknown key '%s' (bernoulli takes p; gilbert p, r, bad, good)", tok);
			return -1;
		}
		if (given & bit) {
			snprintf(err, errlen, "%s given twice", tok);
			return -1;
		}
		given |= bit;
		if (parse_prob(eq + 1, slot) < 0) {
			snprintf(err, errlen, "%s must be a probability 0..1 (0, or at least 1e-9), got '%s'", tok, eq + 1);
			return -1;
		}
	}
	int have_p = given & 1, have_r = (given & 2) != 0;

	if (!have_p || (l->kind == LOSS_GILBERT && !have_r)) {
		snprintf(err, errlen, "%s needs %s", l->kind == LOSS_GILBERT ? "gilbert" : "bernoulli",
			 l->kind == LOSS_GILBERT ? "p and r (e.g. gilbert p=0.01 r=0.25)" : "p (e.g. bernoulli p=0.01)");
		return -1;
	}
	if (l->kind == LOSS_GILBERT && l->r == 0) {
		snprintf(err, errlen, "r must be above 0: a chain that never leaves the bad state is not a loss rate");
		return -1;
	}
	return 0;
}

int loss_parse(const char *spec, struct loss *out, char *err, size_t errlen)
{
	char buf[LOSS_SPEC_MAX], *rest;
	struct loss l;
	size_t n = strlen(spec);

	memset(&l, 0, sizeof(l));
	if (n >= sizeof(buf)) {
		snprintf(err, errlen, "longer than %d characters", LOSS_SPEC_MAX - 1);
		return -1;
	}
	memcpy(buf, spec, n + 1);
	rest = buf + strspn(buf, " \t");
	if (*rest == 0 || (strncmp(rest, "none", 4) == 0 && (rest[4] == ' ' || rest[4] == '\t' || !rest[4]))) {
		if (*rest && rest[4 + strspn(rest + 4, " \t")]) {
			snprintf(err, errlen, "none takes no keys");
			return -1;
		}
		l.rng = out->rng;
		*out = l;
		return 0;
	}
	if (strncmp(rest, "bernoulli", 9) == 0 && (rest[9] == ' ' || rest[9] == '\t' || !rest[9])) {
		l.kind = LOSS_BERNOULLI;
		rest += 9;
	} else if (strncmp(rest, "gilbert", 7) == 0 && (rest[7] == ' ' || rest[7] == '\t' || !rest[7])) {
		l.kind = LOSS_GILBERT;
		l.bad = ONE;
		rest += 7;
	} else {
		snprintf(err, errlen, "'%s': the model must be none, bernoulli or gilbert", spec);
		return -1;
	}
	if (parse_keys(rest, &l, err, errlen) < 0)
		return -1;
	snprintf(l.spec, sizeof(l.spec), "%s", spec + strspn(spec, " \t"));
	l.rng = out->rng;
	*out = l;
	return 0;
}

void loss_seed(struct loss *l, uint64_t seed)
{
	aqm_rng_seed(&l->rng, seed);
}

static int chance(struct loss *l, uint64_t p)
{
	return p >= ONE || (uint64_t)aqm_rng_u32(&l->rng) < p;
}

int loss_drop(struct loss *l)
{
	switch (l->kind) {
	case LOSS_BERNOULLI:
		return chance(l, l->p);
	case LOSS_GILBERT:
		/* step, then draw in the state the frame meets */
		l->in_bad = l->in_bad ? !chance(l, l->r) : chance(l, l->p);
		return chance(l, l->in_bad ? l->bad : l->good);
	default:
		return 0;
	}
}

double loss_rate(const struct loss *l)
{
	double p = (double)l->p / ONE, r = (double)l->r / ONE;

	switch (l->kind) {
	case LOSS_BERNOULLI:
		return p;
	case LOSS_GILBERT:
		return p + r > 0 ? (p * (double)l->bad / ONE + r * (double)l->good / ONE) / (p + r) : 0;
	default:
		return 0;
	}
}
