// SPDX-License-Identifier: GPL-2.0
/* sch_ckcd_qdisc.c - qdisc kind "ckcd": the kernel host of datapath/core.
 *
 * The fourth host of the core, after ckcd-link, ckcd-replay and aqm-bench: it
 * hands the core the kernel clock (ktime_get_ns), get_random_u32 and kvzalloc
 * (called only from init/change, i.e. when the core creates a queue), maps
 * each skb to a core packet descriptor from a pool allocated at init/change,
 * and gives dropped skbs back to the qdisc drop path. The discipline and its
 * parameters are one core spec
 * ("ckcd limit=80 d_ms=5 ..."), validated by the core's own parser against
 * its one parameter table (ckcd_nl.h says why there is no second table).
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/ktime.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/jhash.h>
#include <linux/string.h>
#include <net/pkt_sched.h>
#include <net/sch_generic.h>
#include <net/inet_ecn.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/netlink.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/rtnetlink.h>
#include <linux/version.h>

#include "aqm.h"
#include "ckcd_record.h"
#include "ckcd_nl.h"

/* The core divides 64-bit numbers with '/', which a 32-bit kernel cannot
 * link (it has no __udivdi3): build for 64-bit kernels only. */
#ifndef CONFIG_64BIT
#error "sch_ckcd needs a 64-bit kernel"
#endif

#define CKCD_DEFER_MAX 32

/* Every packet a qdisc may hold costs a descriptor (48 bytes) and a ring
 * slot allocated when it is configured, and on a host where unprivileged
 * user namespaces may create qdiscs the spec's author is not trusted: the
 * limits of one qdisc's spec may add up to at most this many packets. 100000
 * MTU frames are 150 MB of queue, more than any port needs. The rest of a
 * queue's memory is bounded by its parameters' maxima (flow tables of at most
 * 65536 entries a band, tens of MB for 8 bands at their widest), and all of
 * it is charged to the memory cgroup of whoever configures the qdisc. */
static unsigned int max_packets = 100000;

static int ckcd_max_packets_set(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 1, 16000000);
}

static const struct kernel_param_ops ckcd_max_packets_ops = {
	.set = ckcd_max_packets_set,
	.get = param_get_uint,
};
module_param_cb(max_packets, &ckcd_max_packets_ops, &max_packets, 0644);
MODULE_PARM_DESC(max_packets, "the most packets one ckcd qdisc's limits may add up to (1..16000000)");

/* A queued skb's core descriptor (struct aqm_pkt) cannot live in skb->cb
 * (qdisc_skb_cb leaves 20 bytes; the descriptor is 48). Descriptors come from
 * a per-qdisc pool, allocated at init and change (under RTNL, may sleep) and
 * never on the packet path: enqueue pops one off a free list, dequeue and
 * drop push it back.
 *
 * Sizing: the queue never holds more than aqm_limit_pkts() packets (every
 * core discipline refuses a packet beyond its `limit`; bands: the sum of its
 * bands'), and one more descriptor carries the arriving packet while the core
 * decides. The pool grows at change when the new spec needs more, by one
 * chunk of the difference, before the new queue is swapped in; it does not
 * shrink (queued packets may sit in any chunk), so it holds the largest size
 * this qdisc had, until destroy. */
struct ckcd_chunk {
	struct ckcd_chunk *next;
	u32 ndescs;
	struct aqm_pkt descs[];
};

struct ckcd_pool {
	struct aqm_pkt *free; /* linked through ->next, which the core owns only while queued */
	struct ckcd_chunk *chunks;
	u32 ndescs, nfree;
};

struct ckcd_sched {
	struct aqm_queue *q;
	struct Qdisc *sch;
	struct aqm_env env;
	struct ckcd_pool pool;
	struct ckcd_record *rec; /* NULL unless record_events was set at init (ckcd_record.h) */
	struct dentry *state_file; /* debugfs <name>.state, or an ERR_PTR */
	/* Set while the core runs inside enqueue: drops then go to the
	 * caller's to_free list, and the arriving packet is told apart from
	 * queued ones (only queued ones are in our and our parents' counts). */
	struct sk_buff **to_free;
	struct aqm_pkt *arriving;
	bool arriving_dropped; /* the skb is gone: enqueue must not touch it */
	enum aqm_drop_reason arriving_reason;
	u32 hash_seed; /* host_hash's jhash seed, this qdisc's own */
	bool resetting; /* in reset: flushed packets are freed, not counted as drops */
	/* Queued packets the core dropped: reported to the parents (HTB) with
	 * qdisc_tree_reduce_backlog when the call ends, unless our queue is then
	 * empty (ckcd_report_dropped says why). */
	int dropped_queued, dropped_queued_bytes;
	/* Memory the core frees while we hold the tree lock (aqm_replace frees
	 * the old queue): freed after unlock, since kvfree may sleep. */
	void *deferred[CKCD_DEFER_MAX];
	unsigned int ndeferred;
	bool defer_free;
};

