/* ckcd-replay - feed a packet trace through an AQM in front of a simulated
 * link and report every packet's fate. Deterministic for a given --seed.
 *
 *   ckcd-replay --qdisc "ckcd limit=80" --rate-bps 100000000 --seed 1 trace.txt
 *   ckcd-replay --describe --qdisc "red min=20 max=60"
 *   ckcd-replay --catalog      (every discipline's parameter table, as JSON)
 *
 * Trace: one arrival per line, "time_ns flow_id length [dscp [host_id [ecn]]]",
 * '#' starts a comment, times non-decreasing. host_id (default: the flow id) is
 * the packet's host_hash, the host pair hdcodel key=host penalizes; ecn the
 * packet's ECN codepoint, 0 Not-ECT (the default), 1 ECT(1), 2 ECT(0), 3 CE:
 * a discipline with ecn=1 marks ECN-capable packets CE instead of dropping
 * them ("mark" in the packet's line, "marks" by reason in the totals). The link
 * serializes one packet at a time at --rate-bps (length * 8 / rate); the queue
 * is asked for the next packet whenever the link is free. Output: JSON lines,
 * see docs/datapath-core.md.
 *
 *   ckcd-replay --qdisc SPEC --events RECORD
 *
 * replays what another host of the core recorded instead (sch_ckcd's record,
 * datapath/kernel/ckcd_record.h): arrivals ('e') and the times the queue was
 * asked for a packet ('d') as they happened there, and the core's random
 * numbers ('r') in the order it drew them there; the record's verdicts ('x',
 * 'm', d's packet) are not read. The same core on the same inputs must give the
 * same verdicts (tests/kernel/test_sch_ckcd.py compares them).
 * Exit 0 on success, 2 on a bad spec, option or trace line (message on stderr).
 * With --describe, a refused spec also prints one JSON object on stdout, the
 * core's typed refusal (struct aqm_error), for programs (ovs_config/aqm.py):
 *   {"error":TEXT,"code":"range","discipline":"ckcd","param":"limit","other":null,"band":null}
 * code is aqm_err_code_name(); param/other are parameter names from the
 * discipline's table (other: the parameter a "conflict" clashes with; for
 * "unknown-parameter", param is the name as given in the spec), band the band
 * counted from 0; null when the core does not say.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/aqm.h"
#include "../host/aqm_host.h"

struct rec {
	struct aqm_pkt pkt;
	uint64_t seq, arr_ns;
	uint32_t flow;
	int mark; /* the reason the core marked it CE for, or -1 */
};

struct flowstat {
	uint32_t flow;
	int used;
	uint64_t arr_pkts, arr_bytes, sent_pkts, sent_bytes;
	uint64_t drops[AQM_DROP_REASONS];
	uint64_t marks[AQM_DROP_REASONS];
	uint64_t first_arr_ns, last_arr_ns, last_dep_ns;
	uint64_t sojourn_sum_ns;
};

/* --events: what to do at each step, in the record's order. */
struct event_op {
	uint64_t t_ns;
	size_t rec;   /* the arriving packet's index in g.recs */
	char kind;    /* 'e' arrival, 'd' the queue asked for a packet */
};

struct reconf {
	uint64_t t_ns;
	const char *spec;
	int change; /* --change: spec gives parameters only, the rest are kept */
};

/* Everything the tool allocates hangs off g, so an early exit(2) on bad input
 * leaves nothing unreachable (LeakSanitizer in tests/datapath/test_sanitized.py). */
static struct {
	uint64_t now_ns;
	int print_packets;
	struct flowstat *flows; /* open addressing, at most half full */
	size_t nflows, nflows_cap;
	struct rec *recs;       /* the trace */
	struct reconf *rc;      /* --reconfigure and --change events */
	struct aqm_queue *q;
	struct event_op *ops;   /* --events */
	uint32_t *randoms;      /* --events: the recorded draws, in order */
	size_t nops, nrandoms, irandom, random_past_record;
} g;

/* Out of memory is not a bad input: say so and exit 1 (2 is for bad input). */
static void *xalloc(void *p)
{
	if (!p) {
		fprintf(stderr, "ckcd-replay: out of memory\n");
		exit(1);
	}
	return p;
}

