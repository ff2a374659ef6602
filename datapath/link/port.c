/* port.c - the AF_PACKET side of ckcd-link: one raw socket per interface;
 * receive through a mapped ring (PACKET_RX_RING) or, where there is none,
 * recvmmsg; every frame's length validated, a tag the kernel took off put
 * back. Sending is tx.c's. */
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define SOCK_RCVBUF_BYTES (32 << 20)
#define SOCK_SNDBUF_BYTES (8 << 20)
/* The ring holds what arrives while the main thread is busy elsewhere: 16
 * MiB is 8192 slots of 2 KiB at MTU 1500, over a second of a 100 Mbit/s
 * link's frames, as much as the recvmmsg path's socket buffer takes. */
#define RX_RING_BYTES (16u << 20)
#define RX_RING_BLOCK_MIN (64u << 10)

const char *rx_io_name(enum rx_io io)
{
	switch (io) {
	case RX_IO_RING: return "ring";
	case RX_IO_RECVMMSG: return "recvmmsg";
	default: return "auto";
	}
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

/* Maps a TPACKET_V2 receive ring on fd (not yet bound, so no frame has
 * queued on the socket). Slots are a power of two holding the ring's
 * headers (under 128 bytes) and the largest valid frame; a longer frame
 * arrives truncated and is counted as oversize by its real length. */
static int ring_map(int fd, uint32_t max_frame, struct rx_ring *ring, char *err, size_t errlen)
{
	int version = TPACKET_V2;
	struct tpacket_req req;
	uint32_t frame_size = pow2_at_least(max_frame + 128);
	uint32_t block = frame_size > RX_RING_BLOCK_MIN ? frame_size : RX_RING_BLOCK_MIN;
	void *map;

	memset(ring, 0, sizeof(*ring));
	if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof(version)) < 0) {
		snprintf(err, errlen, "PACKET_VERSION TPACKET_V2: %s", strerror(errno));
		return -1;
	}
	memset(&req, 0, sizeof(req));
	req.tp_block_size = block;
	req.tp_block_nr = RX_RING_BYTES / block;
	req.tp_frame_size = frame_size;
	req.tp_frame_nr = req.tp_block_nr * (block / frame_size);
	if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) < 0) {
		snprintf(err, errlen, "PACKET_RX_RING: %s", strerror(errno));
		return -1;
	}
	map = mmap(NULL, (size_t)block * req.tp_block_nr, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) { /* the ring stays installed: the caller drops this socket */
		snprintf(err, errlen, "mmap of the receive ring: %s", strerror(errno));
		return -1;
	}
	ring->map = map;
	ring->map_len = (size_t)block * req.tp_block_nr;
	ring->frame_size = frame_size;
	ring->frames = req.tp_frame_nr;
	return 0;
}

/* A raw socket on ifname, not yet bound (protocol 0: nothing queues on it). */
static int packet_socket(const char *ifname, char *err, size_t errlen)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
	int sndbuf = SOCK_SNDBUF_BYTES;

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
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	return fd;
}

int port_open(const char *ifname, int *ifindex, enum rx_io io, uint32_t max_frame,
	      struct rx_ring *ring, char *err, size_t errlen)
{
	struct sockaddr_ll sll;
	struct packet_mreq mr;
	int fd, one = 1, rcvbuf = SOCK_RCVBUF_BYTES;
	char why[160];