/* The qdisc's packet count is read without its lock (qdisc_is_empty, the
 * stats of a dump), so it is written with WRITE_ONCE, as the kernel's own
 * qdisc_qlen_inc/dec do where they exist (they are newer than 6.12). Under
 * the qdisc lock. */
static inline void ckcd_qlen_add(struct Qdisc *sch, int n)
{
	WRITE_ONCE(sch->q.qlen, sch->q.qlen + n);
}

/* ---- the descriptor pool ------------------------------------------------- */

static inline struct aqm_pkt *ckcd_desc_get(struct ckcd_pool *p)
{
	struct aqm_pkt *d = p->free;

	if (likely(d)) {
		p->free = d->next;
		p->nfree--;
	}
	return d;
}

static inline void ckcd_desc_put(struct ckcd_pool *p, struct aqm_pkt *d)
{
	d->next = p->free;
	p->free = d;
	p->nfree++;
}

/* A chunk of n descriptors, not yet in any pool (may sleep). */
static struct ckcd_chunk *ckcd_chunk_alloc(u32 n)
{
	struct ckcd_chunk *c = kvzalloc(struct_size(c, descs, n), GFP_KERNEL_ACCOUNT);

	if (c)
		c->ndescs = n;
	return c;
}

/* Under the tree lock once the pool is in use: no allocation here. */
static void ckcd_pool_add(struct ckcd_pool *p, struct ckcd_chunk *c)
{
	u32 i;

	c->next = p->chunks;
	p->chunks = c;
	for (i = 0; i < c->ndescs; i++)
		ckcd_desc_put(p, &c->descs[i]);
	p->ndescs += c->ndescs;
}

static void ckcd_pool_free(struct ckcd_pool *p)
{
	/* every descriptor must be back: a missing one is a packet we lost */
	WARN_ONCE(p->nfree != p->ndescs, "sch_ckcd: %u of %u descriptors not returned\n",
		  p->ndescs - p->nfree, p->ndescs);
	while (p->chunks) {
		struct ckcd_chunk *c = p->chunks;

		p->chunks = c->next;
		kvfree(c);
	}
	*p = (struct ckcd_pool){};
}

/* The chunk the pool needs before q can run (NULL with *err 0 if none),
 * or *err < 0 with extack set. */
static struct ckcd_chunk *ckcd_pool_grow_for(struct ckcd_sched *s, const struct aqm_queue *q,
					     int *err, struct netlink_ext_ack *extack)
{
	u64 need = aqm_limit_pkts(q);
	struct ckcd_chunk *c;

	*err = 0;
	if (!need) {
		NL_SET_ERR_MSG(extack, "ckcd: the discipline has no packet limit to size the descriptor pool by");
		*err = -EINVAL;
		return NULL;
	}
	need++; /* the arriving packet, while the core decides on it */
	if (need > U32_MAX) {
		NL_SET_ERR_MSG(extack, "ckcd: the limits of the spec add up to too many packets");
		*err = -EINVAL;
		return NULL;
	}
	if (need <= s->pool.ndescs)
		return NULL;
	c = ckcd_chunk_alloc(need - s->pool.ndescs);
	if (!c) {
		NL_SET_ERR_MSG(extack, "ckcd: out of memory for the packet descriptors of 'limit'");
		*err = -ENOMEM;
	}
	return c;
}

/* ---- the env the core runs on ------------------------------------------- */

static u32 ckcd_random(void *ctx)
{
	struct ckcd_sched *s = ctx;
	u32 v = get_random_u32();

	if (unlikely(s->rec))
		ckcd_record_random(s->rec, v);
	return v;
}

/* A queued skb's seq in the record: the qdisc's private part of skb->cb. */
static inline u32 *ckcd_skb_seq(struct sk_buff *skb)
{
	BUILD_BUG_ON(sizeof(u32) > QDISC_CB_PRIV_LEN);
	return (u32 *)qdisc_skb_cb(skb)->data;
}

static void *ckcd_alloc(void *ctx, size_t bytes)
{
	/* only from aqm_create*(), i.e. init/change under RTNL: may sleep;
	 * charged to the memory cgroup of whoever configures the qdisc */
	return kvzalloc(bytes, GFP_KERNEL_ACCOUNT);
}

static void ckcd_free(void *ctx, void *p)
{
	struct ckcd_sched *s = ctx;

	if (s->defer_free && p) {
		if (s->ndeferred < CKCD_DEFER_MAX) {
			s->deferred[s->ndeferred++] = p;
			return;
		}
		/* more blocks than any discipline allocates: kvfree defers
		 * vmalloc'ed memory itself in atomic context */
	}
	kvfree(p);
}

/* A CE mark instead of a drop (ecn=1): a congestion signal, counted in
 * overlimits as sch_red and sch_choke count theirs; CE is written at dequeue. */