static size_t flow_slot(const struct flowstat *flows, size_t cap, uint32_t flow)
{
	size_t i = (flow * 2654435761u) & (cap - 1);

	while (flows[i].used && flows[i].flow != flow)
		i = (i + 1) & (cap - 1);
	return i;
}

/* Doubles the table: a trace may hold any number of flows (a uint32 each). */
static void flows_grow(void)
{
	size_t cap = g.nflows_cap ? 2 * g.nflows_cap : 1024;
	struct flowstat *v = xalloc(calloc(cap, sizeof(*v)));

	for (size_t k = 0; k < g.nflows_cap; k++)
		if (g.flows[k].used)
			v[flow_slot(v, cap, g.flows[k].flow)] = g.flows[k];
	free(g.flows);
	g.flows = v;
	g.nflows_cap = cap;
}

static struct flowstat *flow_stat(uint32_t flow)
{
	struct flowstat *f;

	if (2 * (g.nflows + 1) > g.nflows_cap)
		flows_grow();
	f = &g.flows[flow_slot(g.flows, g.nflows_cap, flow)];
	if (!f->used) {
		f->used = 1;
		f->flow = flow;
		g.nflows++;
	}
	return f;
}

static void on_drop(void *owner, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct rec *r = (struct rec *)pkt;
	struct flowstat *f = flow_stat(r->flow);

	(void)owner;
	f->drops[why]++;
	if (g.print_packets)
		printf("{\"type\":\"pkt\",\"seq\":%" PRIu64 ",\"t_arr_ns\":%" PRIu64 ",\"flow\":%" PRIu32
		       ",\"len\":%" PRIu32 ",\"dscp\":%u,\"band\":%u,\"verdict\":\"dropped\",\"reason\":\"%s\""
		       ",\"mark\":%s%s%s,\"t_ns\":%" PRIu64 ",\"sojourn_ns\":%" PRIu64 "}\n",
		       r->seq, r->arr_ns, r->flow, pkt->len, pkt->dscp, pkt->band,
		       aqm_drop_reason_name(why), r->mark >= 0 ? "\"" : "",
		       r->mark >= 0 ? aqm_drop_reason_name(r->mark) : "null", r->mark >= 0 ? "\"" : "",
		       g.now_ns, g.now_ns - r->arr_ns);
}

/* The core marked the packet CE instead of dropping it (ecn=1). */
static void on_mark(void *owner, struct aqm_pkt *pkt, enum aqm_drop_reason why)
{
	struct rec *r = (struct rec *)pkt;

	(void)owner;
	flow_stat(r->flow)->marks[why]++;
	r->mark = (int)why;
}

static void on_sent(struct rec *r, uint64_t deq_ns, uint64_t dep_ns)
{
	struct flowstat *f = flow_stat(r->flow);
	char mark[40] = "null";

	f->sent_pkts++;
	f->sent_bytes += r->pkt.len;
	f->last_dep_ns = dep_ns;
	f->sojourn_sum_ns += deq_ns - r->arr_ns;
	if (r->mark >= 0)
		snprintf(mark, sizeof(mark), "\"%s\"", aqm_drop_reason_name(r->mark));
	if (g.print_packets)
		printf("{\"type\":\"pkt\",\"seq\":%" PRIu64 ",\"t_arr_ns\":%" PRIu64 ",\"flow\":%" PRIu32
		       ",\"len\":%" PRIu32 ",\"dscp\":%u,\"band\":%u,\"verdict\":\"sent\",\"reason\":null"
		       ",\"ecn\":%u,\"mark\":%s"
		       ",\"t_ns\":%" PRIu64 ",\"t_dep_ns\":%" PRIu64 ",\"sojourn_ns\":%" PRIu64 "}\n",
		       r->seq, r->arr_ns, r->flow, r->pkt.len, r->pkt.dscp, r->pkt.band, r->pkt.ecn, mark,
		       deq_ns, dep_ns, deq_ns - r->arr_ns);
}

