/* frame.c - frame validation, flow hashing and DSCP extraction for ckcd-link. */
#include "frame.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define ETHERTYPE_IPV4 0x0800u
#define ETHERTYPE_IPV6 0x86ddu
#define ETHERTYPE_VLAN 0x8100u
#define ETHERTYPE_QINQ 0x88a8u

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static int is_vlan(uint16_t ethertype)
{
	return ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ;
}

enum frame_verdict frame_check(const uint8_t *frame, uint32_t len, uint32_t mtu)
{
	uint32_t max = mtu + ETH_HDR_LEN;

	if (len < ETH_HDR_LEN)
		return FRAME_RUNT;
	if (len > max) {
		/* One 802.1Q tag rides on top of the MTU, as on a real port (and
		 * as AF_PACKET sends it: an 802.1ad outer tag gets no allowance). */
		if (len > max + VLAN_TAG_LEN || rd16(frame + 12) != ETHERTYPE_VLAN)
			return FRAME_OVERSIZE;
	}
	return FRAME_OK;
}

uint32_t frame_put_vlan_tag(uint8_t *frame, uint32_t len, uint32_t cap, uint16_t tpid,
			    uint16_t tci)
{
	if (len < 12 || cap < VLAN_TAG_LEN || len > cap - VLAN_TAG_LEN)
		return 0;
	memmove(frame + 12 + VLAN_TAG_LEN, frame + 12, len - 12);
	frame[12] = (uint8_t)(tpid >> 8);
	frame[13] = (uint8_t)tpid;
	frame[14] = (uint8_t)(tci >> 8);
	frame[15] = (uint8_t)tci;
	return len + VLAN_TAG_LEN;
}

static int l4_has_ports(uint8_t proto)
{
	return proto == 6 || proto == 17 || proto == 132 || proto == 136; /* tcp udp sctp udplite */
}

/* The parsers walk a header by offsets into the bytes left, never by a pointer
 * that could step past the frame's end (forming one is undefined in C). */

static void parse_ports(const uint8_t *l4, size_t avail, struct flow_key *k)
{
	if (l4_has_ports(k->l4_proto) && avail >= 4) {
		k->sport = rd16(l4);
		k->dport = rd16(l4 + 2);
	}
}

static void parse_ipv4(const uint8_t *ip, size_t avail, struct frame_info *out)
{
	struct flow_key *k = &out->key;
	size_t ihl;

	if (avail < 20 || ip[0] >> 4 != 4)
		return;
	ihl = (ip[0] & 0x0fu) * 4u;
	if (ihl < 20 || avail < ihl)
		return;
	k->family = 4;
	out->dscp = ip[1] >> 2;
	out->ecn = ip[1] & 3u;
	k->l4_proto = ip[9];
	memcpy(k->src, ip + 12, 4);
	memcpy(k->dst, ip + 16, 4);
	if ((rd16(ip + 6) & 0x1fffu) == 0) /* later fragments carry no ports */
		parse_ports(ip + ihl, avail - ihl, k);
}

static void parse_ipv6(const uint8_t *ip, size_t avail, struct frame_info *out)
{
	struct flow_key *k = &out->key;
	size_t off = 40; /* of the next header, from ip */
	uint8_t nh;
	int hops;

	if (avail < 40 || ip[0] >> 4 != 6)
		return;
	k->family = 6;
	out->dscp = (uint8_t)(((ip[0] & 0x0fu) << 4 | ip[1] >> 4) >> 2);
	out->ecn = (ip[1] >> 4) & 3u; /* the traffic class's low two bits */
	memcpy(k->src, ip + 8, 16);
	memcpy(k->dst, ip + 24, 16);
	nh = ip[6];
	/* Walk hop-by-hop, routing, fragment and destination options headers. */
	for (hops = 0; hops < 8; hops++) {
		const uint8_t *h = ip + off;

		if (nh != 0 && nh != 43 && nh != 60 && nh != 44)
			break;
		if (avail - off < 8)
			break;
		if (nh == 44 && (rd16(h + 2) & 0xfff8u) != 0) { /* not the first fragment */
			k->l4_proto = h[0];
			return;
		}
		off += nh == 44 ? 8u : (h[1] + 1u) * 8u; /* the fragment header has no length field */
		nh = h[0];
		if (off > avail)
			return;
	}
	k->l4_proto = nh;
	parse_ports(ip + off, avail - off, k);
}

