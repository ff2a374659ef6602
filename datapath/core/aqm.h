/* aqm.h - the queue-discipline interface shared by its hosts: ckcd-link,
 * ckcd-replay, aqm-bench and the kernel qdisc sch_ckcd.
 *
 * The core is freestanding: no libc, no kernel headers, no floating point
 * (a kernel qdisc cannot use the FPU). Clock, random numbers and memory come
 * from the caller through struct aqm_env. Only <stdint.h>/<stddef.h>, which
 * are compiler-provided, are included.
 *
 * A queue is one instance of a discipline (aqm_discipline_names() lists
 * them: droptail, red, codel, hdcodel, choke, sred, fred, sfb, care, ckcd,
 * cocoa, fq_codel, pie, dualpi2, bands). It is created from a text spec such as
 *     "ckcd limit=80 delta_ms=100 d_ms=5"
 * parsed and validated in one place (aqm_params.c) against the discipline's
 * parameter table; per-packet code never re-validates.
 */
#ifndef CKCD_AQM_H
#define CKCD_AQM_H

#include <stddef.h>
#include <stdint.h>

/* Every drop has a reason and a counter (cf. sch_choke's early/pdrop/matched). */
enum aqm_drop_reason {
	AQM_DROP_OVERFLOW = 0, /* buffer full: tail drop */
	AQM_DROP_EARLY,        /* probabilistic/forced drop on enqueue (RED, CHOKe, CKCD q_avg; DualPI2's PI2, at dequeue) */
	AQM_DROP_CHOKE_MATCH,  /* random comparison matched: both packets (CHOKe, CKCD) */
	AQM_DROP_DELAY,        /* dequeue drop: sojourn above (per-flow) target (CoDel, CKCD d_th) */
	AQM_DROP_PENALTY,      /* drop inside a band marked as the penalized band */
	AQM_DROP_FLUSH,        /* queue destroyed with packets still in it */
	AQM_DROP_SHRINK,       /* queued packets dropped when a buffer shrinks (Cocoa) */
	AQM_DROP_REASONS
};

const char *aqm_drop_reason_name(enum aqm_drop_reason why);

/* The ECN field of an IP header (RFC 3168): its two low TOS / traffic-class
 * bits. A discipline configured with ecn=1 signals congestion to an
 * ECN-capable packet (ECT(0), ECT(1), or already CE) by setting CE where it
 * would have dropped it early, for delay or as a penalty - each discipline
 * says where (docs/ecn.md) - and counts the mark under that drop reason
 * (aqm_stats.marks). A full buffer always drops, and so does every decision
 * on a Not-ECT packet. */
enum aqm_ecn {
	AQM_ECN_NOT_ECT = 0,
	AQM_ECN_ECT1 = 1,
	AQM_ECN_ECT0 = 2,
	AQM_ECN_CE = 3,
};

/* A packet descriptor. The caller owns the frame; the core only links
 * descriptors and reads the fields below. */
struct aqm_pkt {
	struct aqm_pkt *next; /* owned by the core while the packet is queued */
	uint64_t enqueue_ns;  /* stamped by the core on enqueue */
	uint32_t flow_hash;   /* caller's flow id (hash of the 5-tuple) */
	uint32_t len;         /* bytes on the wire */
	uint8_t dscp;         /* for the bands classifier */
	uint8_t band;         /* set by "bands" to the band it was queued in */
	void *frame;          /* caller's data, opaque to the core */
	/* Private to the core: written on every enqueue (and carry-over on
	 * reconfigure) before it is read, so callers need not initialise it and
	 * must not rely on its value. ckcd keeps the packet's flow-table slot
	 * here so dequeue does not search the table again (the slot is checked
	 * against flow_hash, so an evicted entry is detected). Added last: the
	 * fields above keep their offsets. */
	uint32_t core_slot;
	/* Caller's id of the host pair (hash of the source and destination
	 * addresses): the connection of seed 003, whose "connection
	 * information is composed of MAC addresses of the sender and the
	 * receiver". Read by hdcodel key=host only; 0 from a caller that does
	 * not know it (every packet then one connection). Added last, after
	 * core_slot, so every field above keeps its offset. */
	uint32_t host_hash;
	/* The packet's ECN codepoint (enum aqm_ecn) as the host read it from
	 * the IP header; AQM_ECN_NOT_ECT for a frame that is not IP, so a
	 * non-IP frame is never marked. The core sets it to AQM_ECN_CE when it
	 * marks the packet; the host writes CE into the frame when it sends a
	 * packet whose ecn is AQM_ECN_CE (a mark never changes the frame's
	 * length). Added last: every field above keeps its offset. */
	uint8_t ecn;
};