static void print_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* A parameter index of discipline disc as a JSON name, or null. */
static void print_param_name(const char *disc, int i)
{
	struct aqm_param_desc d;

	if (disc && i >= 0 && aqm_param_desc(disc, (unsigned)i, &d))
		print_json_string(d.name);
	else
		fputs("null", stdout);
}

/* --describe: the refusal as one JSON line on stdout (see the top comment). */
static void print_error_json(const struct aqm_error *e)
{
	printf("{\"error\":");
	print_json_string(e->text);
	printf(",\"code\":");
	print_json_string(aqm_err_code_name(e->code));
	printf(",\"discipline\":");
	if (e->disc)
		print_json_string(e->disc);
	else
		fputs("null", stdout);
	printf(",\"param\":");
	if (e->code == AQM_ERR_UNKNOWN_PARAM && e->param < 0 && e->key[0])
		print_json_string(e->key); /* the name as given: the core keeps it typed */
	else
		print_param_name(e->disc, e->param);
	printf(",\"other\":");
	print_param_name(e->disc, e->other);
	if (e->band >= 0)
		printf(",\"band\":%d}\n", e->band);
	else
		printf(",\"band\":null}\n");
}

static void print_reasons(const uint64_t *v)
{
	int i;

	putchar('{');
	for (i = 0; i < AQM_DROP_REASONS; i++)
		printf("%s\"%s\":%" PRIu64, i ? "," : "", aqm_drop_reason_name(i), v[i]);
	putchar('}');
}

static void print_stats_obj(const struct aqm_stats *s)
{
	printf("{\"enq_pkts\":%" PRIu64 ",\"enq_bytes\":%" PRIu64 ",\"deq_pkts\":%" PRIu64
	       ",\"deq_bytes\":%" PRIu64 ",\"drops\":",
	       s->enq_pkts, s->enq_bytes, s->deq_pkts, s->deq_bytes);
	print_reasons(s->drops);
	printf(",\"drop_bytes\":");
	print_reasons(s->drop_bytes);
	printf(",\"marks\":");
	print_reasons(s->marks);
	putchar('}');
}

static char textbuf[1 << 20];

/* The typed state as ckcd-link's report gives it: only the flagged fields,
 * q_avg in packets, prob (dualpi2's p') with 9 decimals. */
static void print_state(const struct aqm_xstats *xs)
{
	const char *sep = "";

	putchar('{');
	if (xs->flags & AQM_XS_FLOWS) {
		printf("\"active_flows\":%" PRIu32, xs->active_flows);
		sep = ",";
	}
	if (xs->flags & AQM_XS_FAIR_SHARE) {
		printf("%s\"fair_share_bps\":%" PRIu64, sep, xs->fair_share_bps);
		sep = ",";
	}
	if (xs->flags & AQM_XS_QAVG) {
		printf("%s\"q_avg\":%" PRIu64 ".%03u", sep, xs->q_avg_milli / 1000,
		       (unsigned)(xs->q_avg_milli % 1000));
		sep = ",";
	}
	if (xs->flags & AQM_XS_PROB)
		printf("%s\"prob\":%" PRIu64 ".%09u", sep, xs->prob_e9 / 1000000000,
		       (unsigned)(xs->prob_e9 % 1000000000));
	putchar('}');
}

static void print_xstats(const struct aqm_queue *q, uint64_t t_ns)
{
	struct aqm_xstats xs;

	aqm_xstats(q, textbuf, sizeof(textbuf));
	printf("{\"type\":\"xstats\",\"t_ns\":%" PRIu64 ",\"xstats\":", t_ns);
	print_json_string(textbuf);
	printf(",\"state\":");
	aqm_get_xstats(q, &xs);
	print_state(&xs);
	printf(",\"band_state\":[");
	for (unsigned b = 0; b < aqm_nbands(q); b++) {
		if (b)
			putchar(',');
		aqm_band_xstats(q, b, &xs);
		print_state(&xs);
	}
	printf("]}\n");
}

/* The core's tables as one JSON object: the disciplines in registry order,
 * each parameter with its unit, range and default in the units a spec is
 * written in (stored value / 10^decimals), and the drop reasons. The
 * controller's policy checks and the REST schema are generated from this
 * (coex/aqm_catalog.py; tests/unit/test_aqm_catalog.py fails on drift). */
