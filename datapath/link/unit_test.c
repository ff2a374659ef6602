/* unit_test.c - unit tests of ckcd-link's pure parts: frame validation and
 * classification, host pairs named in a spec, the flat JSON request parser, rate/delay parsing, and the
 * random numbers of the core's userspace host (host/aqm_host.c), the
 * delivery-opportunity trace (trace.c), the loss models (loss.c) and the
 * capture's pcapng writer (capture.c, into a temporary directory).
 * Prints one line per failed check; exit status 0 when all pass. Run by
 * tests/link/test_link_units.py. */
#include "capture.h"
#include "frame.h"
#include "host_key.h"
#include "host_delay.h"
#include "json.h"
#include "loss.h"
#include "trace.h"
#include "units.h"
#include "../host/aqm_host.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond)                                                                      \
	do {                                                                             \
		checks++;                                                                \
		if (!(cond)) {                                                           \
			failures++;                                                      \
			printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);            \
		}                                                                        \
	} while (0)

static size_t eth(uint8_t *f, uint16_t ethertype)
{
	memset(f, 0, 14);
	memcpy(f, "\x02\x00\x00\x00\x00\x02", 6);
	memcpy(f + 6, "\x02\x00\x00\x00\x00\x01", 6);
	f[12] = (uint8_t)(ethertype >> 8);
	f[13] = (uint8_t)ethertype;
	return 14;
}

static size_t ipv4_tcp(uint8_t *f, uint8_t tos, uint16_t sport, uint16_t dport, uint16_t frag)
{
	size_t o = eth(f, 0x0800);
	uint8_t *ip = f + o;

	memset(ip, 0, 40);
	ip[0] = 0x45;
	ip[1] = tos;
	ip[6] = (uint8_t)(frag >> 8);
	ip[7] = (uint8_t)frag;
	ip[9] = 6;
	memcpy(ip + 12, "\x0a\x00\x00\x01", 4);
	memcpy(ip + 16, "\x0a\x00\x00\x02", 4);
	ip[20] = (uint8_t)(sport >> 8);
	ip[21] = (uint8_t)sport;
	ip[22] = (uint8_t)(dport >> 8);
	ip[23] = (uint8_t)dport;
	return o + 40;
}

static void test_frame_check(void)
{
	uint8_t f[9100];

	memset(f, 0, sizeof(f));
	eth(f, 0x0800);
	CHECK(frame_check(f, 0, 1500) == FRAME_RUNT);
	CHECK(frame_check(f, 13, 1500) == FRAME_RUNT);
	CHECK(frame_check(f, 14, 1500) == FRAME_OK);
	CHECK(frame_check(f, 1514, 1500) == FRAME_OK);
	CHECK(frame_check(f, 1515, 1500) == FRAME_OVERSIZE);
	CHECK(frame_check(f, 1518, 1500) == FRAME_OVERSIZE); /* untagged: no VLAN allowance */
	CHECK(frame_check(f, 65535, 1500) == FRAME_OVERSIZE);
	eth(f, 0x8100);
	CHECK(frame_check(f, 1518, 1500) == FRAME_OK);
	CHECK(frame_check(f, 1519, 1500) == FRAME_OVERSIZE);
	CHECK(frame_check(f, 9014, 9000) == FRAME_OK);
	eth(f, 0x88a8); /* 802.1ad: no allowance (the kernel would refuse to send it) */
	CHECK(frame_check(f, 1514, 1500) == FRAME_OK);
	CHECK(frame_check(f, 1518, 1500) == FRAME_OVERSIZE);
}

/* A tag the kernel took off (VLAN acceleration) goes back where it was. */
static void test_put_vlan_tag(void)
{
	uint8_t f[64];

	for (int i = 0; i < 20; i++)
		f[i] = (uint8_t)i; /* MACs 0..11, ethertype 12,13, payload 14.. */
	CHECK(frame_put_vlan_tag(f, 20, sizeof(f), 0x8100, 0x2005) == 24);
	CHECK(f[11] == 11 && f[12] == 0x81 && f[13] == 0x00 && f[14] == 0x20 && f[15] == 0x05);
	CHECK(f[16] == 12 && f[17] == 13 && f[23] == 19);
	/* No room for the tag, or no MACs to put it after: untouched. */
	CHECK(frame_put_vlan_tag(f, 61, sizeof(f), 0x8100, 1) == 0);
	CHECK(frame_put_vlan_tag(f, 60, sizeof(f), 0x88a8, 1) == 64);
	CHECK(frame_put_vlan_tag(f, 11, sizeof(f), 0x8100, 1) == 0);
	CHECK(frame_put_vlan_tag(f, 2, 3, 0x8100, 1) == 0);
}

/* --host-delay: ADDR=DUR parsed and refused like the other durations, and a
 * frame matched by its source address only. */
