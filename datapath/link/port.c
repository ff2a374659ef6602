/* port.c - the AF_PACKET side of ckcd-link: one raw socket per interface,
 * batched receive with length validation. */
#define _GNU_SOURCE
#include "link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define SOCK_RCVBUF_BYTES (32 << 20)
#define SOCK_SNDBUF_BYTES (8 << 20)

int port_open(const char *ifname, int *ifindex, char *err, size_t errlen)
{
	struct sockaddr_ll sll;
	struct packet_mreq mr;
	int fd, one = 1, rcvbuf = SOCK_RCVBUF_BYTES, sndbuf = SOCK_SNDBUF_BYTES;

	*ifindex = (int)if_nametoindex(ifname);
	if (*ifindex == 0) {
		snprintf(err, errlen, "no such interface '%s'", ifname);
		return -1;
	}
	/* Protocol 0 until bound, so nothing from other interfaces queues up. */
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket(AF_PACKET): %s", strerror(errno));
		return -1;
	}
	/* Our own sends on this interface must not come back as arrivals. */
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0)
		fprintf(stderr, "ckcd-link: %s: PACKET_IGNORE_OUTGOING: %s (relying on sll_pkttype)\n",
			ifname, strerror(errno));
	/* Hand frames straight to the veth: the daemon is the queue. */
	if (setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) < 0)
		fprintf(stderr, "ckcd-link: %s: PACKET_QDISC_BYPASS: %s\n", ifname, strerror(errno));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));

	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = *ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		snprintf(err, errlen, "bind to '%s': %s", ifname, strerror(errno));
		close(fd);
		return -1;
	}
	/* A wire sees every frame: take the ones for other MACs too. */
	memset(&mr, 0, sizeof(mr));
	mr.mr_ifindex = *ifindex;
	mr.mr_type = PACKET_MR_PROMISC;
	if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0)
		fprintf(stderr, "ckcd-link: %s: promiscuous mode: %s\n", ifname, strerror(errno));
	return fd;
}

static int ethtool_get(int fd, const char *ifname, uint32_t cmd, uint32_t *value)
{
	struct ethtool_value ev = {.cmd = cmd};
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ev;
	if (ioctl(fd, SIOCETHTOOL, &ifr) < 0)
		return -1;
	*value = ev.data;
	return 0;
}

void port_check_offloads(const char *ifname)
{
	static const struct {
		uint32_t cmd;
		const char *name;
	} offloads[] = {
		{ETHTOOL_GGRO, "gro"},
		{ETHTOOL_GTSO, "tso"},
		{ETHTOOL_GGSO, "gso"},
	};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return;
	for (size_t i = 0; i < sizeof(offloads) / sizeof(offloads[0]); i++) {
		uint32_t on;
		if (ethtool_get(fd, ifname, offloads[i].cmd, &on) == 0 && on)
			fprintf(stderr,
				"ckcd-link: warning: %s has %s on; frames above the MTU will be "
				"dropped as oversize (ethtool -K %s %s off, and on the peer)\n",
				ifname, offloads[i].name, ifname, offloads[i].name);
	}
	close(fd);
}

#define RX_BATCH 64

int port_receive(struct link_dir *d, int budget)
{
	struct pkt_pool *pool = &d->link->pool;
	uint32_t max_frame = d->link->cfg.mtu + ETH_HDR_LEN + VLAN_TAG_LEN;
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_ll from[RX_BATCH];
	struct pkt *batch[RX_BATCH];
	static uint8_t scratch[65536];
	int total = 0;

	while (total < budget) {
		int want = budget - total < RX_BATCH ? budget - total : RX_BATCH;
		int n = 0, r;
		uint64_t t;

		while (n < want) {
			struct pkt *p = pool_get(pool);
			if (!p)
				break;
			batch[n] = p;
			/* One byte more than the largest valid frame: MSG_TRUNC
			 * reports the real length of anything longer. */
			iov[n].iov_base = p->data;
			iov[n].iov_len = max_frame + 1;
			n++;
		}
		if (n == 0) {
			/* Pool exhausted: drain one frame and count it. */
			r = (int)recv(d->rx_fd, scratch, sizeof(scratch), MSG_DONTWAIT | MSG_TRUNC);
			if (r < 0)
				return total;
			d->rx_no_buffer++;
			total++;
			continue;
		}
		for (int i = 0; i < n; i++) {
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
		}
		r = recvmmsg(d->rx_fd, msgs, (unsigned)n, MSG_DONTWAIT | MSG_TRUNC, NULL);
		t = now_ns();
		if (r < 0)
			r = 0;
		dir_serve(d, t);
		for (int i = 0; i < r; i++) {
			struct pkt *p = batch[i];
			uint32_t len = msgs[i].msg_len;
			enum frame_verdict v;

			if (from[i].sll_pkttype == PACKET_OUTGOING) {
				d->rx_outgoing++;
				pool_put(pool, p);
				continue;
			}
			v = frame_check(p->data, len, d->link->cfg.mtu);
			if (v != FRAME_OK) {
				if (v == FRAME_RUNT)
					d->rx_runt++;
				else
					d->rx_oversize++;
				pool_put(pool, p);
				continue;
			}
			dir_arrive(d, p, len, t);
		}
		for (int i = r; i < n; i++)
			pool_put(pool, batch[i]);
		total += r;
		if (r < n)
			break; /* drained */
	}
	return total;
}