static void print_fixed(int64_t v, unsigned decimals)
{
	char buf[64];
	int64_t scale = 1;

	for (unsigned k = 0; k < decimals; k++)
		scale *= 10;
	if (decimals == 0 || v % scale == 0) {
		printf("%" PRId64, v / scale);
		return;
	}
	snprintf(buf, sizeof(buf), "%s%" PRId64 ".%0*" PRId64, v < 0 ? "-" : "", (v < 0 ? -v : v) / scale,
		 (int)decimals, (v < 0 ? -v : v) % scale);
	/* no trailing zeros: 0.100000 -> 0.1 */
	for (size_t n = strlen(buf); n && buf[n - 1] == '0'; n--)
		buf[n - 1] = 0;
	fputs(buf, stdout);
}

static void print_catalog(void)
{
	const char *const *nm = aqm_discipline_names();

	printf("{\"disciplines\":[");
	for (int d = 0; nm[d]; d++) {
		struct aqm_param_desc p;

		printf("%s{\"name\":", d ? "," : "");
		print_json_string(nm[d]);
		printf(",\"takes_children\":%s,\"params\":[", aqm_discipline_takes_children(nm[d]) ? "true" : "false");
		for (unsigned i = 0; aqm_param_desc(nm[d], i, &p); i++) {
			printf("%s{\"name\":", i ? "," : "");
			print_json_string(p.name);
			printf(",\"unit\":");
			print_json_string(p.unit);
			if (p.text) {
				printf(",\"kind\":\"text\",\"default\":");
				print_json_string(p.def_text ? p.def_text : "");
			} else {
				printf(",\"kind\":\"number\",\"decimals\":%u,\"min\":", p.decimals);
				print_fixed(p.min, p.decimals);
				printf(",\"max\":");
				print_fixed(p.max, p.decimals);
				printf(",\"default\":");
				print_fixed(p.def, p.decimals);
			}
			putchar('}');
		}
		printf("]}");
	}
	printf("],\"drop_reasons\":[");
	for (int r = 0; r < AQM_DROP_REASONS; r++) {
		printf("%s", r ? "," : "");
		print_json_string(aqm_drop_reason_name(r));
	}
	printf("]}\n");
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: ckcd-replay --qdisc SPEC [--rate-bps N] [--seed N] [--trace FILE]\n"
		"                   [--reconfigure T_NS:SPEC]... [--change T_NS:PARAMS]...\n"
		"                   [--xstats-every-ms N]\n"
		"                   [--no-packets] [FILE]\n"
		"       ckcd-replay --qdisc SPEC --events RECORD   (sch_ckcd's record: e/d/r/x lines)\n"
		"       ckcd-replay --describe --qdisc SPEC   (a refused spec: exit 2, the message on\n"
		"                   stderr and one JSON line on stdout: {\"error\",\"code\",\"discipline\",\n"
		"                   \"param\",\"other\",\"band\"}, names or null)\n"
		"       ckcd-replay --list\n"
		"       ckcd-replay --catalog\n"
		"Trace lines: time_ns flow_id length [dscp [host_id [ecn]]]   ('#' comments; stdin if no FILE;\n"
		"             ecn 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE)\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -1 : 0;
}

/* --events: the core's random numbers are the recorded ones, in order. Past the
 * record (the verdicts have already parted) it counts and gives 0. */
static uint32_t recorded_random(void *ctx)
{
	(void)ctx;
	if (g.irandom < g.nrandoms)
		return g.randoms[g.irandom++];
	g.random_past_record++;
	return 0;
}

/* Reads a whole record (--events) into g.recs, g.ops and g.randoms; exits 2
 * on a malformed line. */