static void test_host_delay(void)
{
	struct host_delay t[HOST_DELAY_MAX] = {0}, extra;
	struct flow_key k;
	char err[256];
	unsigned n = 0;

	CHECK(host_delay_parse("10.0.0.1=40ms", t, n, &t[n], err, sizeof(err)) == 0);
	CHECK(t[0].family == 4 && t[0].delay_ns == 40000000ull && strcmp(t[0].addr_text, "10.0.0.1") == 0);
	n++;
	CHECK(host_delay_parse("fd00::2=2.5", t, n, &t[n], err, sizeof(err)) == 0);
	CHECK(t[1].family == 6 && t[1].delay_ns == 2500000ull);
	n++;
	CHECK(host_delay_parse("10.0.0.1=5ms", t, n, &t[n], err, sizeof(err)) < 0 && strstr(err, "twice"));
	CHECK(host_delay_parse("10.0.0.300=5ms", t, n, &t[n], err, sizeof(err)) < 0 && strstr(err, "address"));
	CHECK(host_delay_parse("10.0.0.3", t, n, &t[n], err, sizeof(err)) < 0 && strstr(err, "ADDR=DELAY"));
	CHECK(host_delay_parse("10.0.0.3=11s", t, n, &t[n], err, sizeof(err)) < 0);
	CHECK(host_delay_parse("10.0.0.3=soon", t, n, &t[n], err, sizeof(err)) < 0);
	while (n < HOST_DELAY_MAX) {
		char arg[32];
		snprintf(arg, sizeof(arg), "10.1.0.%u=1ms", n);
		CHECK(host_delay_parse(arg, t, n, &t[n], err, sizeof(err)) == 0);
		n++;
	}
	CHECK(host_delay_parse("10.2.0.1=1ms", t, n, &extra, err, sizeof(err)) < 0 && strstr(err, "at most"));
	CHECK(host_delay_parse("::ffff:10.0.0.9=1ms", t, 0, &extra, err, sizeof(err)) < 0 &&
	      strstr(err, "IPv4-mapped"));

	memset(&k, 0, sizeof(k));
	k.family = 4;
	memcpy(k.src, (uint8_t[]){10, 0, 0, 1}, 4);
	CHECK(host_delay_find(t, n, &k) == 0);
	memcpy(k.dst, k.src, 4); /* the destination does not count */
	memcpy(k.src, (uint8_t[]){10, 0, 0, 9}, 4);
	CHECK(host_delay_find(t, n, &k) == -1);
	k.family = 0; /* not IP (ARP): never delayed */
	memcpy(k.src, (uint8_t[]){10, 0, 0, 1}, 4);
	CHECK(host_delay_find(t, n, &k) == -1);
	k.family = 6;
	memset(k.src, 0, 16);
	k.src[0] = 0xfd;
	k.src[15] = 2;
	CHECK(host_delay_find(t, n, &k) == 1);
}

static void test_classify(void)
{
	uint8_t f[256], g[256];
	struct frame_info a, b;
	char s[160];
	size_t n;

	n = ipv4_tcp(f, 0xb8 /* EF = 46 */, 40000, 5201, 0);
	frame_classify(f, (uint32_t)n, 7, &a);
	CHECK(a.key.family == 4);
	CHECK(a.key.l4_proto == 6);
	CHECK(a.key.sport == 40000 && a.key.dport == 5201);
	CHECK(a.dscp == 46);
	flow_key_format(&a.key, s, sizeof(s));
	CHECK(strcmp(s, "tcp 10.0.0.1:40000>10.0.0.2:5201") == 0);

	/* Same 5-tuple, different TOS: same flow. Different port: different flow. */
	ipv4_tcp(g, 0, 40000, 5201, 0);
	frame_classify(g, (uint32_t)n, 7, &b);
	CHECK(a.flow_hash == b.flow_hash);
	ipv4_tcp(g, 0, 40001, 5201, 0);
	frame_classify(g, (uint32_t)n, 7, &b);
	CHECK(a.flow_hash != b.flow_hash);
	/* Another flow of the same two hosts: the same host pair. */
	CHECK(a.host_hash == b.host_hash && a.host_hash != a.flow_hash);
	g[ETH_HDR_LEN + 19] = 3; /* to 10.0.0.3: another host pair */
	frame_classify(g, (uint32_t)n, 7, &b);
	CHECK(a.host_hash != b.host_hash);
	/* The seed keys the hash. */
	frame_classify(f, (uint32_t)n, 8, &b);
	CHECK(a.flow_hash != b.flow_hash);

	/* A later fragment has no ports. */
	ipv4_tcp(g, 0, 40000, 5201, 0x0010);
	frame_classify(g, (uint32_t)n, 7, &b);
	CHECK(b.key.sport == 0 && b.key.dport == 0 && b.key.l4_proto == 6);

	/* Truncated IPv4 header: hashed as non-IP. */
	frame_classify(f, 20, 7, &b);
	CHECK(b.key.family == 0 && b.dscp == 0);

	/* VLAN-tagged IPv4. */
	memset(g, 0, sizeof(g));
	eth(g, 0x8100);
	g[14] = 0x00;
	g[15] = 0x05;
	g[16] = 0x08;
	g[17] = 0x00;
	memcpy(g + 18, f + 14, 40);
	frame_classify(g, 58, 7, &b);
	CHECK(b.key.family == 4 && b.key.sport == 40000 && b.dscp == 46);

	/* IPv6 UDP behind a hop-by-hop header, traffic class 0x28 (DSCP 10). */
	memset(g, 0, sizeof(g));
	n = eth(g, 0x86dd);
	g[n + 0] = 0x60 | (0x28 >> 4);
	g[n + 1] = (0x28 & 0x0f) << 4;
	g[n + 6] = 0;   /* hop-by-hop */
	g[n + 8 + 15] = 1;
	g[n + 24 + 15] = 2;
	g[n + 40] = 17; /* next: udp */
	g[n + 41] = 0;  /* 8 bytes */
	g[n + 48] = 0x13;
	g[n + 49] = 0x88; /* 5000 */
	g[n + 50] = 0x00;
	g[n + 51] = 0x35; /* 53 */
	frame_classify(g, (uint32_t)(n + 56), 7, &b);
	CHECK(b.key.family == 6 && b.key.l4_proto == 17);
	CHECK(b.key.sport == 5000 && b.key.dport == 53);
	CHECK(b.dscp == 10);
	flow_key_format(&b.key, s, sizeof(s));
	CHECK(strcmp(s, "udp [::1]:5000>[::2]:53") == 0);

	/* IPv6 first fragment (header 44, no length field) then TCP: ports read. */
	memset(g, 0, sizeof(g));
	n = eth(g, 0x86dd);
	g[n + 0] = 0x60;
	g[n + 6] = 44;
	g[n + 40] = 6;  /* next: tcp; offset 0: the first fragment */
	g[n + 48] = 0x13;
	g[n + 49] = 0x88;
	frame_classify(g, (uint32_t)(n + 60), 7, &b);
	CHECK(b.key.l4_proto == 6 && b.key.sport == 5000);
	/* ... a later fragment: the protocol, no ports. */
	g[n + 42] = 0x05;
	frame_classify(g, (uint32_t)(n + 60), 7, &b);
	CHECK(b.key.l4_proto == 6 && b.key.sport == 0);
	/* An options header whose length runs past the frame's end: no ports, no read past it. */
	memset(g, 0, sizeof(g));
	n = eth(g, 0x86dd);
	g[n + 0] = 0x60;
	g[n + 6] = 60;
	g[n + 40] = 6;
	g[n + 41] = 200; /* 1608 bytes */
	frame_classify(g, (uint32_t)(n + 48), 7, &b);
	CHECK(b.key.family == 6 && b.key.sport == 0 && b.key.dport == 0);
	/* Shorter than an Ethernet header (frame_check refuses it first): an empty key. */
	frame_classify(g, 5, 7, &b);
	CHECK(b.key.family == 0 && b.key.ethertype == 0);

	/* Non-IP: MACs and ethertype. */
	memset(g, 0, sizeof(g));
	eth(g, 0x88cc);
	frame_classify(g, 60, 7, &b);
	CHECK(b.key.family == 0 && b.key.ethertype == 0x88cc);
	flow_key_format(&b.key, s, sizeof(s));
	CHECK(strcmp(s, "eth 0x88cc 02:00:00:00:00:01>02:00:00:00:00:02") == 0);
}