static void ckcd_mark(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct ckcd_sched *s = ctx;

	if (unlikely(s->rec))
		ckcd_record_mark(s->rec, *ckcd_skb_seq(pkt->frame), why);
	qdisc_qstats_overlimit(s->sch);
}

static void ckcd_drop(void *ctx, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct ckcd_sched *s = ctx;
	struct sk_buff *skb = pkt->frame;
	struct Qdisc *sch = s->sch;

	if (unlikely(s->rec))
		ckcd_record_drop(s->rec, *ckcd_skb_seq(skb), why);
	if (unlikely(s->resetting)) {
		/* reset: counted by the core as flushed, not as qdisc drops */
		ckcd_qlen_add(sch, -1);
		qdisc_qstats_backlog_dec(sch, skb);
		ckcd_desc_put(&s->pool, pkt);
		kfree_skb(skb);
		return;
	}
	if (pkt == s->arriving) {
		s->arriving_dropped = true;
		s->arriving_reason = why;
	} else {
		/* it was counted as queued, here and in every parent */
		ckcd_qlen_add(sch, -1);
		qdisc_qstats_backlog_dec(sch, skb);
		s->dropped_queued++;
		s->dropped_queued_bytes += qdisc_pkt_len(skb);
	}
	ckcd_desc_put(&s->pool, pkt);
	if (s->to_free) {
		qdisc_drop(skb, sch, s->to_free);
	} else {
		qdisc_qstats_drop(sch);
		kfree_skb(skb);
	}
}

/* Tell the parents about queued packets the core dropped. From enqueue and
 * change at once, as sch_choke and codel_change do (a parent must not keep
 * an empty leaf's class active). From dequeue only while our queue still
 * counts a packet: at zero, qdisc_tree_reduce_backlog() would notify the
 * parent that this leaf went empty (qlen_notify) inside the parent's own
 * dequeue of it, which sch_fq_codel avoids the same way. Dequeue reports
 * before the packet it hands on leaves the count, and the core's
 * disciplines hand a packet on from every dequeue that drops, so a deferral
 * is a guard, settled by the next enqueue. */
static void ckcd_report_dropped(struct ckcd_sched *s)
{
	if (!s->dropped_queued)
		return;
	qdisc_tree_reduce_backlog(s->sch, s->dropped_queued, s->dropped_queued_bytes);
	s->dropped_queued = 0;
	s->dropped_queued_bytes = 0;
}

static void ckcd_free_deferred(struct ckcd_sched *s)
{
	while (s->ndeferred)
		kvfree(s->deferred[--s->ndeferred]);
	s->defer_free = false;
}

/* ---- extack messages ------------------------------------------------------
 * An extack message must outlive the request (netlink copies it after RTNL is
 * dropped), so it is never built per request. At load time we build one
 * message per parameter of every discipline from the core's table; a refused
 * spec comes back from the core typed (struct aqm_error: a code, the
 * discipline, the parameter's index), which picks the message. */

struct ckcd_param_msg {
	char msg[112];      /* the value itself is wrong: malformed or out of range */
	char conflict[112]; /* the value is in range but clashes with another option */
};

struct ckcd_disc_msgs {
	const char *name;
	unsigned int nparams;
	struct ckcd_param_msg *param;
};

static struct ckcd_disc_msgs *ckcd_msgs;
static unsigned int ckcd_ndiscs;
/* One per parameter name some discipline takes, for a spec that gives it to
 * a discipline that does not ("ecn" to droptail): the message names it. */
struct ckcd_unknown_msg {
	const char *name; /* the core's table's, static */
	char msg[128];
};
static struct ckcd_unknown_msg *ckcd_unknown_msgs;
static unsigned int ckcd_nunknown;
static char ckcd_unknown_disc_msg[160]; /* lists aqm_discipline_names() */

static int ckcd_fmt_fixed(char *buf, size_t len, s64 v, unsigned int decimals)
{
	s64 p = 1;
	unsigned int i;

	for (i = 0; i < decimals; i++)
		p *= 10;
	if (decimals == 0 || v % p == 0)
		return scnprintf(buf, len, "%lld", v / p);
	/* trailing zeros of the fraction are not shown: 500 with 3 -> 0.5 */
	while (v % 10 == 0) {
		v /= 10;
		p /= 10;
		decimals--;
	}
	return scnprintf(buf, len, "%lld.%0*lld", v / p, (int)decimals, v % p);
}

static void ckcd_free_msgs(void)
{
	unsigned int k;

	for (k = 0; ckcd_msgs && k < ckcd_ndiscs; k++)
		kfree(ckcd_msgs[k].param);
	kfree(ckcd_msgs);
	ckcd_msgs = NULL;
	kfree(ckcd_unknown_msgs);
	ckcd_unknown_msgs = NULL;
	ckcd_nunknown = 0;
}

