/* host_delay.h - a host's own propagation delay on its way to the link.
 *
 * `--host-delay ADDR=DUR` gives the frames *from* ADDR (an IPv4 or IPv6
 * source address) DUR more one-way delay, spent before the queue, as on a
 * longer access link: flows through one bottleneck then have different base
 * RTTs (RTT-fairness experiments) without netem. A constant delay before the
 * queue shifts a flow's arrivals at the queue by that constant and nothing
 * else, and since the flow's sender reacts only to the total RTT, the queue
 * sees what it would see with the delay anywhere else in the loop. The frames
 * of one host wait in arrival order, so no flow is reordered. */
#ifndef CKCD_LINK_HOST_DELAY_H
#define CKCD_LINK_HOST_DELAY_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"

#define HOST_DELAY_MAX 16 /* hosts with their own delay, per daemon */

struct host_delay {
	uint8_t family;   /* 4 or 6 */
	uint8_t addr[16]; /* as struct flow_key holds a source address */
	uint64_t delay_ns;
	char addr_text[48];
};

/* "10.0.0.1=40ms", "fd00::2=5" (a bare number is ms), up to 10 s; refuses
 * an entry whose address is already in table[0..n). 0, or -1 with err. */
int host_delay_parse(const char *arg, const struct host_delay *table, unsigned n,
		     struct host_delay *out, char *err, size_t errlen);

/* The entry naming the frame's source address, or -1 (not IP, or no entry). */
int host_delay_find(const struct host_delay *table, unsigned n, const struct flow_key *key);

#endif