struct aqm_env {
	void *ctx;
	uint32_t (*random_u32)(void *ctx); /* all 32 bits uniform (ckcd splits one draw) */
	void *(*alloc)(void *ctx, size_t bytes); /* must return zeroed memory */
	void (*free)(void *ctx, void *p);
	/* The core hands every dropped packet back here, the arriving one
	 * included, with its reason. */
	void (*drop)(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why);
	/* The rate the caller drains the queue at, bit/s: the value of every
	 * discipline's rate_bps the spec leaves out (RED's idle decay, CKCD's
	 * fair share C / I and BDP). 0: the parameter table's default. A band
	 * inherits its parent's (a band may borrow the whole link). */
	uint64_t rate_bps;
	/* The most packets one queue may be configured to hold (for bands, the
	 * sum of its bands' limits): a spec asking for more is refused with
	 * AQM_ERR_OVER_CAP before its memory is allocated. 0: no cap. A host
	 * that cannot trust its spec's author (a kernel) sets one: every packet
	 * a discipline may hold costs memory when the queue is created. */
	uint64_t max_pkts;
	/* Optional (NULL: not told): called for every packet the core marks CE
	 * instead of dropping, with the reason it would have been dropped for.
	 * The packet stays queued or is handed out; a host that writes the mark
	 * when it sends needs no callback (bands uses it to count its bands'
	 * marks as its own). */
	void (*mark)(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why);
};

struct aqm_stats {
	uint64_t enq_pkts, enq_bytes; /* accepted into the queue */
	uint64_t deq_pkts, deq_bytes; /* handed to the link */
	uint64_t drops[AQM_DROP_REASONS];
	uint64_t drop_bytes[AQM_DROP_REASONS];
	/* ECN marks, by the reason the packet would otherwise have been dropped
	 * for: decisions, as Linux's `marked` counts them. A marked packet counts
	 * in enq and deq like any other, unless a later decision drops it after
	 * all (a marked arrival meeting the limit, a match's victim, a flush):
	 * then it is in drops too. */
	uint64_t marks[AQM_DROP_REASONS];
	uint64_t mark_bytes[AQM_DROP_REASONS];
};

struct aqm_queue; /* opaque */

enum { AQM_QUEUED = 0, AQM_DROPPED = 1 };

/* Why a spec was refused, typed, so that a host chooses its own words (the
 * kernel's extack messages must be static strings) and a program reads which
 * parameter was wrong without parsing English. */
enum aqm_err_code {
	AQM_ERR_NONE = 0,
	AQM_ERR_SYNTAX,        /* not "<discipline> key=value ...": empty spec, no '=', empty value */
	AQM_ERR_UNKNOWN_DISC,  /* no such discipline */
	AQM_ERR_UNKNOWN_PARAM, /* the discipline has no such parameter */
	AQM_ERR_TWICE,         /* a parameter given twice */
	AQM_ERR_NOT_NUMBER,    /* malformed number, too many decimal places, too large */
	AQM_ERR_RANGE,         /* a number outside the parameter's range */
	AQM_ERR_VALUE,         /* a text value (list, map, word) the discipline refuses */
	AQM_ERR_CONFLICT,      /* in range, but clashes with another parameter (param, other) */
	AQM_ERR_CHILDREN,      /* '|' child specs where none are taken, too many, or none */
	AQM_ERR_OVER_CAP,      /* the limits add up to more packets than the host allows (env.max_pkts) */
	AQM_ERR_NOMEM,         /* the host's alloc failed */
	AQM_ERR_ENV,           /* the host's aqm_env lacks a callback */
	AQM_ERR_CODES
};