static const struct ckcd_unknown_msg *ckcd_unknown_msg(const char *name)
{
	unsigned int i;

	for (i = 0; i < ckcd_nunknown; i++)
		if (!strcmp(ckcd_unknown_msgs[i].name, name))
			return &ckcd_unknown_msgs[i];
	return NULL;
}

/* ckcd_unknown_msgs: every distinct parameter name of the tables (at most
 * total entries), built once the per-discipline tables are. */
static int ckcd_build_unknown_msgs(unsigned int total)
{
	struct aqm_param_desc d;
	unsigned int k, i;

	ckcd_unknown_msgs = kcalloc(total, sizeof(*ckcd_unknown_msgs), GFP_KERNEL);
	if (!ckcd_unknown_msgs)
		return -ENOMEM;
	for (k = 0; k < ckcd_ndiscs; k++) {
		for (i = 0; aqm_param_desc(ckcd_msgs[k].name, i, &d); i++) {
			struct ckcd_unknown_msg *m;

			if (ckcd_unknown_msg(d.name) || ckcd_nunknown == total)
				continue;
			m = &ckcd_unknown_msgs[ckcd_nunknown++];
			m->name = d.name;
			scnprintf(m->msg, sizeof(m->msg),
				  "ckcd: unknown parameter '%s' for this discipline (tc qdisc add ... ckcd help lists them)",
				  d.name);
		}
	}
	return 0;
}

static int ckcd_build_msgs(void)
{
	const char *const *names = aqm_discipline_names();
	struct aqm_param_desc d;
	unsigned int n = 0, i, k, total = 0;
	size_t pos;

	pos = scnprintf(ckcd_unknown_disc_msg, sizeof(ckcd_unknown_disc_msg),
			"ckcd: unknown discipline in the spec (known:");
	for (n = 0; names[n]; n++)
		pos += scnprintf(ckcd_unknown_disc_msg + pos, sizeof(ckcd_unknown_disc_msg) - pos, " %s",
				 names[n]);
	scnprintf(ckcd_unknown_disc_msg + pos, sizeof(ckcd_unknown_disc_msg) - pos, ")");
	ckcd_msgs = kcalloc(n, sizeof(*ckcd_msgs), GFP_KERNEL);
	if (!ckcd_msgs)
		return -ENOMEM;
	ckcd_ndiscs = n;
	for (k = 0; k < n; k++) {
		struct ckcd_disc_msgs *dm = &ckcd_msgs[k];

		dm->name = names[k];
		while (aqm_param_desc(names[k], dm->nparams, &d))
			dm->nparams++;
		total += dm->nparams;
		dm->param = kcalloc(dm->nparams, sizeof(*dm->param), GFP_KERNEL);
		if (!dm->param) {
			ckcd_free_msgs();
			return -ENOMEM;
		}
		for (i = 0; aqm_param_desc(names[k], i, &d); i++) {
			struct ckcd_param_msg *m = &dm->param[i];
			char lo[24], hi[24];

			scnprintf(m->conflict, sizeof(m->conflict),
				  "%s: option '%s' conflicts with another option's value", names[k], d.name);
			if (d.text) {
				scnprintf(m->msg, sizeof(m->msg), "%s: invalid value for option '%s'",
					  names[k], d.name);
				continue;
			}
			ckcd_fmt_fixed(lo, sizeof(lo), d.min, d.decimals);
			ckcd_fmt_fixed(hi, sizeof(hi), d.max, d.decimals);
			scnprintf(m->msg, sizeof(m->msg), "%s: invalid value for option '%s' (allowed %s..%s %s)",
				  names[k], d.name, lo, hi, d.unit);
		}
	}
	if (ckcd_build_unknown_msgs(total)) {
		ckcd_free_msgs();
		return -ENOMEM;
	}
	return 0;
}

static const struct ckcd_param_msg *ckcd_param_msg(const struct aqm_error *e)
{
	unsigned int k;

	for (k = 0; e->disc && e->param >= 0 && k < ckcd_ndiscs; k++)
		if (!strcmp(ckcd_msgs[k].name, e->disc) && e->param < ckcd_msgs[k].nparams)
			return &ckcd_msgs[k].param[e->param];
	return NULL;
}

/* The message for a refused spec: static, chosen by the core's typed error. */
static const char *ckcd_extack_msg(const struct aqm_error *e)
{
	const struct ckcd_param_msg *m = ckcd_param_msg(e);
	const struct ckcd_unknown_msg *u;

	switch (e->code) {
	case AQM_ERR_UNKNOWN_DISC:
		return ckcd_unknown_disc_msg;
	case AQM_ERR_UNKNOWN_PARAM:
		/* a name some other discipline takes is named (e->key is the
		 * core's copy of it); any other is not repeated back */
		u = ckcd_unknown_msg(e->key);
		return u ? u->msg : "ckcd: unknown option in the spec (tc qdisc add ... ckcd help lists them)";
	case AQM_ERR_SYNTAX:
		return "ckcd: invalid spec: expected a discipline and name=value options";
	case AQM_ERR_CHILDREN:
		return "ckcd: invalid bands: 1 to 8 child specs after '|', none of them bands, only under bands";
	case AQM_ERR_OVER_CAP:
		return "ckcd: the limits add up to more packets than the module parameter max_packets allows";
	case AQM_ERR_NOMEM:
		return "ckcd: out of memory for the queue the spec asks for";
	case AQM_ERR_CONFLICT:
		return m ? m->conflict : "ckcd: two options conflict";
	default:
		return m ? m->msg : "ckcd: invalid spec";
	}
}

