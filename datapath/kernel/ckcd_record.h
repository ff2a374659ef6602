/* SPDX-License-Identifier: GPL-2.0 */
/* ckcd_record.h - what one sch_ckcd qdisc handed the core and what came back,
 * event by event, so that ckcd-replay can run the same core on the same inputs
 * and the verdicts can be compared (tests/kernel, docs/kernel.md).
 *
 * Off unless the module parameter record_events is set (it may change at run
 * time: /sys/module/sch_ckcd/parameters/record_events); a qdisc created while
 * it is N > 0 records its first N events into a buffer allocated at init, and
 * debugfs shows them as text in sch_ckcd/<netns>-<dev>-<major> (the network
 * namespace's inode number, as `ls -L /proc/PID/ns/net -i` shows it; the
 * handle's major in hex; "~2", "~3"... after it for a second qdisc of one
 * handle on one device), one per line:
 *
 *   e T FLOW LEN DSCP HOST ECN  a packet arrived at T ns (its seq: the count of e lines
 *                            before it), ECN its IP header's ECN field (0 Not-ECT .. 3 CE)
 *   d T SEQ                  the core was asked for a packet at T and gave SEQ ('-': none)
 *   x SEQ REASON             the core dropped packet SEQ (the arriving one or a queued one)
 *   m SEQ REASON             the core marked packet SEQ CE instead of dropping it (ecn=1)
 *   r VALUE                  the core drew this random number (in the order it drew them)
 *
 * and a last line "# events N of M" (N < M: the buffer filled and recording
 * stopped there), with " (closed: the qdisc was changed)" when a change
 * ended the record: one record holds one configuration's inputs. e, d and r
 * are the inputs; d's SEQ, x and m are the verdicts.
 */
#ifndef CKCD_RECORD_H
#define CKCD_RECORD_H

#include <linux/types.h>

struct Qdisc;
struct aqm_pkt;
struct ckcd_record;

#define CKCD_RECORD_NO_PKT U32_MAX

/* A record for a new qdisc (may sleep), or NULL when recording is off or the
 * buffer cannot be had (the qdisc then runs unrecorded). */
struct ckcd_record *ckcd_record_create(struct Qdisc *sch);
void ckcd_record_destroy(struct ckcd_record *r);

/* Under the qdisc lock, allocation-free. _enqueue returns the packet's seq. */
u32 ckcd_record_enqueue(struct ckcd_record *r, u64 t_ns, const struct aqm_pkt *pkt);
void ckcd_record_dequeue(struct ckcd_record *r, u64 t_ns, u32 seq);
void ckcd_record_drop(struct ckcd_record *r, u32 seq, unsigned int reason);
void ckcd_record_mark(struct ckcd_record *r, u32 seq, unsigned int reason);
void ckcd_record_random(struct ckcd_record *r, u32 value);
/* Under the qdisc lock, at change: nothing more is recorded. */
void ckcd_record_close(struct ckcd_record *r);

/* A debugfs file of this qdisc in sch_ckcd/: "<netns>-<dev>-<major>" and
 * suffix (the record has none, the state ".state"); an ERR_PTR, logged, if
 * debugfs has none to give. */
struct file_operations;
struct dentry *ckcd_debugfs_create(struct Qdisc *sch, const char *suffix, void *data,
				   const struct file_operations *fops);

int ckcd_record_module_init(void);
void ckcd_record_module_exit(void);

#endif