/* Keyed mixing of 64-bit words (multiply / xor-shift rounds). */
static uint64_t mix(uint64_t h, uint64_t w)
{
	h ^= w;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 32;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 29;
	return h;
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* A 32-bit hash of one word and the key's two addresses. */
static uint32_t addr_hash(uint64_t seed, uint64_t word, const struct flow_key *k)
{
	uint64_t h = mix(seed, word);

	h = mix(h, load64(k->src));
	h = mix(h, load64(k->src + 8));
	h = mix(h, load64(k->dst));
	h = mix(h, load64(k->dst + 8));
	return (uint32_t)(h ^ h >> 32);
}

void frame_classify(const uint8_t *frame, uint32_t len, uint64_t hash_seed,
		    struct frame_info *out)
{
	size_t l3 = ETH_HDR_LEN; /* offset of the network header */
	struct flow_key *k = &out->key;
	uint16_t ethertype;

	memset(out, 0, sizeof(*out));
	if (len < ETH_HDR_LEN) /* frame_check refuses these; stay safe if called anyway */
		return;
	ethertype = rd16(frame + 12);
	if (is_vlan(ethertype) && len - l3 >= 4) {
		ethertype = rd16(frame + l3 + 2);
		l3 += 4;
	}
	k->ethertype = ethertype;
	if (ethertype == ETHERTYPE_IPV4)
		parse_ipv4(frame + l3, len - l3, out);
	else if (ethertype == ETHERTYPE_IPV6)
		parse_ipv6(frame + l3, len - l3, out);

	if (k->family == 0) {
		/* Not IP (or a truncated IP header): the flow is the MAC pair
		 * and the ethertype. */
		memset(k, 0, sizeof(*k));
		k->ethertype = ethertype;
		memcpy(k->dst, frame, 6);
		memcpy(k->src, frame + 6, 6);
	}
	out->flow_hash = addr_hash(hash_seed, (uint64_t)k->family << 56 | (uint64_t)k->l4_proto << 48 |
					     (uint64_t)k->ethertype << 32 | (uint64_t)k->sport << 16 | k->dport, k);
	/* The host pair: the addresses alone (seed 003 keys a connection by
	 * "MAC addresses of the sender and the receiver"; across our switches
	 * the IP pair names the same two hosts, and still does past a router).
	 * A seed of its own keeps it apart from the flow hash of the same pair
	 * (frame_host_hash). */
	out->host_hash = frame_host_hash(hash_seed, k);
}

int frame_set_ce(uint8_t *frame, uint32_t len)
{
	size_t l3 = ETH_HDR_LEN;
	uint16_t ethertype;
	uint8_t *ip;

	if (len < ETH_HDR_LEN)
		return 0;
	ethertype = rd16(frame + 12);
	if (is_vlan(ethertype) && len - l3 >= 4) {
		ethertype = rd16(frame + l3 + 2);
		l3 += 4;
	}
	ip = frame + l3;
	if (ethertype == ETHERTYPE_IPV4 && len - l3 >= 20 && ip[0] >> 4 == 4) {
		uint32_t old = rd16(ip), new, sum;

		if ((ip[1] & 3u) == 0)
			return 0;
		ip[1] |= 3u;
		new = rd16(ip);
		/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') in one's complement */
		sum = (~rd16(ip + 10) & 0xffffu) + (~old & 0xffffu) + new;
		sum = (sum & 0xffffu) + (sum >> 16);
		sum = (sum & 0xffffu) + (sum >> 16);
		ip[10] = (uint8_t)(~sum >> 8);
		ip[11] = (uint8_t)~sum;
		return 1;
	}
	if (ethertype == ETHERTYPE_IPV6 && len - l3 >= 40 && ip[0] >> 4 == 6) {
		if (((ip[1] >> 4) & 3u) == 0)
			return 0;
		ip[1] |= 0x30u;
		return 1;
	}
	return 0;
}

uint32_t frame_host_hash(uint64_t hash_seed, const struct flow_key *k)
{
	return addr_hash(hash_seed ^ 0x686f7374ull /* "host" */, (uint64_t)k->family << 56, k);
}

static const char *proto_name(uint8_t proto)
{
	switch (proto) {
	case 1: return "icmp";
	case 6: return "tcp";
	case 17: return "udp";
	case 58: return "icmp6";
	case 132: return "sctp";
	default: return NULL;
	}
}

size_t flow_key_format(const struct flow_key *k, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN], proto[16];
	const char *pn = proto_name(k->l4_proto);
	int n;

	if (len == 0)
		return 0;
	if (k->family == 0) {
		n = snprintf(buf, len, "eth 0x%04x %02x:%02x:%02x:%02x:%02x:%02x>%02x:%02x:%02x:%02x:%02x:%02x",
			     k->ethertype, k->src[0], k->src[1], k->src[2], k->src[3], k->src[4], k->src[5],
			     k->dst[0], k->dst[1], k->dst[2], k->dst[3], k->dst[4], k->dst[5]);
	} else {
		int af = k->family == 4 ? AF_INET : AF_INET6;
		inet_ntop(af, k->src, a, sizeof(a));
		inet_ntop(af, k->dst, b, sizeof(b));
		if (pn)
			snprintf(proto, sizeof(proto), "%s", pn);
		else
			snprintf(proto, sizeof(proto), "proto%u", k->l4_proto);
		if (l4_has_ports(k->l4_proto) && (k->sport || k->dport)) {
			const char *fmt = k->family == 4 ? "%s %s:%u>%s:%u" : "%s [%s]:%u>[%s]:%u";
			n = snprintf(buf, len, fmt, proto, a, k->sport, b, k->dport);
		} else {
			n = snprintf(buf, len, "%s %s>%s", proto, a, b);
		}
	}
	if (n < 0)
		n = 0;
	return (size_t)n < len ? (size_t)n : len - 1;
}