/* ---- the per-flow state, on demand ----------------------------------------
 * tc -s shows numbers (dump_stats); the discipline's whole text state (CKCD's
 * per-flow rates and d_th, a flow table's use) is long and is formatted only
 * when someone reads debugfs sch_ckcd/<netns>-<dev>-<major>.state (root),
 * into a bounded buffer allocated before the qdisc lock is taken. */

#define CKCD_STATE_MAX (64 * 1024)

static int ckcd_state_show(struct seq_file *m, void *v)
{
	struct Qdisc *sch = m->private;
	struct ckcd_sched *s = qdisc_priv(sch);
	char *buf = kvmalloc(CKCD_STATE_MAX, GFP_KERNEL_ACCOUNT);
	size_t len;

	if (!buf)
		return -ENOMEM;
	/* The tree lock is found under RTNL (qdisc_root_sleeping_lock). Only
	 * try it: destroy holds RTNL while debugfs_remove waits for this
	 * reader, so waiting here could deadlock; the read restarts instead,
	 * as net-sysfs's attributes do. */
	if (!rtnl_trylock()) {
		kvfree(buf);
		return restart_syscall();
	}
	sch_tree_lock(sch);
	len = aqm_xstats(s->q, buf, CKCD_STATE_MAX);
	sch_tree_unlock(sch);
	rtnl_unlock();
	seq_puts(m, buf);
	seq_puts(m, "\n");
	if (len >= CKCD_STATE_MAX - 1)
		seq_printf(m, "# cut at %u bytes\n", CKCD_STATE_MAX);
	kvfree(buf);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ckcd_state);

/* ---- configuration -------------------------------------------------------- */

static const struct nla_policy ckcd_policy[TCA_CKCD_MAX + 1] = {
	[TCA_CKCD_UNSPEC] = { .strict_start_type = TCA_CKCD_SPEC }, /* unknown attributes refused */
	[TCA_CKCD_SPEC] = { .type = NLA_NUL_STRING, .len = TCA_CKCD_SPEC_LEN - 1 },
	[TCA_CKCD_DISC] = { .type = NLA_NUL_STRING, .len = 31 },
	[TCA_CKCD_PARAMS] = { .type = NLA_NUL_STRING, .len = TCA_CKCD_SPEC_LEN - 1 },
};

/* The discipline name of a running queue: the first word of its spec. */
static bool ckcd_runs(const struct aqm_queue *q, const char *disc)
{
	char name[32];

	aqm_describe(q, name, sizeof(name));
	name[strcspn(name, " |")] = 0;
	return !strcmp(name, disc);
}

/* A new queue from opt (ckcd_nl.h says what each attribute does), or an
 * ERR_PTR with extack set; cur is the running queue at change, NULL at init.
 * Allocates (may sleep): call without the tree lock. */
static struct aqm_queue *ckcd_new_queue(struct ckcd_sched *s, const struct aqm_queue *cur,
					struct nlattr *opt, struct netlink_ext_ack *extack)
{
	struct nlattr *tb[TCA_CKCD_MAX + 1] = {};
	const char *disc = "ckcd", *params = "";
	struct aqm_error e = {};
	struct aqm_queue *q;
	struct nlattr *bad;
	char *spec;
	int err;