static void test_json(void)
{
	struct jfield f[JSON_MAX_FIELDS];
	char err[256], line[512];
	const struct jfield *x;
	int n;

	strcpy(line, " {\"cmd\": \"set_qdisc\", \"dir\":\"ab\", \"spec\":\"ckcd limit=80\\t\\u0041\", "
		     "\"n\": 12.5e1, \"b\": true, \"z\": null} ");
	n = json_parse_flat(line, f, JSON_MAX_FIELDS, err, sizeof(err));
	CHECK(n == 6);
	x = json_get(f, n, "spec");
	CHECK(x && x->type == J_STR && strcmp(x->str, "ckcd limit=80\tA") == 0);
	x = json_get(f, n, "n");
	CHECK(x && x->type == J_NUM && x->num == 125.0);
	x = json_get(f, n, "b");
	CHECK(x && x->type == J_BOOL && x->boolean == 1);
	x = json_get(f, n, "z");
	CHECK(x && x->type == J_NULL);
	CHECK(json_get(f, n, "missing") == NULL);

	strcpy(line, "{}");
	CHECK(json_parse_flat(line, f, JSON_MAX_FIELDS, err, sizeof(err)) == 0);

	static const char *const bad[] = {
		"", "garbage", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x",
		"{\"a\":{\"b\":1}}", "{\"a\":[1]}", "{\"a\":0x10}", "{\"a\":inf}", "{\"a\":\"x}",
		"{\"a\":1,\"a\":2}", "{\"a\":\"\\q\"}", "{\"a\":\"\\u00e9\"}", "{a:1}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(line, bad[i]);
		n = json_parse_flat(line, f, JSON_MAX_FIELDS, err, sizeof(err));
		if (n >= 0)
			printf("FAIL json accepted: %s\n", bad[i]);
		checks++;
		failures += n >= 0;
	}

	struct jbuf b;
	jb_init(&b);
	jb_obj_open(&b);
	jb_kstr(&b, "s", "a\"b\\c\n");
	jb_ku64(&b, "n", 5);
	jb_key(&b, "arr");
	jb_arr_open(&b);
	jb_u64(&b, 1);
	jb_u64(&b, 2);
	jb_obj_open(&b);
	jb_obj_close(&b);
	jb_arr_close(&b);
	jb_obj_close(&b);
	CHECK(strcmp(b.p, "{\"s\":\"a\\\"b\\\\c\\u000a\",\"n\":5,\"arr\":[1,2,{}]}") == 0);
	jb_free(&b);
}