#define AQM_ERR_TEXT_LEN 200
#define AQM_ERR_KEY_LEN 32

struct aqm_error {
	enum aqm_err_code code;
	const char *disc; /* the discipline the error is in (a static name), or NULL */
	int param;        /* its index in disc's table (aqm_param_desc), or -1 */
	int other;        /* AQM_ERR_CONFLICT: the other parameter's index, or -1 */
	int band;         /* in a child of bands: the band, counted from 0; else -1 */
	/* AQM_ERR_UNKNOWN_PARAM: the name as the spec gave it, so a host can
	 * say which without parsing text; "" otherwise, and for a name that is
	 * not printable ASCII or does not fit */
	char key[AQM_ERR_KEY_LEN];
	/* The same in English with the value given ("ckcd: parameter 'limit' =
	 * '0': out of range (allowed 1..1000000 packets)"), cut to fit. */
	char text[AQM_ERR_TEXT_LEN];
};

/* A short name of a code ("range", "conflict", ...), for logs and JSON. */
const char *aqm_err_code_name(enum aqm_err_code code);

/* Create a queue from a spec. On error returns NULL and fills *err. */
struct aqm_queue *aqm_create_checked(const char *spec, const struct aqm_env *env,
				     struct aqm_error *err);

/* aqm_create_checked() for a host that only prints the message: on error
 * returns NULL and writes err->text into err (errlen bytes, NUL-terminated). */
struct aqm_queue *aqm_create(const char *spec, const struct aqm_env *env,
			     char *err, size_t errlen);

/* A new queue of q's discipline with q's env and configuration, except the
 * parameters that `changes` ("key=value ...", no discipline name) gives: the
 * way a Linux qdisc's change keeps what it is not told. Parameters of bands
 * apply to bands itself; its children keep their specs. The new queue runs
 * on env (q's own, or the host's newer one: a changed max_pkts). q is not
 * touched (hand the result to aqm_replace()). On error returns NULL and
 * fills *err. */
struct aqm_queue *aqm_create_changed(const struct aqm_queue *q, const char *changes,
				     const struct aqm_env *env, struct aqm_error *err);

/* Drop every queued packet (env->drop, reason AQM_DROP_FLUSH) and start the
 * discipline's state afresh (averages, drop schedules, per-flow state),
 * keeping its configuration and totals: what a qdisc's reset does. No
 * allocation and no random numbers: safe where the caller may not sleep. */
void aqm_flush(struct aqm_queue *q);

/* Replace the discipline/parameters of *q at run time. Queued packets are
 * carried over in order (no AQM decision is made on them). On error *q is
 * left untouched and err names the parameter. Returns 0 or -1. */
int aqm_reconfigure(struct aqm_queue **q, const char *spec, char *err, size_t errlen);

/* The two halves of aqm_reconfigure(), for a caller that changes several
 * queues all or none: first aqm_create() each new queue (with the old one's
 * env; any may fail, and then nothing has changed), then aqm_replace() each,
 * which cannot fail: *q's packets and totals move to nq, as aqm_reconfigure()
 * moves them, and the old queue is freed. */
void aqm_replace(struct aqm_queue **q, struct aqm_queue *nq);

/* Set the rate that the next aqm_reconfigure() of *q gives a rate_bps the
 * spec leaves out (a link whose rate changed re-applies its spec after it). */
void aqm_set_env_rate(struct aqm_queue *q, uint64_t rate_bps);

/* AQM_QUEUED or AQM_DROPPED (the packet has then been given to env->drop). */
int aqm_enqueue(struct aqm_queue *q, struct aqm_pkt *pkt, uint64_t now_ns);

/* Next packet to send, or NULL. Packets dropped on the way go to env->drop. */
struct aqm_pkt *aqm_dequeue(struct aqm_queue *q, uint64_t now_ns);