static void read_events(FILE *in, const char *name)
{
	size_t cap_recs = 1 << 14, cap_ops = 1 << 15, cap_rand = 1 << 14, lineno = 0, nrecs = 0;
	char line[256];
	uint64_t last_t = 0;

	g.recs = xalloc(malloc(cap_recs * sizeof(*g.recs)));
	g.ops = xalloc(malloc(cap_ops * sizeof(*g.ops)));
	g.randoms = xalloc(malloc(cap_rand * sizeof(*g.randoms)));
	while (fgets(line, sizeof(line), in)) {
		unsigned long long t = 0, flow, len, dscp, host, v, ecn = 0;
		int ok;

		lineno++;
		switch (line[0]) {
		case 'e':
			/* the ECN field is a sixth column of newer records */
			ok = sscanf(line, "e %llu %llu %llu %llu %llu %llu", &t, &flow, &len, &dscp, &host, &ecn) >= 5 &&
			     !strchr(line, '-') && len >= 1 && len <= 65535 && dscp <= 63 && flow <= UINT32_MAX &&
			     host <= UINT32_MAX && ecn <= 3;
			break;
		case 'd':
			ok = sscanf(line, "d %llu", &t) == 1 && line[2] != '-';
			break;
		case 'r':
			ok = sscanf(line, "r %llu", &v) == 1 && v <= UINT32_MAX && !strchr(line, '-');
			break;
		case 'x': case 'm': case '#': case '\n':
			continue; /* the other host's verdicts; comments */
		default:
			ok = 0;
		}
		if (!ok || (line[0] != 'r' && t < last_t)) {
			fprintf(stderr, "ckcd-replay: %s:%zu: expected 'e T FLOW LEN DSCP HOST [ECN]', 'd T SEQ', 'r VALUE', "
				"'x SEQ REASON' or 'm SEQ REASON', times non-decreasing\n", name, lineno);
			exit(2);
		}
		if (line[0] == 'r') {
			if (g.nrandoms == cap_rand)
				g.randoms = xalloc(realloc(g.randoms, (cap_rand *= 2) * sizeof(*g.randoms)));
			g.randoms[g.nrandoms++] = (uint32_t)v;
			continue;
		}
		last_t = t;
		if (g.nops == cap_ops)
			g.ops = xalloc(realloc(g.ops, (cap_ops *= 2) * sizeof(*g.ops)));
		g.ops[g.nops++] = (struct event_op){ .t_ns = t, .rec = nrecs, .kind = line[0] };
		if (line[0] == 'd')
			continue;
		if (nrecs == cap_recs)
			g.recs = xalloc(realloc(g.recs, (cap_recs *= 2) * sizeof(*g.recs)));
		g.recs[nrecs] = (struct rec){ .seq = nrecs, .arr_ns = t, .flow = (uint32_t)flow, .mark = -1 };
		g.recs[nrecs].pkt = (struct aqm_pkt){ .flow_hash = (uint32_t)flow, .len = (uint32_t)len,
						      .dscp = (uint8_t)dscp, .host_hash = (uint32_t)host,
						      .ecn = (uint8_t)ecn };
		nrecs++;
	}
}

/* --events: every step at its recorded time. A packet's departure is when it
 * was handed out (the other host's link, not ours, sent it). */
static uint64_t run_events(struct aqm_queue *q)
{
	uint64_t now = 0;

	for (size_t k = 0; k < g.nops; k++) {
		const struct event_op *op = &g.ops[k];

		g.now_ns = now = op->t_ns;
		if (op->kind == 'e') {
			struct rec *r = &g.recs[op->rec];
			struct flowstat *f = flow_stat(r->flow);

			r->pkt.frame = r; /* here: read_events may have moved the array */
			if (!f->arr_pkts)
				f->first_arr_ns = now;
			f->arr_pkts++;
			f->arr_bytes += r->pkt.len;
			f->last_arr_ns = now;
			aqm_enqueue(q, &r->pkt, now);
		} else {
			struct aqm_pkt *pkt = aqm_dequeue(q, now);

			if (pkt)
				on_sent((struct rec *)pkt, now, now);
		}
	}
	printf("{\"type\":\"events\",\"ops\":%zu,\"random_recorded\":%zu,\"random_used\":%zu"
	       ",\"random_past_record\":%zu}\n", g.nops, g.nrandoms, g.irandom, g.random_past_record);
	return now;
}

/* Reads the whole trace; exits 2 on a malformed line. */
static struct rec *read_trace(FILE *in, const char *name, size_t *n)
{
	size_t cap = 1 << 16, cnt = 0, lineno = 0;
	struct rec *v = g.recs = xalloc(malloc(cap * sizeof(*v)));
	char line[512];
	uint64_t last_t = 0;

