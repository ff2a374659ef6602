// SPDX-License-Identifier: GPL-2.0
/* ckcd_record.c - the event record of a sch_ckcd qdisc (ckcd_record.h says
 * what it holds and why). One writer, under the qdisc lock; the debugfs reader
 * takes no lock: it shows the events below the count it read when the file was
 * opened, each complete before the count passed it (release/acquire), and then
 * the closing line, so a record read while it grows is a consistent prefix.
 */
#include <linux/debugfs.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <net/sch_generic.h>

#include "aqm.h"
#include "ckcd_record.h"

/* 2^24 events of 24 bytes, 384 MiB: kvmalloc refuses (and warns about) more
 * than INT_MAX bytes, so a larger value is refused when it is written. */
#define CKCD_RECORD_MAX_EVENTS (1u << 24)

static unsigned int record_events;

static int ckcd_record_events_set(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, 0, CKCD_RECORD_MAX_EVENTS);
}

static const struct kernel_param_ops ckcd_record_events_ops = {
	.set = ckcd_record_events_set,
	.get = param_get_uint,
};
module_param_cb(record_events, &ckcd_record_events_ops, &record_events, 0644);
MODULE_PARM_DESC(record_events, "events each new qdisc records for debugfs sch_ckcd/<dev>-<major> "
		 "(0: off, at most 16777216)");

enum ckcd_event_kind { EV_ENQUEUE = 'e', EV_DEQUEUE = 'd', EV_DROP = 'x', EV_MARK = 'm', EV_RANDOM = 'r' };

struct ckcd_event {
	u64 t_ns;
	u32 a, b, c; /* e: flow, len, host; d: seq; x: seq; r: value */
	u8 kind, dscp, reason, ecn;
};

struct ckcd_record {
	struct ckcd_event *ev;
	u32 cap, n;   /* n: events written; stops at cap */
	u32 next_seq; /* the seq of the next arriving packet */
	bool closed;  /* the qdisc was changed: the record ends (ckcd_record_close) */
	struct dentry *file;
};

static struct dentry *ckcd_debugfs_dir;

static void ckcd_record_put(struct ckcd_record *r, struct ckcd_event e)
{
	if (r->n == r->cap || r->closed)
		return; /* full or closed: the last line says how many, and why */
	r->ev[r->n] = e;
	smp_store_release(&r->n, r->n + 1);
}

u32 ckcd_record_enqueue(struct ckcd_record *r, u64 t_ns, const struct aqm_pkt *pkt)
{
	ckcd_record_put(r, (struct ckcd_event){ .kind = EV_ENQUEUE, .t_ns = t_ns, .a = pkt->flow_hash,
						.b = pkt->len, .c = pkt->host_hash, .dscp = pkt->dscp,
						.ecn = pkt->ecn });
	return r->next_seq++;
}

void ckcd_record_close(struct ckcd_record *r)
{
	WRITE_ONCE(r->closed, true);
}

void ckcd_record_dequeue(struct ckcd_record *r, u64 t_ns, u32 seq)
{
	ckcd_record_put(r, (struct ckcd_event){ .kind = EV_DEQUEUE, .t_ns = t_ns, .a = seq });
}

void ckcd_record_drop(struct ckcd_record *r, u32 seq, unsigned int reason)
{
	ckcd_record_put(r, (struct ckcd_event){ .kind = EV_DROP, .a = seq, .reason = reason });
}

void ckcd_record_mark(struct ckcd_record *r, u32 seq, unsigned int reason)
{
	ckcd_record_put(r, (struct ckcd_event){ .kind = EV_MARK, .a = seq, .reason = reason });
}

void ckcd_record_random(struct ckcd_record *r, u32 value)
{
	ckcd_record_put(r, (struct ckcd_event){ .kind = EV_RANDOM, .a = value });
}

/* ---- debugfs: one line per event ------------------------------------------ */

struct ckcd_record_reader {
	const struct ckcd_record *r;
	u32 n; /* the events this read shows */
};

static void *ckcd_record_seq_start(struct seq_file *m, loff_t *pos)
{
	const struct ckcd_record_reader *rd = m->private;

	/* one position past the events: the closing line */
	return *pos <= rd->n ? pos : NULL;
}

static void *ckcd_record_seq_next(struct seq_file *m, void *v, loff_t *pos)
{
	++*pos;
	return ckcd_record_seq_start(m, pos);
}

static void ckcd_record_seq_stop(struct seq_file *m, void *v)
{
}