	memset(ring, 0, sizeof(*ring));
	*ifindex = (int)if_nametoindex(ifname);
	if (*ifindex == 0) {
		snprintf(err, errlen, "no such interface '%s'", ifname);
		return -1;
	}
	fd = packet_socket(ifname, err, errlen);
	if (fd < 0)
		return -1;
	if (io != RX_IO_RECVMMSG && ring_map(fd, max_frame, ring, why, sizeof(why)) < 0) {
		/* A ring half set up (installed but not mapped) would take every
		 * frame from recvmmsg: start again on a fresh socket. */
		close(fd);
		if (io == RX_IO_RING) {
			snprintf(err, errlen, "%s: receive ring: %s", ifname, why);
			return -1;
		}
		fprintf(stderr, "ckcd-link: %s: no receive ring (%s): reading with recvmmsg\n",
			ifname, why);
		fd = packet_socket(ifname, err, errlen);
		if (fd < 0)
			return -1;
	}
	if (!ring->map) {
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
		/* recvmmsg learns of a tag the kernel took off from this. */
		if (setsockopt(fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof(one)) < 0)
			fprintf(stderr, "ckcd-link: %s: PACKET_AUXDATA: %s (802.1Q tags may be lost)\n",
				ifname, strerror(errno));
	}

	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = *ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		snprintf(err, errlen, "bind to '%s': %s", ifname, strerror(errno));
		port_close(fd, ring);
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

void port_close(int fd, struct rx_ring *ring)
{
	if (ring->map)
		munmap(ring->map, ring->map_len);
	memset(ring, 0, sizeof(*ring));
	close(fd);
}

void port_clear_error(struct link_dir *d, const char *ifname)
{
	int e = 0;
	socklen_t len = sizeof(e);

	/* Reading SO_ERROR clears it; with a ring nothing else would (no
	 * receive call), and epoll would report it on every turn. */
	if (getsockopt(d->rx_fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e) {
		d->rx_socket_errors++;
		fprintf(stderr, "ckcd-link: %s: %s\n", ifname, strerror(e));
	}
}

void port_count_kernel_drops(struct link_dir *d)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (d->rx_fd >= 0 && getsockopt(d->rx_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
		d->rx_kernel_drops += st.tp_drops;
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

/* A frame read into p: put back a tag the kernel took off, validate, count
 * and hand it to the direction, or count why not and free p. len is the
 * frame's real length without that tag (more than was read when it is too
 * long to be valid). */
static void accept_frame(struct link_dir *d, struct pkt *p, uint32_t len, int tagged, uint16_t tpid,
			 uint16_t tci, uint64_t t)
{
	uint32_t mtu = d->link->cfg.mtu, max_frame = mtu + ETH_HDR_LEN + VLAN_TAG_LEN;
	uint32_t wire = tagged ? len + VLAN_TAG_LEN : len;
	enum frame_verdict v;

	if (wire > max_frame) {
		v = FRAME_OVERSIZE;
	} else if (tagged && frame_put_vlan_tag(p->data, len, max_frame + 1, tpid ? tpid : 0x8100,
						tci) == 0) {
		v = FRAME_RUNT;
	} else {
		v = frame_check(p->data, wire, mtu);
	}
	if (v != FRAME_OK) {
		if (v == FRAME_RUNT)
			d->rx_runt++;
		else
			d->rx_oversize++;
		/* as read: at most one byte past the largest valid frame */
		dir_capture_discard(d, t, p->data, len < max_frame + 1 ? len : max_frame + 1, len,
				    v == FRAME_RUNT ? "rx_runt" : "rx_oversize");
		pool_put(&d->link->pool, p);
		return;
	}
	dir_arrive(d, p, wire, t);
}

static struct tpacket2_hdr *ring_slot(const struct rx_ring *ring, uint32_t i)
{
	return (void *)(ring->map + (size_t)i * ring->frame_size);
}

/* --capture: a frame discarded from its slot, as much of it as the slot holds. */
static void capture_slot(struct link_dir *d, const struct tpacket2_hdr *h, uint64_t t, const char *reason)
{
	dir_capture_discard(d, t, (const uint8_t *)h + h->tp_mac, h->tp_snaplen, h->tp_len, reason);
}

/* How many slots from next the kernel has handed over, at most max. They are
 * counted before the batch's clock reading, so every frame stamped with it had
 * arrived by then: a frame the kernel writes while we walk waits for the next
 * batch. Stamped with a reading taken before it arrived, it would leave that
 * much early (a host that stalls us between the reading and the walk, as a
 * hypervisor withholding the CPU does, made it milliseconds). */
static int ring_ready(const struct rx_ring *ring, int max)
{
	uint32_t i = ring->next;
	int n = 0;

	while (n < max && (__atomic_load_n(&ring_slot(ring, i)->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) {
		n++;
		i = i + 1 == ring->frames ? 0 : i + 1;
	}
	return n;
}

/* The ring: walk the slots the kernel has filled, in order, copying each
 * frame into the pool and handing the slot straight back. */
static int receive_ring(struct link_dir *d, int budget)
{
	struct rx_ring *ring = &d->ring;
	uint32_t max_frame = d->link->cfg.mtu + ETH_HDR_LEN + VLAN_TAG_LEN;
	int total = 0;

	while (total < budget) {
		int ready = ring_ready(ring, budget - total < RX_BATCH ? budget - total : RX_BATCH);
		uint64_t t;

		if (!ready)
			return total;
		t = now_ns();
		/* Arrivals see the queue the link would have left them. */
		dir_serve(d, t);
		for (int n = 0; n < ready; n++, total++) {
			struct tpacket2_hdr *h = ring_slot(ring, ring->next);
			uint32_t status = h->tp_status; /* TP_STATUS_USER, read with acquire above */
			const struct sockaddr_ll *sll;
			struct pkt *p;
			int tagged;

			sll = (const void *)((uint8_t *)h + TPACKET_ALIGN(sizeof(*h)));
			tagged = !!(status & TP_STATUS_VLAN_VALID);
			if (sll->sll_pkttype == PACKET_OUTGOING) {
				d->rx_outgoing++;
			} else if (h->tp_len + (tagged ? VLAN_TAG_LEN : 0) > max_frame) {
				d->rx_oversize++; /* by its length, not read */
				capture_slot(d, h, t, "rx_oversize");
			} else if (!(p = pool_get(&d->link->pool))) {
				d->rx_no_buffer++;
				capture_slot(d, h, t, "rx_no_buffer");
			} else {
				uint16_t tpid = status & TP_STATUS_VLAN_TPID_VALID ? h->tp_vlan_tpid : 0;
				uint32_t len = h->tp_len;

				/* A slot holds the largest valid frame, so one that
				 * fits was captured whole. */
				if (h->tp_snaplen == len && h->tp_mac + (size_t)len <= ring->frame_size)
					memcpy(p->data, (uint8_t *)h + h->tp_mac, len);
				else
					len = max_frame + 1; /* cannot happen: counted as oversize */
				accept_frame(d, p, len, tagged, tpid, h->tp_vlan_tci, t);
			}
			__atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
			ring->next = ring->next + 1 == ring->frames ? 0 : ring->next + 1;
		}
	}
	return total;
}

/* A receive call failed: nothing to read is normal; anything else is the
 * socket's error (ENETDOWN), which the call has just cleared: count it as
 * port_clear_error() does. */
static void count_receive_error(struct link_dir *d)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return;
	d->rx_socket_errors++;
	fprintf(stderr, "ckcd-link: %s: %s\n", d->link->cfg.if_name[d->index], strerror(errno));
}

/* The pool is empty: read one frame into scratch and count it (an oversize
 * one as oversize, as the ring path does). -1 when there was none to read. */
static int drain_one(struct link_dir *d, uint32_t max_frame)
{
	static uint8_t scratch[65536];
	struct sockaddr_ll sll;
	socklen_t sll_len = sizeof(sll);
	int r = (int)recvfrom(d->rx_fd, scratch, sizeof(scratch), MSG_DONTWAIT | MSG_TRUNC,
			      (struct sockaddr *)&sll, &sll_len);
	int oversize = r > (int)max_frame;

	if (r < 0) {
		count_receive_error(d);
		return -1;
	}
	if (sll.sll_pkttype == PACKET_OUTGOING) {
		d->rx_outgoing++;
		return 0;
	}
	if (oversize)
		d->rx_oversize++;
	else
		d->rx_no_buffer++;
	dir_capture_discard(d, now_ns(), scratch, r < (int)sizeof(scratch) ? (uint32_t)r : sizeof(scratch),
			    (uint32_t)r, oversize ? "rx_oversize" : "rx_no_buffer");
	return 0;
}

/* recvmmsg: one system call per batch, the kernel copying into pool frames. */
static int receive_mmsg(struct link_dir *d, int budget)
{
	struct pkt_pool *pool = &d->link->pool;
	uint32_t max_frame = d->link->cfg.mtu + ETH_HDR_LEN + VLAN_TAG_LEN;
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	struct sockaddr_ll from[RX_BATCH];
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(struct tpacket_auxdata))];
	} aux[RX_BATCH];
	struct pkt *batch[RX_BATCH];
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
		if (n == 0) { /* pool exhausted */
			if (drain_one(d, max_frame) < 0)
				return total;
			total++;
			continue;
		}
		for (int i = 0; i < n; i++) {
			memset(&msgs[i], 0, sizeof(msgs[i]));
			msgs[i].msg_hdr.msg_name = &from[i];
			msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = aux[i].buf;
			msgs[i].msg_hdr.msg_controllen = sizeof(aux[i].buf);
		}
		r = recvmmsg(d->rx_fd, msgs, (unsigned)n, MSG_DONTWAIT | MSG_TRUNC, NULL);
		t = now_ns();
		if (r < 0) {
			count_receive_error(d);
			r = 0;
		}
		dir_serve(d, t);
		for (int i = 0; i < r; i++) {
			struct cmsghdr *c;
			int tagged = 0;
			uint16_t tpid = 0, tci = 0;

			if (from[i].sll_pkttype == PACKET_OUTGOING) {
				d->rx_outgoing++;
				pool_put(pool, batch[i]);
				continue;
			}
			for (c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
				struct tpacket_auxdata a;

				if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA ||
				    c->cmsg_len < CMSG_LEN(sizeof(a)))
					continue;
				memcpy(&a, CMSG_DATA(c), sizeof(a));
				tagged = !!(a.tp_status & TP_STATUS_VLAN_VALID);
				tpid = a.tp_status & TP_STATUS_VLAN_TPID_VALID ? a.tp_vlan_tpid : 0;
				tci = a.tp_vlan_tci;
			}
			accept_frame(d, batch[i], msgs[i].msg_len, tagged, tpid, tci, t);
		}
		for (int i = r; i < n; i++)
			pool_put(pool, batch[i]);
		total += r;
		if (r < n)
			break; /* drained */
	}
	return total;
}

int port_receive(struct link_dir *d, int budget)
{
	return d->ring.map ? receive_ring(d, budget) : receive_mmsg(d, budget);
}