uint32_t aqm_qlen_pkts(const struct aqm_queue *q);
uint64_t aqm_qlen_bytes(const struct aqm_queue *q);
const struct aqm_stats *aqm_get_stats(const struct aqm_queue *q);

/* Bands only: number of bands and the per-band stats/qlen (band < n).
 * For a non-band discipline aqm_nbands() is 1 and band 0 is the queue. */
unsigned aqm_nbands(const struct aqm_queue *q);
const struct aqm_stats *aqm_band_stats(const struct aqm_queue *q, unsigned band);
uint32_t aqm_band_qlen_pkts(const struct aqm_queue *q, unsigned band);

/* The most packets q can hold: its `limit` (every discipline refuses a packet
 * beyond it), for bands the sum of its bands'. A host that keeps per-packet
 * state of its own sizes it from this (sch_ckcd's descriptor pool). */
uint64_t aqm_limit_pkts(const struct aqm_queue *q);

/* Current configuration as a spec string (all parameters, defaults filled
 * in), and discipline-specific state as "key=value ..." (q_avg, count,
 * active flows, and per flow for CKCD: can be long). Both write at most len
 * bytes, always NUL-terminated, and return the length written.
 * aqm_describe_len() is the length of the whole spec, NUL not counted:
 * a host sizes its buffer by it so a spec is never cut. */
size_t aqm_describe(const struct aqm_queue *q, char *buf, size_t len);
size_t aqm_describe_len(const struct aqm_queue *q);
size_t aqm_xstats(const struct aqm_queue *q, char *buf, size_t len);

/* A queue's state as numbers: what a host shows every time it is asked (the
 * kernel's xstats, ckcd-link's report) without formatting or parsing text.
 * A field is meaningful when its AQM_XS_ flag is set; a bands queue sums its
 * bands' active flows and reports the smallest fair share. */
enum {
	AQM_XS_FLOWS = 1u << 0,      /* active_flows */
	AQM_XS_FAIR_SHARE = 1u << 1, /* fair_share_bps */
	AQM_XS_QAVG = 1u << 2,       /* q_avg_milli */
	AQM_XS_PROB = 1u << 3,       /* prob_e9 */
};

struct aqm_xstats {
	uint32_t flags;
	uint32_t active_flows;   /* flows counted as active now (CKCD's I, FRED's Nactive) */
	uint64_t fair_share_bps; /* CKCD's C / I */
	uint64_t q_avg_milli;    /* the averaged queue (RED's avg, CKCD's q_avg), packets x 1000 */
	/* The probability the discipline's controller holds (DualPI2's base
	 * probability p'), x 10^9. Added last: the fields above keep their
	 * offsets. */
	uint64_t prob_e9;
};

void aqm_get_xstats(const struct aqm_queue *q, struct aqm_xstats *out);

/* Bands only: band's own state (band < aqm_nbands(q)), its discipline's
 * aqm_get_xstats(). For a non-band discipline band 0 is the queue; out is
 * zeroed (no flag set) for a band out of range. */
void aqm_band_xstats(const struct aqm_queue *q, unsigned band, struct aqm_xstats *out);

/* Frees the queue; packets still queued go to env->drop with AQM_DROP_FLUSH. */
void aqm_destroy(struct aqm_queue *q);

/* Names of the registered disciplines, NULL-terminated. */
const char *const *aqm_discipline_names(void);

/* One entry of a discipline's parameter table: what tools outside the core
 * (ckcd-replay --catalog, and through it the controller's policy checks and
 * the REST API's schema) learn the parameters from, so they are written once.
 * Values are in stored units: the number given x 10^decimals. */
struct aqm_param_desc {
	const char *name, *unit;
	int64_t min, max, def;
	unsigned decimals;
	int text;             /* free text (lists, maps), checked by the discipline */
	const char *def_text; /* the default of a text parameter */
};

/* The i-th parameter of discipline `name` into *out: 1, or 0 past the last. */
int aqm_param_desc(const char *name, unsigned i, struct aqm_param_desc *out);
/* 1 when the discipline takes child specs after '|' (bands). */
int aqm_discipline_takes_children(const char *name);

#endif