static int ckcd_record_seq_show(struct seq_file *m, void *v)
{
	const struct ckcd_record_reader *rd = m->private;
	loff_t i = *(loff_t *)v;
	const struct ckcd_event *e;

	if (i == rd->n) {
		seq_printf(m, "# events %u of %u%s\n", rd->n, rd->r->cap,
			   READ_ONCE(rd->r->closed) ? " (closed: the qdisc was changed)" : "");
		return 0;
	}
	e = &rd->r->ev[i];
	switch (e->kind) {
	case EV_ENQUEUE:
		seq_printf(m, "e %llu %u %u %u %u %u\n", e->t_ns, e->a, e->b, e->dscp, e->c, e->ecn);
		break;
	case EV_DEQUEUE:
		if (e->a == CKCD_RECORD_NO_PKT)
			seq_printf(m, "d %llu -\n", e->t_ns);
		else
			seq_printf(m, "d %llu %u\n", e->t_ns, e->a);
		break;
	case EV_DROP:
		seq_printf(m, "x %u %s\n", e->a, aqm_drop_reason_name(e->reason));
		break;
	case EV_MARK:
		seq_printf(m, "m %u %s\n", e->a, aqm_drop_reason_name(e->reason));
		break;
	default:
		seq_printf(m, "r %u\n", e->a);
	}
	return 0;
}

static const struct seq_operations ckcd_record_seq_ops = {
	.start = ckcd_record_seq_start,
	.next = ckcd_record_seq_next,
	.stop = ckcd_record_seq_stop,
	.show = ckcd_record_seq_show,
};

static int ckcd_record_open(struct inode *inode, struct file *file)
{
	struct ckcd_record_reader *rd = __seq_open_private(file, &ckcd_record_seq_ops, sizeof(*rd));

	if (!rd)
		return -ENOMEM;
	rd->r = inode->i_private;
	rd->n = smp_load_acquire(&rd->r->n);
	return 0;
}

static const struct file_operations ckcd_record_fops = {
	.owner = THIS_MODULE,
	.open = ckcd_record_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = seq_release_private,
};

struct dentry *ckcd_debugfs_create(struct Qdisc *sch, const char *suffix, void *data,
				   const struct file_operations *fops)
{
	struct dentry *file = ERR_PTR(-ENOENT);
	char name[64];
	unsigned int i;

	if (IS_ERR_OR_NULL(ckcd_debugfs_dir))
		return file;
	/* Device names repeat across network namespaces, ifindexes too: the
	 * namespace's inode number sets them apart. Two qdiscs of one handle
	 * on one device can still meet (default qdiscs of handle 0, a graft
	 * whose new qdisc starts before the old one goes): the later gets
	 * "~2", "~3", ... */
	for (i = 1; i <= 8; i++) {
		int n = snprintf(name, sizeof(name), "%u-%s-%x", dev_net(qdisc_dev(sch))->ns.inum,
				 qdisc_dev(sch)->name, TC_H_MAJ(sch->handle) >> 16);

		if (i > 1)
			n += snprintf(name + n, sizeof(name) - n, "~%u", i);
		snprintf(name + n, sizeof(name) - n, "%s", suffix);
		file = debugfs_create_file(name, 0400, ckcd_debugfs_dir, data, fops);
		if (PTR_ERR_OR_ZERO(file) != -EEXIST)
			break;
	}
	if (IS_ERR(file))
		pr_warn_ratelimited("sch_ckcd: no debugfs file %s for %s: error %ld\n", name,
				    qdisc_dev(sch)->name, PTR_ERR(file));
	return file;
}

struct ckcd_record *ckcd_record_create(struct Qdisc *sch)
{
	u32 cap = READ_ONCE(record_events);
	struct ckcd_record *r;
	struct dentry *file;

	if (!cap || IS_ERR_OR_NULL(ckcd_debugfs_dir))
		return NULL;
	r = kzalloc(sizeof(*r), GFP_KERNEL_ACCOUNT);
	if (!r)
		return NULL;
	r->ev = kvcalloc(cap, sizeof(*r->ev), GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!r->ev) {
		kfree(r);
		return NULL;
	}
	r->cap = cap;
	file = ckcd_debugfs_create(sch, "", r, &ckcd_record_fops);
	if (IS_ERR(file)) {
		kvfree(r->ev);
		kfree(r);
		return NULL;
	}
	r->file = file;
	return r;
}

void ckcd_record_destroy(struct ckcd_record *r)
{
	if (!r)
		return;
	debugfs_remove(r->file); /* waits for readers to leave */
	kvfree(r->ev);
	kfree(r);
}

int ckcd_record_module_init(void)
{
	ckcd_debugfs_dir = debugfs_create_dir("sch_ckcd", NULL);
	return 0; /* without debugfs, qdiscs just run unrecorded */
}

void ckcd_record_module_exit(void)
{
	debugfs_remove_recursive(ckcd_debugfs_dir);
}
