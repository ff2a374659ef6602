/* frame.h - what ckcd-link reads from a frame: is it a valid Ethernet frame
 * for the configured MTU, which flow it belongs to (hash of the 5-tuple),
 * which host pair (hash of the addresses: hdcodel key=host) and its DSCP (for
 * the bands classifier). Pure functions, unit-tested by frame_test.c. */
#ifndef CKCD_LINK_FRAME_H
#define CKCD_LINK_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define ETH_HDR_LEN 14u
#define VLAN_TAG_LEN 4u

enum frame_verdict {
	FRAME_OK = 0,
	FRAME_RUNT,     /* shorter than an Ethernet header */
	FRAME_OVERSIZE, /* longer than MTU + Ethernet header (+ one VLAN tag) */
};

/* The flow a frame belongs to, as far as the frame tells. */
struct flow_key {
	uint8_t family;   /* 0 (not IP), 4 or 6 */
	uint8_t l4_proto; /* IP protocol number; 0 when not IP */
	uint16_t ethertype;
	uint16_t sport, dport; /* 0 when the protocol has no ports or a later fragment */
	uint8_t src[16], dst[16]; /* IP addresses, or MACs (6 bytes) for non-IP */
};

struct frame_info {
	struct flow_key key;
	uint32_t flow_hash;
	uint32_t host_hash; /* the source and destination addresses only: the host pair */
	uint8_t dscp; /* 0 for non-IP */
	uint8_t ecn;  /* the IP header's ECN field (enum aqm_ecn); 0 (Not-ECT) for non-IP */
};

/* Length check only; len is the length the socket reported (MSG_TRUNC). */
enum frame_verdict frame_check(const uint8_t *frame, uint32_t len, uint32_t mtu);

/* The kernel hands a received frame's 802.1Q tag apart from its bytes
 * (VLAN acceleration: the packet ring's tp_vlan_tci, or PACKET_AUXDATA):
 * this puts it back after the two MACs, as it was on the wire. len is the
 * frame's length without the tag and cap the buffer's size; returns the
 * tagged length, or 0 (frame untouched) when the frame is shorter than two
 * MACs or the tag would not fit. */
uint32_t frame_put_vlan_tag(uint8_t *frame, uint32_t len, uint32_t cap, uint16_t tpid,
			    uint16_t tci);

/* Fills *out from a frame that passed frame_check. hash_seed keys the flow
 * hash so that flows do not collide the same way in every run. */
void frame_classify(const uint8_t *frame, uint32_t len, uint64_t hash_seed,
		    struct frame_info *out);

/* The host pair's hash frame_classify() gives a frame of this key's
 * family, source and destination (the other fields are not read): how
 * host_key.c names a host pair in a spec. */
uint32_t frame_host_hash(uint64_t hash_seed, const struct flow_key *key);

/* Sets the ECN field of an IPv4 or IPv6 frame (behind at most one VLAN tag)
 * to CE, as the core's mark asks (RFC 3168); an IPv4 header's checksum is
 * updated incrementally (RFC 1624). Returns 1 when the frame is CE now, 0
 * when it is not IP or Not-ECT (left untouched). Never changes the length. */
int frame_set_ce(uint8_t *frame, uint32_t len);

/* "tcp 10.0.0.1:40000>10.0.0.2:5201", "ipv6 proto 58 ...", "eth 0x88cc
 * 02:..>..". Returns the length written. */
size_t flow_key_format(const struct flow_key *key, char *buf, size_t len);

#endif