static void test_units(void)
{
	char err[256];
	uint64_t v;

	CHECK(parse_rate("50mbit", &v, err, sizeof(err)) == 0 && v == 50000000ull);
	CHECK(parse_rate("1.5gbit", &v, err, sizeof(err)) == 0 && v == 1500000000ull);
	CHECK(parse_rate("100000", &v, err, sizeof(err)) == 0 && v == 100000ull);
	CHECK(parse_rate("100G", &v, err, sizeof(err)) == 0 && v == 100000000000ull);
	CHECK(parse_rate("0", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("999", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("101gbit", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("50mbyte", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("-5mbit", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("fast", &v, err, sizeof(err)) < 0);
	CHECK(parse_rate("", &v, err, sizeof(err)) < 0);

	CHECK(parse_delay("10ms", &v, err, sizeof(err)) == 0 && v == 10000000ull);
	CHECK(parse_delay("10", &v, err, sizeof(err)) == 0 && v == 10000000ull);
	CHECK(parse_delay("250us", &v, err, sizeof(err)) == 0 && v == 250000ull);
	CHECK(parse_delay("0", &v, err, sizeof(err)) == 0 && v == 0);
	CHECK(parse_delay("10s", &v, err, sizeof(err)) == 0 && v == 10000000000ull);
	CHECK(parse_delay("10.001s", &v, err, sizeof(err)) < 0);
	CHECK(parse_delay("11s", &v, err, sizeof(err)) < 0);
	CHECK(parse_delay("5min", &v, err, sizeof(err)) < 0);
	CHECK(parse_delay("-1ms", &v, err, sizeof(err)) < 0);
	CHECK(parse_delay("nan", &v, err, sizeof(err)) < 0);

	CHECK(parse_uint("1500", 68, 9216, &v, err, sizeof(err)) == 0 && v == 1500);
	CHECK(parse_uint("67", 68, 9216, &v, err, sizeof(err)) < 0);
	CHECK(parse_uint("15x", 68, 9216, &v, err, sizeof(err)) < 0);
}

/* The host's stream is pinned: a replay's --seed must keep drawing the same
 * numbers from one release to the next, and the link's direction ab draws
 * what the replay draws for the same seed (both call aqm_rng_seed). The
 * expected values come from an independent implementation of splitmix64 and
 * xorshift128+ written from their published definitions. */
static void test_host_rng(void)
{
	struct aqm_rng a, b, zero;
	uint64_t sum = 0;
	int differ = 0;

	aqm_rng_seed(&a, 1);
	CHECK(aqm_rng_u32(&a) == 0x9890a08cu);
	CHECK(aqm_rng_u32(&a) == 0x91a18212u);
	CHECK(aqm_rng_u32(&a) == 0xd3e5dbe3u);
	aqm_rng_seed(&a, 7);
	aqm_rng_seed(&b, 8);
	for (int i = 0; i < 16; i++)
		differ += aqm_rng_u32(&a) != aqm_rng_u32(&b);
	CHECK(differ >= 15);
	aqm_rng_seed(&zero, 0);
	CHECK((zero.s[0] | zero.s[1]) != 0);
	/* uniform: the mean of 2^16 draws within 1 % of 2^31 (4.4 standard errors of 0.23 %) */
	for (int i = 0; i < 65536; i++)
		sum += aqm_rng_u32(&zero);
	CHECK(sum / 65536 > 2126008811u && sum / 65536 < 2168958484u);
}

/* hdcodel's Static baseline names its heavy host pair by address
 * (host_key.h): the number it becomes must be the host_hash frame_classify()
 * gives that pair's frames, under the same seed. */
static void test_host_key(void)
{
	uint8_t f[128];
	struct frame_info a;
	char out[256], err[256], want[256];
	size_t n = ipv4_tcp(f, 0, 40000, 5201, 0); /* 10.0.0.1 > 10.0.0.2 */

	frame_classify(f, (uint32_t)n, 7, &a);
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=10.0.0.1>10.0.0.2 key=host", 7, out,
			       sizeof(out), err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "hdcodel mode=static heavy_key=%u key=host", a.host_hash);
	CHECK(strcmp(out, want) == 0);
	/* The direction matters: the receiver's ACKs are another pair. */
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=10.0.0.2>10.0.0.1", 7, out, sizeof(out),
			       err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "hdcodel mode=static heavy_key=%u", a.host_hash);
	CHECK(strcmp(out, want) != 0);
	/* Inside a band, and last in the spec. */
	CHECK(host_key_resolve("bands weights=1,1|hdcodel mode=static heavy_key=10.0.0.1>10.0.0.2|droptail",
			       7, out, sizeof(out), err, sizeof(err)) == 0);
	snprintf(want, sizeof(want), "bands weights=1,1|hdcodel mode=static heavy_key=%u|droptail",
		 a.host_hash);
	CHECK(strcmp(out, want) == 0);
	/* Anything else is copied as it is, for the core to judge. */
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=42  p=0.5", 7, out, sizeof(out), err,
			       sizeof(err)) == 0);
	CHECK(strcmp(out, "hdcodel mode=static heavy_key=42  p=0.5") == 0);
	CHECK(host_key_resolve("codel xheavy_key=1>2", 7, out, sizeof(out), err, sizeof(err)) == 0);
	CHECK(strcmp(out, "codel xheavy_key=1>2") == 0);
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=fd00::1>fd00::2", 7, out, sizeof(out), err,
			       sizeof(err)) == 0);
	CHECK(strncmp(out, "hdcodel mode=static heavy_key=", 30) == 0 && out[30] >= '0' && out[30] <= '9');
	/* Refused, naming the parameter: a bad address, mixed families, no room. */
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=10.0.0.1>h3", 7, out, sizeof(out), err,
			       sizeof(err)) < 0);
	CHECK(strncmp(err, "heavy_key: '10.0.0.1>h3'", 24) == 0);
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=10.0.0.1>fd00::2", 7, out, sizeof(out), err,
			       sizeof(err)) < 0);
	CHECK(host_key_resolve("hdcodel mode=static heavy_key=10.0.0.1>10.0.0.2", 7, out, 20, err,
			       sizeof(err)) < 0);
	CHECK(strstr(err, "longer than 19 bytes") != NULL);
}