	if (opt) {
		/* tc sends TCA_OPTIONS without NLA_F_NESTED, as for every qdisc */
		err = nla_parse_nested_deprecated(tb, TCA_CKCD_MAX, opt, ckcd_policy, extack);
		if (err < 0)
			return ERR_PTR(err);
	}
	if (cur && !tb[TCA_CKCD_SPEC] && !tb[TCA_CKCD_DISC] && !tb[TCA_CKCD_PARAMS]) {
		NL_SET_ERR_MSG(extack, "ckcd: change needs options: the ones to change, or disc NAME, or spec");
		return ERR_PTR(-EINVAL);
	}
	if (tb[TCA_CKCD_SPEC] && (tb[TCA_CKCD_DISC] || tb[TCA_CKCD_PARAMS])) {
		NL_SET_ERR_MSG_ATTR(extack, tb[TCA_CKCD_SPEC], "ckcd: a whole spec comes alone");
		return ERR_PTR(-EINVAL);
	}
	s->env.max_pkts = READ_ONCE(max_packets);
	if (tb[TCA_CKCD_DISC])
		disc = nla_data(tb[TCA_CKCD_DISC]);
	if (tb[TCA_CKCD_PARAMS])
		params = nla_data(tb[TCA_CKCD_PARAMS]);
	bad = tb[TCA_CKCD_SPEC] ? tb[TCA_CKCD_SPEC] : tb[TCA_CKCD_PARAMS];
	if (tb[TCA_CKCD_SPEC]) {
		q = aqm_create_checked(nla_data(tb[TCA_CKCD_SPEC]), &s->env, &e);
	} else if (cur && (!tb[TCA_CKCD_DISC] || ckcd_runs(cur, disc))) {
		/* the running discipline: keep what this change does not give
		 * (reads cur's configuration, which only change writes, under
		 * RTNL as we are) */
		q = aqm_create_changed(cur, params, &s->env, &e);
	} else {
		/* a discipline of its own: its defaults and these parameters */
		spec = kasprintf(GFP_KERNEL, "%s %s", disc, params);
		if (!spec)
			return ERR_PTR(-ENOMEM);
		q = aqm_create_checked(spec, &s->env, &e);
		kfree(spec);
		if (!q && e.code == AQM_ERR_UNKNOWN_DISC)
			bad = tb[TCA_CKCD_DISC];
	}
	if (!q) {
		/* what NL_SET_ERR_MSG_ATTR does, for a message chosen at run
		 * time among the static ones (the macro takes literals only) */
		if (extack) {
			extack->_msg = ckcd_extack_msg(&e);
			extack->bad_attr = bad;
		}
		return ERR_PTR(e.code == AQM_ERR_NOMEM ? -ENOMEM : -EINVAL);
	}
	return q;
}

static int ckcd_init(struct Qdisc *sch, struct nlattr *opt, struct netlink_ext_ack *extack)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	struct ckcd_chunk *c;
	struct aqm_queue *q;
	int err;

	s->sch = sch;
	s->hash_seed = get_random_u32();
	s->env = (struct aqm_env){
		.ctx = s,
		.random_u32 = ckcd_random,
		.alloc = ckcd_alloc,
		.free = ckcd_free,
		.drop = ckcd_drop,
		.mark = ckcd_mark,
		.rate_bps = 0, /* a spec without rate_bps: the table's default */
	};
	q = ckcd_new_queue(s, NULL, opt, extack);
	if (IS_ERR(q))
		return PTR_ERR(q);
	c = ckcd_pool_grow_for(s, q, &err, extack);
	if (err) {
		aqm_destroy(q); /* empty: nothing comes back through drop */
		return err;
	}
	if (c)
		ckcd_pool_add(&s->pool, c);
	s->q = q;
	s->rec = ckcd_record_create(sch);
	s->state_file = ckcd_debugfs_create(sch, ".state", sch, &ckcd_state_fops);
	return 0;
}

static int ckcd_change(struct Qdisc *sch, struct nlattr *opt, struct netlink_ext_ack *extack)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	struct ckcd_chunk *c;
	struct aqm_queue *nq;
	int err;

	/* A record holds one configuration's inputs, written by one writer
	 * under the tree lock; the new queue draws random numbers as it is
	 * created, outside the lock. So recording ends here, before that. */
	if (s->rec) {
		sch_tree_lock(sch);
		ckcd_record_close(s->rec);
		sch_tree_unlock(sch);
	}
	/* Create first, outside the lock (it allocates), and the descriptors a
	 * larger limit needs; on error the old queue is untouched and keeps
	 * running. */
	nq = ckcd_new_queue(s, s->q, opt, extack);
	if (IS_ERR(nq))
		return PTR_ERR(nq);
	c = ckcd_pool_grow_for(s, nq, &err, extack);
	if (err) {
		aqm_destroy(nq);
		return err;
	}
	sch_tree_lock(sch);
	if (c)
		ckcd_pool_add(&s->pool, c); /* before the new queue may take more packets */
	s->defer_free = true;
	aqm_replace(&s->q, nq); /* queued packets move over in order */
	ckcd_report_dropped(s);
	sch_tree_unlock(sch);
	ckcd_free_deferred(s);
	return 0;
}

/* ---- the packet path ------------------------------------------------------ */

static void ckcd_classify(const struct ckcd_sched *s, struct sk_buff *skb, struct aqm_pkt *pkt)
{
	pkt->flow_hash = skb_get_hash(skb);
	pkt->dscp = 0;
	pkt->host_hash = 0;
	pkt->ecn = AQM_ECN_NOT_ECT; /* not IP: never marked */
	switch (skb_protocol(skb, true)) {
	case htons(ETH_P_IP):
		if (pskb_network_may_pull(skb, sizeof(struct iphdr))) {
			const struct iphdr *iph = ip_hdr(skb);

			pkt->dscp = ipv4_get_dsfield(iph) >> 2;
			pkt->ecn = ipv4_get_dsfield(iph) & INET_ECN_MASK;
			pkt->host_hash = jhash_2words((__force u32)iph->saddr,
						      (__force u32)iph->daddr, s->hash_seed);
		}
		break;
	case htons(ETH_P_IPV6):
		if (pskb_network_may_pull(skb, sizeof(struct ipv6hdr))) {
			const struct ipv6hdr *ip6h = ipv6_hdr(skb);

			pkt->dscp = ipv6_get_dsfield(ip6h) >> 2;
			pkt->ecn = ipv6_get_dsfield(ip6h) & INET_ECN_MASK;
			pkt->host_hash = jhash2((const u32 *)&ip6h->saddr, 8, s->hash_seed);
		}
		break;
	}
}