	while (fgets(line, sizeof(line), in)) {
		char *p = line, *hash = strchr(line, '#');
		unsigned long long t, flow, len, dscp = 0, host, ecn = 0;
		int got;

		lineno++;
		if (hash)
			*hash = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '\n' || *p == '\r')
			continue;
		got = sscanf(p, "%llu %llu %llu %llu %llu %llu", &t, &flow, &len, &dscp, &host, &ecn);
		if (got < 5)
			host = flow; /* a trace without hosts: each flow its own host pair */
		if (got < 3 || strchr(p, '-') || len < 1 || len > 65535 || dscp > 63 ||
		    flow > UINT32_MAX || host > UINT32_MAX || ecn > 3) {
			fprintf(stderr,
				"ckcd-replay: %s:%zu: expected 'time_ns flow_id length [dscp [host_id [ecn]]]' "
				"(length 1..65535, dscp 0..63, ids below 2^32, ecn 0..3)\n",
				name, lineno);
			exit(2);
		}
		if (t < last_t) {
			fprintf(stderr, "ckcd-replay: %s:%zu: time %llu goes backwards\n", name, lineno, t);
			exit(2);
		}
		last_t = t;
		if (cnt == cap) {
			cap *= 2;
			v = g.recs = xalloc(realloc(v, cap * sizeof(*v)));
		}
		memset(&v[cnt], 0, sizeof(v[cnt]));
		v[cnt].seq = cnt;
		v[cnt].arr_ns = t;
		v[cnt].flow = (uint32_t)flow;
		v[cnt].pkt.flow_hash = (uint32_t)flow;
		v[cnt].pkt.len = (uint32_t)len;
		v[cnt].pkt.dscp = (uint8_t)dscp;
		v[cnt].pkt.host_hash = (uint32_t)host;
		v[cnt].pkt.ecn = (uint8_t)ecn;
		v[cnt].pkt.frame = &v[cnt];
		v[cnt].mark = -1;
		cnt++;
	}
	*n = cnt;
	return v;
}

/* A --reconfigure (a whole spec: aqm_reconfigure) or a --change (the
 * parameters given, the rest kept: aqm_create_changed, what sch_ckcd's change
 * runs), on g.q; the queued packets carry over either way. */
static int reconfigure(const struct reconf *r, const struct aqm_env *env, char *err, size_t errlen)
{
	struct aqm_error e;
	struct aqm_queue *nq;

	if (!r->change)
		return aqm_reconfigure(&g.q, r->spec, err, errlen);
	nq = aqm_create_changed(g.q, r->spec, env, &e);
	if (!nq) {
		snprintf(err, errlen, "%s", e.text);
		return -1;
	}
	aqm_replace(&g.q, nq);
	return 0;
}