/* The IPv4 header checksum over ihl 32-bit words: 0xffff when right. */
static uint16_t ip_csum_fold(const uint8_t *ip)
{
	uint32_t sum = 0;

	for (int i = 0; i < (ip[0] & 0x0f) * 4; i += 2)
		sum += (uint32_t)ip[i] << 8 | ip[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static void ip_csum_set(uint8_t *ip)
{
	ip[10] = ip[11] = 0;
	uint16_t c = (uint16_t)~ip_csum_fold(ip);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
}

/* Rule: a CE mark sets the ECN field to 11 and nothing else, keeps an IPv4
 * header's checksum right (RFC 1624's incremental update, checked against a
 * full recomputation over many TOS/checksum values), never touches a
 * Not-ECT or non-IP frame, and never changes the length. */
static void test_set_ce(void)
{
	uint8_t f[64], before[64];
	struct frame_info fi;
	size_t n;

	for (unsigned tos = 0; tos < 256; tos++) {
		for (unsigned id = 0; id < 64; id++) {
			n = ipv4_tcp(f, (uint8_t)tos, 40000, 5201, 0);
			f[14 + 4] = (uint8_t)(id * 37);
			f[14 + 5] = (uint8_t)(id * 101);
			ip_csum_set(f + 14);
			CHECK(ip_csum_fold(f + 14) == 0xffff);
			memcpy(before, f, n);
			frame_classify(f, (uint32_t)n, 1, &fi);
			CHECK(fi.ecn == (tos & 3));
			if (!(tos & 3)) {
				CHECK(frame_set_ce(f, (uint32_t)n) == 0);
				CHECK(memcmp(f, before, n) == 0);
				continue;
			}
			CHECK(frame_set_ce(f, (uint32_t)n) == 1);
			CHECK(f[15] == (tos | 3));
			CHECK(ip_csum_fold(f + 14) == 0xffff);
			CHECK(memcmp(f, before, 15) == 0 && memcmp(f + 16, before + 16, 8) == 0 &&
			      memcmp(f + 26, before + 26, n - 26) == 0);
		}
	}
	/* behind an 802.1Q tag */
	n = ipv4_tcp(f, 0x02, 1, 2, 0);
	ip_csum_set(f + 14);
	CHECK(frame_put_vlan_tag(f, (uint32_t)n, sizeof(f), 0x8100, 7) == n + 4);
	CHECK(frame_set_ce(f, (uint32_t)n + 4) == 1 && (f[19] & 3) == 3 && ip_csum_fold(f + 18) == 0xffff);
	/* IPv6: traffic class 0xb9 (ECT(1)... 01) -> ...11, flow label untouched */
	memset(f, 0, sizeof(f));
	n = eth(f, 0x86dd);
	f[14] = 0x6b;
	f[15] = 0x95;
	f[16] = 0x43;
	f[20] = 0;
	memcpy(before, f, 64);
	frame_classify(f, 64, 1, &fi);
	CHECK(fi.ecn == 1);
	CHECK(frame_set_ce(f, 64) == 1 && f[14] == 0x6b && f[15] == 0xb5 && f[16] == 0x43);
	f[15] = 0x85; /* Not-ECT */
	CHECK(frame_set_ce(f, 64) == 0 && f[15] == 0x85);
	/* not IP: ARP, and a truncated IPv4 header */
	n = eth(f, 0x0806);
	memset(f + n, 0xff, 28);
	memcpy(before, f, 42);
	frame_classify(f, 42, 1, &fi);
	CHECK(fi.ecn == 0 && frame_set_ce(f, 42) == 0 && memcmp(f, before, 42) == 0);
	n = ipv4_tcp(f, 0x03, 1, 2, 0);
	CHECK(frame_set_ce(f, 14 + 19) == 0);
}

static int trace_from(struct trace *t, const char *text)
{
	char err[256];
	int r = trace_parse(t, text, strlen(text), err, sizeof(err));

	if (r == 0)
		trace_start(t, 1000000000ull);
	return r;
}

#define MS 1000000ull
#define T0 1000000000ull

/* Back-to-back frames of `bytes` for `periods` loops of the trace: the
 * rate they got, bit/s. */
static double trace_busy_rate(struct trace *t, uint32_t bytes, unsigned periods)
{
	uint64_t end = T0 + periods * t->period_ns, sent = 0, at = T0, done = T0;

	for (;;) {
		uint64_t start = trace_next(t, at);
		if (start >= end)
			break;
		done = trace_take(t, start, bytes);
		if (done > end)
			break;
		sent += bytes;
		at = done;
	}
	return (double)sent * 8 * 1e9 / (double)(end - T0);
}

static void test_trace(void)
{
	struct trace t;
	char err[256], text[65536];
	size_t len = 0;

	CHECK(trace_parse(&t, "abc\n", 4, err, sizeof(err)) < 0 && strstr(err, "line 1"));
	CHECK(trace_parse(&t, "5\n4\n", 4, err, sizeof(err)) < 0 && strstr(err, "line 2"));
	CHECK(trace_parse(&t, "\n0\n", 3, err, sizeof(err)) < 0 && strstr(err, "period"));
	CHECK(trace_parse(&t, "1 2\n", 4, err, sizeof(err)) < 0);
	CHECK(trace_parse(&t, "-1\n", 3, err, sizeof(err)) < 0);

	/* two opportunities a millisecond: 2 x 1504 x 8 bit/ms */
	CHECK(trace_from(&t, "1\n1\n") == 0 && t.n == 2 && t.period_ns == MS);
	CHECK(trace_rate_bps(&t) == 24064000);
	/* the first opportunity is at 1 ms; a 700-byte frame leaves in it, and
	 * so does the next one that starts then; a third needs the second */
	CHECK(trace_next(&t, T0) == T0 + MS);
	CHECK(trace_take(&t, T0 + MS, 700) == T0 + MS);
	CHECK(trace_next(&t, T0 + MS) == T0 + MS);
	CHECK(trace_take(&t, T0 + MS, 700) == T0 + MS);
	CHECK(trace_take(&t, trace_next(&t, T0 + MS), 700) == T0 + MS); /* 104 + 596 of the second */
	/* the second has 908 left: a full frame goes on into the next period's first */
	CHECK(trace_take(&t, trace_next(&t, T0 + MS), 1514) == T0 + 2 * MS);
	/* an idle link loses its opportunities: from 10.5 ms, the first is at 11 */
	CHECK(trace_next(&t, T0 + 10 * MS + MS / 2) == T0 + 11 * MS);
	trace_free(&t);

	/* Target: back to back, the rate delivered is the trace's average within
	 * 2 %: a sawtooth of 1..8 opportunities per ms over 8 ms, and 1514-byte
	 * frames that each end in a second opportunity. */
	for (unsigned ms = 1; ms <= 8; ms++)
		for (unsigned k = 0; k < ms; k++)
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%u\n", ms);
	CHECK(trace_from(&t, text) == 0);
	{
		double got = trace_busy_rate(&t, 1514, 1000), want = (double)trace_rate_bps(&t);
		CHECK(got > 0.98 * want && got < 1.02 * want);
	}
	trace_free(&t);
}

static void test_loss(void)
{
	struct loss l;
	char err[256];
	unsigned lost = 0, bursts = 0, prev = 0;
	const unsigned n = 1000000;

	memset(&l, 0, sizeof(l));
	CHECK(loss_parse("bernoulli", &l, err, sizeof(err)) < 0 && strstr(err, "needs p"));
	CHECK(loss_parse("bernoulli p=1.5", &l, err, sizeof(err)) < 0 && strstr(err, "p must be"));
	CHECK(loss_parse("bernoulli q=0.1", &l, err, sizeof(err)) < 0 && strstr(err, "unknown key 'q'"));
	CHECK(loss_parse("gilbert p=0.1", &l, err, sizeof(err)) < 0 && strstr(err, "p and r"));
	CHECK(loss_parse("gilbert p=0.1 r=0", &l, err, sizeof(err)) < 0 && strstr(err, "r must"));
	CHECK(loss_parse("uniform p=0.1", &l, err, sizeof(err)) < 0 && strstr(err, "model"));
	CHECK(l.kind == LOSS_NONE); /* untouched by the refusals */
	CHECK(loss_parse("none", &l, err, sizeof(err)) == 0 && l.kind == LOSS_NONE && !loss_drop(&l));

	/* Target: Bernoulli's loss rate within its binomial bound: 10^6 frames
	 * at p = 0.01, mean 10 000, sd 99.5; 5 sd either way. */
	CHECK(loss_parse("bernoulli p=0.01", &l, err, sizeof(err)) == 0 && fabs(loss_rate(&l) - 0.01) < 1e-9);
	loss_seed(&l, 42);
	for (unsigned i = 0; i < n; i++)
		lost += (unsigned)loss_drop(&l);
	CHECK(lost > 10000 - 500 && lost < 10000 + 500);

	/* Gilbert-Elliott, p = 0.01, r = 0.25: 0.01 / 0.26 = 3.85 % lost, in
	 * bursts of 1 / r = 4 frames. Successive frames are correlated (the
	 * chain's lag-1 correlation is 1 - p - r = 0.74), which widens the
	 * binomial sd by sqrt(1.74 / 0.26) = 2.6: 5 of those sd is 6.5 %. */
	CHECK(loss_parse("gilbert p=0.01 r=0.25", &l, err, sizeof(err)) == 0);
	CHECK(loss_rate(&l) > 0.0384 && loss_rate(&l) < 0.0385);
	loss_seed(&l, 42);
	lost = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned d = (unsigned)loss_drop(&l);
		lost += d;
		bursts += d && !prev;
		prev = d;
	}
	CHECK(lost > 0.935 * 38462 && lost < 1.065 * 38462);
	CHECK((double)lost / bursts > 3.6 && (double)lost / bursts < 4.4);
}

/* ---- the capture's pcapng (capture.c) ---------------------------------- */

#define CAP_TEST_SNAPLEN 64u
#define CAP_FILE_MAX (1u << 16)

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

/* The blocks of a file, each checked as a reader walks it: a total length
 * of at least 12, a multiple of 4, within the file and repeated as the
 * block's last word. Returns how many (their offsets in off), or -1 at the
 * first block that breaks a rule. */
static int walk_blocks(const uint8_t *f, size_t n, size_t *off, int max)
{
	size_t o = 0;
	int k = 0;

	while (o < n && k < max) {
		uint32_t len = n - o >= 8 ? rd32(f + o + 4) : 0;

		if (len < 12 || len % 4 || len > n - o || rd32(f + o + len - 4) != len)
			return -1;
		off[k++] = o;
		o += len;
	}
	return o == n ? k : -1;
}

/* An option's value in the options from o to end, NULL when absent; every
 * option's value padded to 32 bits. */
static const uint8_t *find_opt(const uint8_t *o, const uint8_t *end, uint16_t code, uint16_t *len)
{
	while (o + 4 <= end && rd16(o) != 0) {
		uint16_t l = rd16(o + 2);
		if (rd16(o) == code) {
			*len = l;
			return o + 4;
		}
		o += 4 + ((l + 3u) & ~3u);
	}
	return NULL;
}

static int opt_is(const uint8_t *blk, size_t opts_at, uint16_t code, const char *want)
{
	uint16_t len = 0;
	const uint8_t *v = find_opt(blk + opts_at, blk + rd32(blk + 4) - 4, code, &len);

	return v && len == strlen(want) && memcmp(v, want, len) == 0;
}

/* A capture written into dir: path set, NULL on failure. */
static struct capture *cap_open_in(const char *dir, const char *name, uint64_t max_bytes, char *path,
				   size_t pathlen)
{
	struct capture_config cc = {.snaplen = CAP_TEST_SNAPLEN, .max_bytes = max_bytes,
				    .dir_desc = {"la -> lb", "lb -> la"}};
	char err[256];

	snprintf(path, pathlen, "%s/%s", dir, name);
	cc.path = path;
	return capture_open(&cc, err, sizeof(err));
}

static void cap_put(struct capture *c, int dir, enum cap_event ev, uint64_t t, const uint8_t *frame,
		    uint32_t avail, uint32_t len, const char *reason, int64_t sojourn, int ce)
{
	struct cap_rec r = {.t_ns = t, .data = frame, .avail = avail, .len = len, .reason = reason,
			    .sojourn_ns = sojourn, .ce = ce};

	capture_record(c, dir, ev, &r);
}

/* Target: the header is a pcapng SHB (byte-order magic, version 1.0,
 * section length -1) and one IDB per direction and event, in the order of
 * their interface ids, named dir.event, Ethernet, the snap length given and
 * nanosecond timestamps (if_tsresol 9). */
static void check_capture_header(const uint8_t *f, const size_t *off)
{
	static const char *const names[2 * CAP_EVENTS] = {
		"ab.enqueue", "ab.drop", "ab.mark", "ab.dequeue", "ab.lost", "ab.discard",
		"ba.enqueue", "ba.drop", "ba.mark", "ba.dequeue", "ba.lost", "ba.discard"};

	CHECK(rd32(f) == 0x0A0D0D0Au && rd32(f + 8) == 0x1A2B3C4Du);
	CHECK(rd16(f + 12) == 1 && rd16(f + 14) == 0);
	CHECK(rd32(f + 16) == UINT32_MAX && rd32(f + 20) == UINT32_MAX);
	CHECK(opt_is(f, 24, 4, "ckcd-link"));
	for (int i = 0; i < 2 * CAP_EVENTS; i++) {
		const uint8_t *b = f + off[1 + i];
		uint16_t len = 0;
		const uint8_t *res = find_opt(b + 16, b + rd32(b + 4) - 4, 9, &len);

		CHECK(rd32(b) == 1 && rd16(b + 8) == 1 && rd32(b + 12) == CAP_TEST_SNAPLEN);
		CHECK(opt_is(b, 16, 2, names[i]));
		CHECK(res && len == 1 && res[0] == 9);
	}
}

/* Target: an EPB of interface ifid: its total length is exactly what its
 * parts take, the captured length is min(len, avail, snap length), the
 * original length the frame's, the data the frame's first bytes, the
 * padding zeros and the comment (or none) as given. Returns its time. */
static uint64_t check_epb(const uint8_t *b, uint32_t ifid, const uint8_t *frame, uint32_t caplen,
			  uint32_t len, const char *comment)
{
	uint32_t pad = (caplen + 3u) & ~3u, clen = comment ? (uint32_t)strlen(comment) : 0;
	uint32_t want = 32 + pad + (comment ? 4 + ((clen + 3u) & ~3u) + 4 : 0);
	int zeros = 1;

	CHECK(rd32(b) == 6 && rd32(b + 4) == want && rd32(b + 8) == ifid);
	CHECK(rd32(b + 20) == caplen && rd32(b + 24) == len);
	CHECK(memcmp(b + 28, frame, caplen) == 0);
	for (uint32_t i = caplen; i < pad; i++)
		zeros &= b[28 + i] == 0;
	CHECK(zeros);
	if (comment)
		CHECK(opt_is(b, 28 + pad, 1, comment));
	return (uint64_t)rd32(b + 12) << 32 | rd32(b + 16);
}

/* Target: records of every kind come out as written, in order: snap
 * length truncation with the original length kept, a frame shorter than
 * the snap length and one cut short where it was read, 32-bit padding, the
 * comments, and a dequeue's time less its enqueue's equal to its sojourn
 * to the ns. A file with no record is the header alone. */
static void test_capture_layout(const char *dir)
{
	static uint8_t f[CAP_FILE_MAX];
	uint8_t frame[2000];
	size_t off[32], n;
	char path[256];
	struct capture_stats st;
	struct capture *c = cap_open_in(dir, "layout.pcapng", 1u << 20, path, sizeof(path));
	uint64_t t0 = 5000000000ull, enq, deq;

	for (unsigned i = 0; i < sizeof(frame); i++)
		frame[i] = (uint8_t)(i * 7 + 1);
	CHECK(c != NULL);
	if (!c)
		return;
	cap_put(c, 0, CAP_ENQUEUE, t0, frame, 100, 100, NULL, -1, 0);
	cap_put(c, 0, CAP_DEQUEUE, t0 + 1234567, frame, 100, 100, NULL, 1234567, 1);
	cap_put(c, 0, CAP_DROP, t0 + 1234567, frame, 61, 61, "overflow", -1, 0);
	cap_put(c, 1, CAP_DISCARD, t0 + 2000000, frame, 50, 2000, "rx_oversize", -1, 0);
	capture_close(c);
	capture_get_stats(c, &st);
	capture_free(c);
	n = slurp(path, f, sizeof(f));
	unlink(path);
	CHECK(walk_blocks(f, n, off, 32) == 1 + 2 * CAP_EVENTS + 4);
	CHECK(st.bytes == n && st.skipped == 0 && st.overrun == 0 && st.failed == 0 && st.error == 0);
	CHECK(st.records[0][CAP_ENQUEUE] == 1 && st.records[0][CAP_DEQUEUE] == 1 && st.records[0][CAP_DROP] == 1);
	CHECK(st.records[1][CAP_DISCARD] == 1 && st.records[1][CAP_ENQUEUE] == 0);
	if (walk_blocks(f, n, off, 32) != 1 + 2 * CAP_EVENTS + 4)
		return;
	check_capture_header(f, off);
	enq = check_epb(f + off[13], CAP_ENQUEUE, frame, CAP_TEST_SNAPLEN, 100, NULL);
	deq = check_epb(f + off[14], CAP_DEQUEUE, frame, CAP_TEST_SNAPLEN, 100, "sojourn_ns=1234567 ce=1");
	check_epb(f + off[15], CAP_DROP, frame, 61, 61, "reason=overflow");
	check_epb(f + off[16], CAP_EVENTS + CAP_DISCARD, frame, 50, 2000, "reason=rx_oversize");
	CHECK(deq - enq == 1234567);
}

/* Target: a capture no frame passed through is a valid file of the header
 * blocks alone. */
static void test_capture_empty(const char *dir)
{
	static uint8_t f[CAP_FILE_MAX];
	size_t off[32], n;
	char path[256];
	struct capture *c = cap_open_in(dir, "empty.pcapng", 1u << 20, path, sizeof(path));

	CHECK(c != NULL);
	capture_free(c);
	n = slurp(path, f, sizeof(f));
	unlink(path);
	CHECK(walk_blocks(f, n, off, 32) == 1 + 2 * CAP_EVENTS);
}

/* Target: the size limit. The header and every record that fits are
 * written; from the first record that would take the file past max_bytes,
 * every record is skipped and counted, a smaller one that would still fit
 * too, and the file ends at its last whole record. */
static void test_capture_limit(const char *dir)
{
	static uint8_t f[CAP_FILE_MAX];
	uint8_t frame[100] = {0};
	size_t off[32], n, header;
	char path[256];
	struct capture_stats st;
	struct capture *c = cap_open_in(dir, "limit.pcapng", 1u << 20, path, sizeof(path));

	capture_free(c); /* an empty capture: its size is the header's */
	header = slurp(path, f, sizeof(f));
	unlink(path);
	/* room for two records of 32 + 64 bytes, and 40 bytes more */
	c = cap_open_in(dir, "limit.pcapng", header + 2 * 96 + 40, path, sizeof(path));
	CHECK(c != NULL);
	if (!c)
		return;
	for (int i = 0; i < 3; i++)
		cap_put(c, 0, CAP_ENQUEUE, 1000 + (uint64_t)i, frame, 100, 100, NULL, -1, 0);
	cap_put(c, 0, CAP_LOST, 2000, frame, 0, 0, NULL, -1, 0); /* 32 bytes: would fit */
	cap_put(c, 1, CAP_ENQUEUE, 3000, frame, 100, 100, NULL, -1, 0);
	capture_close(c);
	capture_get_stats(c, &st);
	capture_free(c);
	n = slurp(path, f, sizeof(f));
	unlink(path);
	CHECK(n == header + 2 * 96 && st.bytes == n);
	CHECK(walk_blocks(f, n, off, 32) == 1 + 2 * CAP_EVENTS + 2);
	CHECK(st.records[0][CAP_ENQUEUE] == 2 && st.records[0][CAP_LOST] == 0 && st.records[1][CAP_ENQUEUE] == 0);
	CHECK(st.skipped == 3 && st.overrun == 0);
}

/* Target: the file is the experiment's alone (mode 0600), and a directory
 * that is a symbolic link is not followed: the file is not created there. */
static void test_capture_dir_link(const char *dir)
{
	struct capture_config cc = {.snaplen = CAP_TEST_SNAPLEN, .max_bytes = 1u << 20};
	char real[256], link[256], path[256], err[256] = "";
	struct capture *c;
	struct stat sb;

	snprintf(path, sizeof(path), "%s/mode.pcapng", dir);
	cc.path = path;
	c = capture_open(&cc, err, sizeof(err));
	CHECK(c != NULL && stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	capture_free(c);
	unlink(path);
	snprintf(real, sizeof(real), "%s/real", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(path, sizeof(path), "%s/link/x.pcapng", dir);
	CHECK(mkdir(real, 0700) == 0 && symlink(real, link) == 0);
	CHECK(capture_open(&cc, err, sizeof(err)) == NULL && strstr(err, "cannot open the directory"));
	snprintf(path, sizeof(path), "%s/real/x.pcapng", dir);
	CHECK(stat(path, &sb) < 0);
	unlink(link);
	rmdir(real);
}

/* Target: a write that fails (here EFBIG past RLIMIT_FSIZE, SIGXFSZ blocked
 * in the writer) stops the capture without killing the daemon: the error is
 * kept, the file is cut back to whole blocks, and every record made after
 * the failure counts as failed (not as skipped by the size limit), so that
 * written + skipped + overrun + failed is every record made. */
static void test_capture_write_failure(const char *dir)
{
	static uint8_t f[512 * 1024];
	static uint8_t frame[1500];
	static size_t off[16384];
	struct rlimit old, small;
	struct capture_stats st;
	uint64_t made = 0, written = 0;
	char path[256];
	/* the size limit (2 MiB) lies between the records made before the
	 * failure is seen and all of them: counted as skipped, they would pass it */
	struct capture *c = cap_open_in(dir, "efbig.pcapng", 2u << 20, path, sizeof(path));

	CHECK(c != NULL && getrlimit(RLIMIT_FSIZE, &old) == 0);
	if (!c)
		return;
	small = old;
	small.rlim_cur = 256 * 1024; /* the first chunk's write fails */
	setrlimit(RLIMIT_FSIZE, &small);
	for (int i = 0; i < 12000; i++, made++) /* over one 1 MiB chunk: it is handed to the writer */
		cap_put(c, i & 1, CAP_DEQUEUE, 1000 + (uint64_t)i, frame, 1500, 1500, NULL, 7, 0);
	for (int wait = 0; wait < 500; wait++) { /* until the writer has failed, at most 5 s */
		capture_get_stats(c, &st);
		if (st.error)
			break;
		usleep(10000);
	}
	for (int i = 0; i < 30000; i++, made++)
		cap_put(c, i & 1, CAP_DEQUEUE, 2000000 + (uint64_t)i, frame, 1500, 1500, NULL, 7, 0);
	capture_close(c);
	setrlimit(RLIMIT_FSIZE, &old);
	capture_get_stats(c, &st);
	capture_free(c);
	for (int d = 0; d < CAP_DIRS; d++)
		written += st.records[d][CAP_DEQUEUE];
	CHECK(st.error == EFBIG && st.failed > 0 && st.skipped == 0);
	CHECK(written + st.skipped + st.overrun + st.failed == made);
	size_t n = slurp(path, f, sizeof(f));
	CHECK(n == st.bytes && n <= small.rlim_cur && walk_blocks(f, n, off, 16384) >= 1 + 2 * CAP_EVENTS);
	unlink(path);
}

/* Target: the refusals of a daemon that runs as root. An existing file is
 * never opened (its bytes stay), nor a symbolic link, even one to a file
 * that does not exist (which is not created); a limit below the header's
 * size is refused and leaves no file. */
static void test_capture_refusals(const char *dir)
{
	struct capture_config cc = {.snaplen = CAP_TEST_SNAPLEN, .max_bytes = 1u << 20};
	char path[256], target[256], err[256] = "";
	struct stat sb;
	FILE *f;

	snprintf(path, sizeof(path), "%s/exists.pcapng", dir);
	f = fopen(path, "w");
	if (f) {
		fputs("keep", f);
		fclose(f);
	}
	cc.path = path;
	CHECK(capture_open(&cc, err, sizeof(err)) == NULL && strstr(err, "already exists"));
	CHECK(stat(path, &sb) == 0 && sb.st_size == 4);
	unlink(path);

	snprintf(path, sizeof(path), "%s/link.pcapng", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	CHECK(symlink(target, path) == 0);
	CHECK(capture_open(&cc, err, sizeof(err)) == NULL && strstr(err, "already exists"));
	CHECK(stat(target, &sb) < 0);
	unlink(path);

	snprintf(path, sizeof(path), "%s/small.pcapng", dir);
	cc.max_bytes = 100;
	CHECK(capture_open(&cc, err, sizeof(err)) == NULL && strstr(err, "below the header"));
	CHECK(stat(path, &sb) < 0);
	test_capture_dir_link(dir);
}

static void test_capture(void)
{
	char dir[] = "/tmp/ckcd-link-unit-XXXXXX";

	if (!mkdtemp(dir)) {
		CHECK(!"mkdtemp");
		return;
	}
	test_capture_layout(dir);
	test_capture_empty(dir);
	test_capture_limit(dir);
	test_capture_refusals(dir);
	test_capture_write_failure(dir);
	CHECK(rmdir(dir) == 0); /* every check removed its files: else one is left to look at */
}

int main(void)
{
	test_host_rng();
	test_frame_check();
	test_put_vlan_tag();
	test_host_delay();
	test_classify();
	test_set_ce();
	test_host_key();
	test_json();
	test_units();
	test_trace();
	test_loss();
	test_capture();
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