static int ckcd_enqueue(struct sk_buff *skb, struct Qdisc *sch, struct sk_buff **to_free)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	struct aqm_pkt *d;
	u64 now;
	int ret;

	d = ckcd_desc_get(&s->pool);
	if (unlikely(!d)) {
		/* cannot happen: the pool holds one more than the limits add up to */
		WARN_ONCE(1, "sch_ckcd: descriptor pool of %u empty\n", s->pool.ndescs);
		return qdisc_drop(skb, sch, to_free);
	}
	ckcd_classify(s, skb, d);
	d->len = qdisc_pkt_len(skb);
	d->frame = skb;
	now = ktime_get_ns();
	if (unlikely(s->rec))
		*ckcd_skb_seq(skb) = ckcd_record_enqueue(s->rec, now, d);
	s->to_free = to_free;
	s->arriving = d;
	s->arriving_dropped = false;
	s->arriving_reason = AQM_DROP_OVERFLOW;
	ret = aqm_enqueue(s->q, d, now);
	s->arriving = NULL;
	s->to_free = NULL;
	if (unlikely(ret == AQM_DROPPED && !s->arriving_dropped)) {
		/* a discipline broke the contract (aqm.h): the skb is still ours */
		WARN_ONCE(1, "sch_ckcd: the core dropped a packet without handing it back\n");
		ckcd_desc_put(&s->pool, d);
		ckcd_report_dropped(s);
		return qdisc_drop(skb, sch, to_free);
	}
	/* The core reports AQM_DROPPED when it drops the arriving packet; the
	 * flag guards the skb against any discipline that would not. */
	if (ret == AQM_DROPPED || s->arriving_dropped) {
		/* the core handed it to ckcd_drop: freed, counted */
		ckcd_report_dropped(s);
		if (s->arriving_reason == AQM_DROP_OVERFLOW)
			return NET_XMIT_DROP;
		/* An AQM's own decision, not a full buffer: congestion, as
		 * sch_red, sch_choke and sch_sfb answer, so the sender's
		 * stack backs off rather than counting a loss. */
		qdisc_qstats_overlimit(sch);
		return NET_XMIT_CN;
	}
	ckcd_qlen_add(sch, 1);
	qdisc_qstats_backlog_inc(sch, skb);
	ckcd_report_dropped(s);
	return NET_XMIT_SUCCESS;
}

static struct sk_buff *ckcd_dequeue(struct Qdisc *sch)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	u64 now = ktime_get_ns();
	struct aqm_pkt *pkt = aqm_dequeue(s->q, now);
	struct sk_buff *skb;

	if (unlikely(s->rec))
		ckcd_record_dequeue(s->rec, now, pkt ? *ckcd_skb_seq(pkt->frame) : CKCD_RECORD_NO_PKT);
	/* before the packet handed on leaves our count: see ckcd_report_dropped */
	if (sch->q.qlen)
		ckcd_report_dropped(s);
	if (!pkt)
		return NULL;
	skb = pkt->frame;
	/* The core marked it (ecn=1) instead of dropping it: write CE with the
	 * kernel's own helper, as sch_red and sch_codel do (the IPv4 checksum
	 * is updated; a Not-ECT packet is never marked: the core read ecn from
	 * this header at enqueue, and a mark never changes the length). */
	if (pkt->ecn == AQM_ECN_CE)
		INET_ECN_set_ce(skb);
	ckcd_desc_put(&s->pool, pkt);
	ckcd_qlen_add(sch, -1);
	qdisc_qstats_backlog_dec(sch, skb);
	qdisc_bstats_update(sch, skb);
	return skb;
}

/* Under the qdisc lock (device going down, or a parent's reset): every
 * queued packet is freed with no AQM decision and no random draw
 * (aqm_flush; the core counts them as flushed, the qdisc not as drops), the
 * discipline's estimators start afresh, and qdisc_reset zeroes qlen and
 * backlog (with a peeked skb in gso_skb, which it purges after us). */
static void ckcd_reset(struct Qdisc *sch)
{
	struct ckcd_sched *s = qdisc_priv(sch);

	if (!s->q)
		return;
	s->resetting = true;
	aqm_flush(s->q); /* through ckcd_drop: our qlen and backlog go down */
	s->resetting = false;
	/* nothing is owed to the parents: they reset themselves */
	s->dropped_queued = 0;
	s->dropped_queued_bytes = 0;
}