int main(int argc, char **argv)
{
	const char *spec = 0, *trace = 0, *events = 0;
	uint64_t rate_bps = 100000000, seed = 1, xstats_every_ns = 0;
	int describe = 0, i;
	struct reconf *rc = g.rc = xalloc(calloc((size_t)argc, sizeof(*rc)));
	size_t nrc = 0, irc = 0;
	char err[512];
	struct aqm_error cerr;
	struct aqm_host host;
	struct aqm_env env;
	struct aqm_queue *q;
	struct rec *recs;
	size_t n, next = 0;
	uint64_t t_free = 0, clock = 0, next_xstats;
	FILE *in = stdin;

	g.print_packets = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : 0;

		if (!strcmp(a, "--qdisc") && v) {
			spec = v;
			i++;
		} else if (!strcmp(a, "--rate-bps") && v) {
			if (parse_u64(v, &rate_bps) || rate_bps < 1000) {
				fprintf(stderr, "ckcd-replay: --rate-bps '%s': expected an integer >= 1000\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--seed") && v) {
			if (parse_u64(v, &seed)) {
				fprintf(stderr, "ckcd-replay: --seed '%s': expected a non-negative integer\n", v);
				return 2;
			}
			i++;
		} else if (!strcmp(a, "--trace") && v) {
			trace = v;
			i++;
		} else if (!strcmp(a, "--events") && v) {
			events = v;
			i++;
		} else if (!strcmp(a, "--xstats-every-ms") && v) {
			uint64_t ms;

			if (parse_u64(v, &ms) || !ms) {
				fprintf(stderr, "ckcd-replay: --xstats-every-ms '%s': expected an integer >= 1\n", v);
				return 2;
			}
			xstats_every_ns = ms * 1000000;
			i++;
		} else if ((!strcmp(a, "--reconfigure") || !strcmp(a, "--change")) && v) {
			char *colon = strchr(v, ':');

			if (!colon) {
				fprintf(stderr, "ckcd-replay: %s '%s': expected T_NS:%s\n", a, v,
					a[2] == 'c' ? "PARAMS" : "SPEC");
				return 2;
			}
			*colon = 0;
			if (parse_u64(v, &rc[nrc].t_ns) || (nrc && rc[nrc].t_ns < rc[nrc - 1].t_ns)) {
				fprintf(stderr, "ckcd-replay: %s: bad or decreasing time '%s'\n", a, v);
				return 2;
			}
			rc[nrc].change = a[2] == 'c';
			rc[nrc++].spec = colon + 1;
			i++;
		} else if (!strcmp(a, "--describe")) {
			describe = 1;
		} else if (!strcmp(a, "--no-packets")) {
			g.print_packets = 0;
		} else if (!strcmp(a, "--catalog")) {
			print_catalog();
			return 0;
		} else if (!strcmp(a, "--list")) {
			const char *const *nm = aqm_discipline_names();

			for (; *nm; nm++)
				puts(*nm);
			return 0;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (a[0] != '-' && !trace) {
			trace = a;
		} else {
			fprintf(stderr, "ckcd-replay: unknown or incomplete option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (!spec) {
		fprintf(stderr, "ckcd-replay: --qdisc SPEC is required\n");
		usage(stderr);
		return 2;
	}
	if (events && (trace || nrc || xstats_every_ns)) {
		fprintf(stderr, "ckcd-replay: --events replays a record: no trace, --reconfigure, --change or "
			"--xstats-every-ms\n");
		return 2;
	}
	if (events) {
		in = fopen(events, "r");
		if (!in) {
			fprintf(stderr, "ckcd-replay: %s: %s\n", events, strerror(errno));
			return 2;
		}
		read_events(in, events);
		fclose(in);
	}
	aqm_host_init(&host, seed, on_drop, NULL);
	host.mark = on_mark;
	/* the link drains at --rate-bps: a spec without rate_bps follows it */
	env = aqm_host_env(&host, rate_bps);
	if (events)
		env.random_u32 = recorded_random;
	q = g.q = aqm_create_checked(spec, &env, &cerr);
	if (!q) {
		fprintf(stderr, "ckcd-replay: %s\n", cerr.text);
		if (describe)
			print_error_json(&cerr);
		return 2;
	}
	aqm_describe(q, textbuf, sizeof(textbuf));
	if (describe) {
		printf("%s\n", textbuf);
		aqm_destroy(q);
		return 0;
	}
	setvbuf(stdout, 0, _IOFBF, 1 << 20);
	printf("{\"type\":\"config\",\"rate_bps\":%" PRIu64 ",\"seed\":%" PRIu64 ",\"limit_pkts\":%" PRIu64
	       ",\"describe\":", rate_bps, seed, aqm_limit_pkts(q));
	print_json_string(textbuf);
	printf("}\n");
	if (events) {
		clock = run_events(q);
		recs = g.recs;
		goto report;
	}
	if (trace && strcmp(trace, "-")) {
		in = fopen(trace, "r");
		if (!in) {
			fprintf(stderr, "ckcd-replay: %s: %s\n", trace, strerror(errno));
			return 2;
		}
	}
	recs = read_trace(in, trace ? trace : "-", &n);
	next_xstats = xstats_every_ns ? xstats_every_ns : UINT64_MAX;

	for (;;) {
		uint64_t t_arr = next < n ? recs[next].arr_ns : UINT64_MAX;
		uint64_t t_rc = irc < nrc ? rc[irc].t_ns : UINT64_MAX;
		uint64_t t_ev = t_arr;
		int kind = 0; /* 0 arrival, 1 reconfigure, 2 xstats */

		if (t_rc <= t_ev) {
			t_ev = t_rc;
			kind = 1;
		}
		if (next_xstats < t_ev) {
			t_ev = next_xstats;
			kind = 2;
		}
		/* serve the link up to the event */
		while (aqm_qlen_pkts(q)) {
			uint64_t now = t_free > clock ? t_free : clock;
			struct aqm_pkt *pkt;

			if (now > t_ev)
				break;
			g.now_ns = clock = now;
			pkt = aqm_dequeue(q, now);
			if (!pkt)
				break;
			t_free = now + ((uint64_t)pkt->len * 8 * 1000000000ull + rate_bps - 1) / rate_bps;
			on_sent((struct rec *)pkt, now, t_free);
		}
		if (t_ev == UINT64_MAX)
			break;
		g.now_ns = clock = t_ev;
		if (kind == 1) {
			if (reconfigure(&rc[irc], &env, err, sizeof(err))) {
				fprintf(stderr, "ckcd-replay: %s at %" PRIu64 ": %s\n",
					rc[irc].change ? "--change" : "--reconfigure", t_ev, err);
				return 2;
			}
			q = g.q;
			aqm_describe(q, textbuf, sizeof(textbuf));
			printf("{\"type\":\"reconfigure\",\"t_ns\":%" PRIu64 ",\"qlen_pkts\":%" PRIu32
			       ",\"describe\":",
			       t_ev, aqm_qlen_pkts(q));
			print_json_string(textbuf);
			printf("}\n");
			irc++;
		} else if (kind == 2) {
			print_xstats(q, t_ev);
			next_xstats += xstats_every_ns;
		} else {
			struct rec *r = &recs[next++];
			struct flowstat *f = flow_stat(r->flow);

			if (!f->arr_pkts)
				f->first_arr_ns = r->arr_ns;
			f->arr_pkts++;
			f->arr_bytes += r->pkt.len;
			f->last_arr_ns = r->arr_ns;
			aqm_enqueue(q, &r->pkt, t_ev);
		}
		if (next >= n && irc >= nrc)
			next_xstats = UINT64_MAX;
	}

report:
	print_xstats(q, clock);
	for (size_t k = 0; k < g.nflows_cap; k++) {
		struct flowstat *f = &g.flows[k];

		if (!f->used)
			continue;
		printf("{\"type\":\"flow\",\"flow\":%" PRIu32 ",\"arr_pkts\":%" PRIu64
		       ",\"arr_bytes\":%" PRIu64 ",\"sent_pkts\":%" PRIu64 ",\"sent_bytes\":%" PRIu64
		       ",\"first_arr_ns\":%" PRIu64 ",\"last_arr_ns\":%" PRIu64 ",\"last_dep_ns\":%" PRIu64
		       ",\"mean_sojourn_ns\":%" PRIu64 ",\"drops\":",
		       f->flow, f->arr_pkts, f->arr_bytes, f->sent_pkts, f->sent_bytes, f->first_arr_ns,
		       f->last_arr_ns, f->last_dep_ns, f->sent_pkts ? f->sojourn_sum_ns / f->sent_pkts : 0);
		print_reasons(f->drops);
		printf(",\"marks\":");
		print_reasons(f->marks);
		printf("}\n");
	}
	printf("{\"type\":\"stats\",\"qlen_pkts\":%" PRIu32 ",\"total\":", aqm_qlen_pkts(q));
	print_stats_obj(aqm_get_stats(q));
	printf(",\"bands\":[");
	for (unsigned b = 0; b < aqm_nbands(q); b++) {
		if (b)
			putchar(',');
		print_stats_obj(aqm_band_stats(q, b));
	}
	printf("],\"describe\":");
	aqm_describe(q, textbuf, sizeof(textbuf));
	print_json_string(textbuf);
	printf(",\"end_ns\":%" PRIu64 "}\n", clock);
	aqm_destroy(q);
	free(recs);
	free(g.flows);
	free(g.ops);
	free(g.randoms);
	free(rc);
	return 0;
}