static void ckcd_destroy(struct Qdisc *sch)
{
	struct ckcd_sched *s = qdisc_priv(sch);

	/* first: the state file reads s->q (debugfs_remove waits for readers) */
	if (!IS_ERR_OR_NULL(s->state_file))
		debugfs_remove(s->state_file);
	s->state_file = NULL;
	/* Packets still queued come back through ckcd_drop (reason flush). */
	if (s->q)
		aqm_destroy(s->q);
	s->q = NULL;
	ckcd_record_destroy(s->rec); /* after the flush, which it records */
	s->rec = NULL;
	ckcd_pool_free(&s->pool);
	s->dropped_queued = 0;
	s->dropped_queued_bytes = 0;
}

/* ---- dump ----------------------------------------------------------------- */

/* The running spec, whole: the attribute is sized from it, never cut. */
static int ckcd_dump(struct Qdisc *sch, struct sk_buff *skb)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	size_t len = aqm_describe_len(s->q) + 1;
	struct nlattr *opts, *spec;

	opts = nla_nest_start_noflag(skb, TCA_OPTIONS);
	if (!opts)
		return -EMSGSIZE;
	spec = len <= U16_MAX - NLA_HDRLEN ? nla_reserve(skb, TCA_CKCD_SPEC, len) : NULL;
	if (!spec) {
		nla_nest_cancel(skb, opts);
		return -EMSGSIZE;
	}
	aqm_describe(s->q, nla_data(spec), len);
	return nla_nest_end(skb, opts);
}

static int ckcd_dump_stats(struct Qdisc *sch, struct gnet_dump *d)
{
	struct ckcd_sched *s = qdisc_priv(sch);
	struct tc_ckcd_xstats st = { .version = CKCD_XSTATS_VERSION, .nreasons = AQM_DROP_REASONS };
	const struct aqm_stats *as;
	struct aqm_xstats xs;
	unsigned int i;

	BUILD_BUG_ON(AQM_DROP_REASONS > CKCD_XSTATS_REASONS);
	/* numbers only under the lock: no text is formatted or parsed */
	sch_tree_lock(sch);
	as = aqm_get_stats(s->q);
	for (i = 0; i < AQM_DROP_REASONS; i++) {
		st.drops[i] = as->drops[i];
		st.marks[i] = as->marks[i];
	}
	st.enq_pkts = as->enq_pkts;
	st.deq_pkts = as->deq_pkts;
	aqm_get_xstats(s->q, &xs);
	sch_tree_unlock(sch);
	if ((xs.flags & (AQM_XS_FLOWS | AQM_XS_FAIR_SHARE)) == (AQM_XS_FLOWS | AQM_XS_FAIR_SHARE)) {
		st.flags |= CKCD_XSTATS_HAS_FLOWS;
		st.active_flows = xs.active_flows;
		st.fair_share_bps = xs.fair_share_bps;
	}
	return gnet_stats_copy_app(d, &st, sizeof(st));
}

static struct Qdisc_ops ckcd_qdisc_ops __read_mostly = {
	.id = "ckcd",
	.priv_size = sizeof(struct ckcd_sched),
	.enqueue = ckcd_enqueue,
	.dequeue = ckcd_dequeue,
	.peek = qdisc_peek_dequeued,
	.init = ckcd_init,
	.reset = ckcd_reset,
	.destroy = ckcd_destroy,
	.change = ckcd_change,
	.dump = ckcd_dump,
	.dump_stats = ckcd_dump_stats,
	.owner = THIS_MODULE,
};

static int __init ckcd_module_init(void)
{
	int err;

	err = ckcd_build_msgs();
	if (!err)
		err = ckcd_record_module_init();
	if (!err)
		err = register_qdisc(&ckcd_qdisc_ops);
	if (err) {
		ckcd_record_module_exit();
		ckcd_free_msgs();
	}
	return err;
}

static void __exit ckcd_module_exit(void)
{
	unregister_qdisc(&ckcd_qdisc_ops);
	ckcd_record_module_exit();
	ckcd_free_msgs();
}

module_init(ckcd_module_init);
module_exit(ckcd_module_exit);
/* From 6.9 on, the kernel asks for a qdisc kind it does not know by the alias
 * "net-sch-<kind>" (request_module(NET_SCH_ALIAS_PREFIX ...), so that
 * modprobe.d can blacklist autoloading), no longer by the module name
 * "sch_<kind>", which 6.1 asks for: without the alias, `tc qdisc add ...
 * ckcd` would not load an installed sch_ckcd on 6.12 and later. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 9, 0)
MODULE_ALIAS_NET_SCH("ckcd");
#endif
MODULE_DESCRIPTION("CKCD and the ckcd-coex queue disciplines (datapath/core) as a qdisc");
MODULE_LICENSE("GPL");
