/* main.c - ckcd-link: a userspace bottleneck link between two interfaces.
 *
 * Usage and the control protocol: docs/ckcd-link.md, or ckcd-link --help.
 * Exit status: 0 after SIGTERM/SIGINT, 2 for a bad parameter (the message
 * names it), 1 for any other failure to start. */
#define _GNU_SOURCE
#include "link.h"
#include "control.h"
#include "units.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define DEFAULT_QDISC_BA "droptail limit=10000"
#define DEFAULT_POOL_PKTS 65536u
#define RX_BUDGET 256 /* frames per socket per loop turn, so both directions progress */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ckcd-link --if-a IF --if-b IF --rate RATE [options]\n"
		"Emulates a link between IF A and IF B: rate, one-way delay and a queue\n"
		"discipline in each direction (ab: A->B, ba: B->A).\n"
		"\n"
		"  --if-a IF, --if-b IF   the two interfaces (veth ends), opened with AF_PACKET\n"
		"  --rate RATE            link rate both ways: 50mbit, 1gbit, 100000 (bit/s)\n"
		"  --delay DELAY          one-way propagation delay both ways: 10ms, 250us (default 0)\n"
		"  --rate-ba, --delay-ba  override rate/delay of the B->A direction\n"
		"  --trace FILE           A->B follows a delivery-opportunity trace (Mahimahi's format:\n"
		"                         one ms time per 1504-byte opportunity, looping) instead of\n"
		"                         --rate; its average is the rate the disciplines see\n"
		"  --trace-ba FILE        the same for B->A\n"
		"  --loss SPEC            frames lost on the link A->B after the queue, counted apart:\n"
		"                         \"bernoulli p=0.01\" or \"gilbert p=0.01 r=0.25 [bad=1] [good=0]\"\n"
		"  --loss-ba SPEC         the same for B->A (default: none either way)\n"
		"  --qdisc SPEC           discipline A->B, e.g. \"ckcd limit=80\" (default droptail limit=1000)\n"
		"  --qdisc-ba SPEC        discipline B->A (default \"" DEFAULT_QDISC_BA "\")\n"
		"  --mtu N                largest L3 size accepted; longer frames are dropped (default 1500)\n"
		"  --overhead BYTES       extra bytes per frame for serialization, e.g. 24 (default 0)\n"
		"  --pool N               frames the daemon can hold in total (default %u)\n"
		"  --control PATH         control socket (default /tmp/ckcd-link-<if-a>-<if-b>.sock)\n"
		"  --log FILE             time-series log, one JSON line per direction per interval\n"
		"  --log-interval MS      log interval in ms (default 100)\n"
		"  --seed N               seed of the core's random numbers (default: getrandom)\n"

		"  --quiet                no start-up line, no final stats on stdout\n"
		"  --single-thread        send from the main thread instead of one sender thread\n"
		"                         per direction: less CPU, later releases under load\n"
		"  --release-batch DUR    a sender's timed wake-ups are at least DUR apart (250us, 1ms;\n"
		"                         a bare number is ms) and each sends what is due: frames up to\n"
		"                         DUR late, fewer wake-ups (default 0: each frame at its release)\n"
		"  --release-lateness DUR a test knob: each frame leaves a random time after its release,\n"
		"                         uniform in [0, 2 x DUR) (mean DUR: 500us, 1ms; a bare number\n"
		"                         is ms; 0..10ms), in order, counted as release lateness; the\n"
		"                         rate is kept (default 0: none)\n"
		"  --host-delay ADDR=DUR  frames from host ADDR (IPv4/IPv6 source) wait DUR more before\n"
		"                         the queue, as on a longer access link (repeat, up to 16 hosts)\n"
		"  --rx-io HOW            how frames are read: ring (a mapped PACKET_RX_RING, no system\n"
		"                         call per batch), recvmmsg, or auto (default: the ring, else\n"
		"                         recvmmsg); show and stats say which runs\n"
		"  --capture FILE         write every frame's events (enqueue, drop, mark, dequeue, lost,\n"
		"                         discard) to FILE as pcapng, one interface per direction and\n"
		"                         event (ab.drop, ...); FILE must not exist (default: off)\n"
		"  --snaplen N            bytes of each frame captured (default %u; %u..%u)\n"
		"  --capture-max-mb M     stop writing records, counting them as skipped, before the\n"
		"                         file would exceed M MiB (default %u; 1..%u)\n",
		DEFAULT_POOL_PKTS, CAP_SNAPLEN_DEFAULT, CAP_SNAPLEN_MIN, CAP_SNAPLEN_MAX, CAP_MAX_MB_DEFAULT,
		CAP_MAX_MB_MAX);
}

static void die_param(const char *param, const char *msg)
{
	fprintf(stderr, "ckcd-link: --%s: %s\n", param, msg);
	exit(2);
}

static void die(const char *msg)
{
	fprintf(stderr, "ckcd-link: %s\n", msg);
	exit(1);
}

/* --release-batch, --release-lateness: a duration of 0..max. */
static uint64_t parse_release_dur(const char *arg, const char *param, uint64_t max)
{
	char err[256];
	uint64_t v;

	if (parse_delay(arg, &v, err, sizeof(err)) < 0 || v > max) {
		snprintf(err, sizeof(err), "'%s' is not a duration in 0..%gms (e.g. 250us)", arg,
			 (double)max / 1e6);
		die_param(param, err);
	}
	return v;
}

/* --loss, --loss-ba: refused here, before anything starts. */
static const char *check_loss(const char *spec, const char *param)
{
	struct loss scratch;
	char err[256];

	memset(&scratch, 0, sizeof(scratch));
	if (loss_parse(spec, &scratch, err, sizeof(err)) < 0)
		die_param(param, err);
	return spec;
}

/* --capture, --snaplen, --capture-max-mb. A snap length or limit left 0
 * is not given (capture_defaults). */
static void parse_capture_opt(const char *opt, const char *arg, struct link_config *cfg)
{
	char err[256];
	uint64_t v;

	if (strcmp(opt, "capture") == 0) {
		if (!*arg)
			die_param(opt, "empty file name");
		cfg->capture_path = arg;
	} else if (strcmp(opt, "snaplen") == 0) {
		if (parse_uint(arg, CAP_SNAPLEN_MIN, CAP_SNAPLEN_MAX, &v, err, sizeof(err)) < 0)
			die_param(opt, err);
		cfg->snaplen = (uint32_t)v;
	} else {
		if (parse_uint(arg, 1, CAP_MAX_MB_MAX, &v, err, sizeof(err)) < 0)
			die_param(opt, err);
		cfg->capture_max_mb = v;
	}
}

/* Refuses a snap length or size limit without a capture: silently unused,
 * either would look like a capture that is not there. */
static void capture_defaults(struct link_config *cfg)
{
	if (cfg->snaplen && !cfg->capture_path)
		die_param("snaplen", "only with --capture FILE");
	if (cfg->capture_max_mb && !cfg->capture_path)
		die_param("capture-max-mb", "only with --capture FILE");
	if (!cfg->snaplen)
		cfg->snaplen = CAP_SNAPLEN_DEFAULT;
	if (!cfg->capture_max_mb)
		cfg->capture_max_mb = CAP_MAX_MB_DEFAULT;
}

static void parse_args(int argc, char **argv, struct link_config *cfg)
{
	enum { O_IF_A = 256, O_IF_B, O_RATE, O_DELAY, O_RATE_BA, O_DELAY_BA, O_QDISC, O_QDISC_BA,
	       O_MTU, O_OVERHEAD, O_POOL, O_CONTROL, O_LOG, O_LOG_INTERVAL, O_SEED, O_QUIET,
	       O_SINGLE_THREAD, O_RELEASE_BATCH, O_RELEASE_LATENESS, O_RX_IO, O_HOST_DELAY,
	       O_TRACE, O_TRACE_BA, O_LOSS, O_LOSS_BA, O_CAPTURE, O_SNAPLEN, O_CAPTURE_MAX_MB };
	static const struct option opts[] = {
		{"if-a", required_argument, 0, O_IF_A},
		{"if-b", required_argument, 0, O_IF_B},
		{"rate", required_argument, 0, O_RATE},
		{"delay", required_argument, 0, O_DELAY},
		{"rate-ba", required_argument, 0, O_RATE_BA},
		{"delay-ba", required_argument, 0, O_DELAY_BA},
		{"qdisc", required_argument, 0, O_QDISC},
		{"qdisc-ba", required_argument, 0, O_QDISC_BA},
		{"mtu", required_argument, 0, O_MTU},
		{"overhead", required_argument, 0, O_OVERHEAD},
		{"pool", required_argument, 0, O_POOL},
		{"control", required_argument, 0, O_CONTROL},
		{"log", required_argument, 0, O_LOG},
		{"log-interval", required_argument, 0, O_LOG_INTERVAL},
		{"seed", required_argument, 0, O_SEED},
		{"quiet", no_argument, 0, O_QUIET},
		{"single-thread", no_argument, 0, O_SINGLE_THREAD},
		{"release-batch", required_argument, 0, O_RELEASE_BATCH},
		{"release-lateness", required_argument, 0, O_RELEASE_LATENESS},
		{"rx-io", required_argument, 0, O_RX_IO},
		{"host-delay", required_argument, 0, O_HOST_DELAY},
		{"trace", required_argument, 0, O_TRACE},
		{"trace-ba", required_argument, 0, O_TRACE_BA},
		{"loss", required_argument, 0, O_LOSS},
		{"loss-ba", required_argument, 0, O_LOSS_BA},
		{"capture", required_argument, 0, O_CAPTURE},
		{"snaplen", required_argument, 0, O_SNAPLEN},
		{"capture-max-mb", required_argument, 0, O_CAPTURE_MAX_MB},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	int rate_given = 0, rate_ba_given = 0, delay_ba_given = 0;
	uint64_t rate = 0, delay = 0, rate_ba = 0, delay_ba = 0, v;
	char err[256];
	int c;

	memset(cfg, 0, sizeof(*cfg));
	cfg->qdisc[0] = "droptail limit=1000";
	cfg->qdisc[1] = DEFAULT_QDISC_BA;
	cfg->mtu = 1500;
	cfg->pool_pkts = DEFAULT_POOL_PKTS;
	cfg->log_interval_ns = 100000000ull;
	cfg->sender_threads = 1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_IF_A: cfg->if_name[0] = optarg; break;
		case O_IF_B: cfg->if_name[1] = optarg; break;
		case O_RATE:
			if (parse_rate(optarg, &rate, err, sizeof(err)) < 0)
				die_param("rate", err);
			rate_given = 1;
			break;
		case O_DELAY:
			if (parse_delay(optarg, &delay, err, sizeof(err)) < 0)
				die_param("delay", err);
			break;
		case O_RATE_BA:
			if (parse_rate(optarg, &rate_ba, err, sizeof(err)) < 0)
				die_param("rate-ba", err);
			rate_ba_given = 1;
			break;
		case O_DELAY_BA:
			if (parse_delay(optarg, &delay_ba, err, sizeof(err)) < 0)
				die_param("delay-ba", err);
			delay_ba_given = 1;
			break;
		case O_QDISC: cfg->qdisc[0] = optarg; break;
		case O_QDISC_BA: cfg->qdisc[1] = optarg; break;
		case O_MTU:
			if (parse_uint(optarg, LINK_MTU_MIN, LINK_MTU_MAX, &v, err, sizeof(err)) < 0)
				die_param("mtu", err);
			cfg->mtu = (uint32_t)v;
			break;
		case O_OVERHEAD:
			if (parse_uint(optarg, 0, LINK_OVERHEAD_MAX, &v, err, sizeof(err)) < 0)
				die_param("overhead", err);
			cfg->overhead_bytes = (uint32_t)v;
			break;
		case O_POOL:
			if (parse_uint(optarg, 64, 1u << 22, &v, err, sizeof(err)) < 0)
				die_param("pool", err);
			cfg->pool_pkts = (uint32_t)v;
			break;
		case O_CONTROL: cfg->control_path = optarg; break;
		case O_LOG: cfg->log_path = optarg; break;
		case O_LOG_INTERVAL:
			if (parse_uint(optarg, 1, 60000, &v, err, sizeof(err)) < 0)
				die_param("log-interval", err);
			cfg->log_interval_ns = v * 1000000ull;
			break;
		case O_SEED:
			if (parse_uint(optarg, 0, UINT64_MAX, &v, err, sizeof(err)) < 0)
				die_param("seed", err);
			cfg->seed = v;
			cfg->seed_given = 1;
			break;
		case O_QUIET: cfg->quiet = 1; break;
		case O_SINGLE_THREAD: cfg->sender_threads = 0; break;
		case O_RELEASE_BATCH:
			cfg->release_batch_ns = parse_release_dur(optarg, "release-batch",
								  RELEASE_BATCH_MAX_NS);
			break;
		case O_RELEASE_LATENESS:
			cfg->release_lateness_ns = parse_release_dur(optarg, "release-lateness",
								     RELEASE_LATENESS_MAX_NS);
			break;
		case O_RX_IO:
			if (strcmp(optarg, "auto") == 0)
				cfg->rx_io = RX_IO_AUTO;
			else if (strcmp(optarg, "ring") == 0)
				cfg->rx_io = RX_IO_RING;
			else if (strcmp(optarg, "recvmmsg") == 0)
				cfg->rx_io = RX_IO_RECVMMSG;
			else
				die_param("rx-io", "must be auto, ring or recvmmsg");
			break;
		case O_HOST_DELAY: {
			struct host_delay hd;

			if (host_delay_parse(optarg, cfg->host_delay, cfg->n_host_delay, &hd, err,
					     sizeof(err)) < 0)
				die_param("host-delay", err);
			cfg->host_delay[cfg->n_host_delay++] = hd; /* parse refused a 17th */
			break;
		}
		case O_TRACE: cfg->trace_path[0] = optarg; break;
		case O_TRACE_BA: cfg->trace_path[1] = optarg; break;
		case O_LOSS: cfg->loss[0] = check_loss(optarg, "loss"); break;
		case O_LOSS_BA: cfg->loss[1] = check_loss(optarg, "loss-ba"); break;
		case O_CAPTURE: parse_capture_opt("capture", optarg, cfg); break;
		case O_SNAPLEN: parse_capture_opt("snaplen", optarg, cfg); break;
		case O_CAPTURE_MAX_MB: parse_capture_opt("capture-max-mb", optarg, cfg); break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc)
		die_param("help", "unexpected argument; see --help");
	if (!cfg->if_name[0])
		die_param("if-a", "missing");
	if (!cfg->if_name[1])
		die_param("if-b", "missing");
	if (strcmp(cfg->if_name[0], cfg->if_name[1]) == 0)
		die_param("if-b", "must differ from --if-a");
	if (rate_ba_given && cfg->trace_path[1])
		die_param("rate-ba", "B->A follows --trace-ba: its rate is the trace's");
	if (rate_given && cfg->trace_path[0] && (rate_ba_given || cfg->trace_path[1]))
		die_param("rate", "both directions have their own (a trace, or --rate-ba): --rate would be unused");
	/* Each direction needs a rate or a trace (--rate gives B->A its rate too). */
	if (!rate_given && !(cfg->trace_path[0] && (rate_ba_given || cfg->trace_path[1])))
		die_param("rate", "missing (e.g. --rate 50mbit), or --trace FILE with --rate-ba or --trace-ba");
	if (cfg->release_batch_ns && !cfg->sender_threads)
		die_param("release-batch", "batches the sender threads' wake-ups: not with --single-thread");
	capture_defaults(cfg);
	cfg->rate_bps[0] = rate;
	cfg->rate_bps[1] = rate_ba_given ? rate_ba : rate;
	cfg->delay_ns[0] = delay;
	cfg->delay_ns[1] = delay_ba_given ? delay_ba : delay;
}

static void pool_init(struct link *l)
{
	struct pkt_pool *pool = &l->pool;
	size_t data = l->cfg.mtu + ETH_HDR_LEN + VLAN_TAG_LEN + 1;
	size_t stride = (sizeof(struct pkt) + data + 63) & ~(size_t)63;

	/* Anonymous memory: pages are touched only when frames use them,
	 * and the LIFO free list keeps reusing the same few. */
	pool->mem = mmap(NULL, stride * l->cfg.pool_pkts, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool->mem == MAP_FAILED)
		die("cannot allocate the frame pool (--pool)");
	pool->stride = stride;
	pool->count = l->cfg.pool_pkts;
	for (uint32_t i = pool->count; i-- > 0;)
		pool_put(pool, (struct pkt *)(pool->mem + (size_t)i * stride));
}

/* Programming a timer is a VM exit on our machines (timerfd_settime was a
 * quarter of the daemon's CPU when re-armed on every loop turn). Re-arm only
 * when the deadline moves earlier or the armed one has fired: a deadline
 * armed too early costs one spare wake-up, which re-arms. */
static void arm_timer(int tfd, uint64_t at, uint64_t *armed)
{
	struct itimerspec its;

	if (at >= *armed && *armed != UINT64_MAX)
		return;
	if (at == UINT64_MAX)
		return; /* nothing due: let the armed one (if any) fire spare */
	memset(&its, 0, sizeof(its));
	if (at != UINT64_MAX) {
		if (at == 0)
			at = 1; /* 0 would disarm */
		its.it_value.tv_sec = (time_t)(at / 1000000000ull);
		its.it_value.tv_nsec = (long)(at % 1000000000ull);
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
	*armed = at;
}

/* Both queues served up to t: whatever reads or changes a queue's state
 * (a control request, the log) first brings it to its own time, since with
 * sender threads a queue may be served up to half a delay late
 * (dir_next_event). */
static void serve_all(struct link *l, uint64_t t)
{
	for (int i = 0; i < 2; i++)
		dir_serve(&l->dir[i], t);
}

/* --capture: created once the interfaces are open (a refused interface
 * leaves no file behind) and before the loop makes the first record. */
static void open_capture(struct link *l)
{
	struct capture_config cc;
	char desc[2][2 * 64], err[512];

	if (!l->cfg.capture_path)
		return;
	for (int i = 0; i < 2; i++)
		snprintf(desc[i], sizeof(desc[i]), "%s -> %s", l->cfg.if_name[i], l->cfg.if_name[1 - i]);
	memset(&cc, 0, sizeof(cc));
	cc.path = l->cfg.capture_path;
	cc.snaplen = l->cfg.snaplen;
	cc.max_bytes = l->cfg.capture_max_mb << 20;
	cc.dir_desc[0] = desc[0];
	cc.dir_desc[1] = desc[1];
	l->cap = capture_open(&cc, err, sizeof(err));
	if (!l->cap)
		die_param("capture", err);
}

/* When the loop must run next: the log's tick, either direction's next
 * event, or the capture's hand-off of a chunk a second old (capture_tick
 * makes it when due). */
static uint64_t next_wakeup(struct link *l, uint64_t t)
{
	uint64_t next = l->next_log_ns, e;

	if (l->cap && (e = capture_tick(l->cap, t)) < next)
		next = e;
	for (int i = 0; i < 2; i++)
		if ((e = dir_next_event(&l->dir[i])) < next)
			next = e;
	return next;
}

static void print_final_stats(struct link *l)
{
	struct jbuf b;

	if (l->cfg.quiet)
		return;
	jb_init(&b);
	jb_obj_open(&b);
	jb_kstr(&b, "final", "stats");
	report_stats(l, &b, 64, 3);
	jb_obj_close(&b);
	printf("%s\n", b.p ? b.p : "{}");
	fflush(stdout);
	jb_free(&b);
}

int main(int argc, char **argv)
{
	static struct link l; /* large: keep it off the stack */
	static struct ep_tag tag_port[2] = {{EP_PORT_A}, {EP_PORT_B}};
	static struct ep_tag tag_timer = {EP_TIMER}, tag_signal = {EP_SIGNAL};
	char err[512], default_control[256];
	struct epoll_event ev, events[32];
	uint64_t armed = UINT64_MAX, seed;
	int ifindex[2], fd[2], epfd, tfd, sfd;
	sigset_t sigs;
	int running = 1;

	parse_args(argc, argv, &l.cfg);
	if (!l.cfg.control_path) {
		snprintf(default_control, sizeof(default_control), "/tmp/ckcd-link-%s-%s.sock",
			 l.cfg.if_name[0], l.cfg.if_name[1]);
		l.cfg.control_path = default_control;
	}
	if (!l.cfg.seed_given) {
		if (getrandom(&l.cfg.seed, sizeof(l.cfg.seed), 0) != sizeof(l.cfg.seed))
			l.cfg.seed = now_ns() ^ (uint64_t)getpid() << 32;
	}
	/* The flow hash's key; the directions seed their own random numbers (dir_init). */
	seed = l.cfg.seed ^ 0x68617368ull; /* "hash": a stream apart from the directions' */
	l.hash_seed = aqm_splitmix64(&seed);

	/* Queue specs are parameters too: refuse them before touching the
	 * interfaces. */
	for (int i = 0; i < 2; i++) {
		err[0] = '\0';
		if (dir_init(&l, i, err, sizeof(err)) < 0)
			die_param(i == 0 ? "qdisc" : "qdisc-ba", err[0] ? err : "refused");
		if (dir_init_models(&l.dir[i], err, sizeof(err)) < 0)
			die_param(i == 0 ? "trace" : "trace-ba", err);
	}
	for (int i = 0; i < 2; i++) {
		fd[i] = port_open(l.cfg.if_name[i], &ifindex[i], l.cfg.rx_io,
				  l.cfg.mtu + ETH_HDR_LEN + VLAN_TAG_LEN, &l.dir[i].ring, err,
				  sizeof(err));
		if (fd[i] < 0) {
			if (ifindex[i] == 0)
				die_param(i == 0 ? "if-a" : "if-b", err);
			die(err);
		}
		port_check_offloads(l.cfg.if_name[i]);
	}
	for (int i = 0; i < 2; i++) {
		l.dir[i].rx_fd = fd[i];
		l.dir[i].tx_fd = fd[1 - i];
		l.dir[i].tx_ifindex = ifindex[1 - i];
	}
	pool_init(&l);

	/* Release times are only as good as the wake-ups: no timer slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	epfd = epoll_create1(EPOLL_CLOEXEC);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (epfd < 0 || tfd < 0 || sfd < 0)
		die("cannot create epoll/timerfd/signalfd");
	for (int i = 0; i < 2; i++) {
		ev.events = EPOLLIN;
		ev.data.ptr = &tag_port[i];
		epoll_ctl(epfd, EPOLL_CTL_ADD, fd[i], &ev);
	}
	ev.events = EPOLLIN;
	ev.data.ptr = &tag_timer;
	epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev);
	ev.data.ptr = &tag_signal;
	epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev);

	if (l.cfg.log_path) {
		l.log = fopen(l.cfg.log_path, "w");
		if (!l.log) {
			snprintf(err, sizeof(err), "cannot open '%s': %s", l.cfg.log_path, strerror(errno));
			die_param("log", err);
		}
	}
	l.start_ns = now_ns();
	l.log_prev_ns = l.start_ns;
	l.next_log_ns = l.log ? l.start_ns + l.cfg.log_interval_ns : UINT64_MAX;
	for (int i = 0; i < 2; i++) {
		l.dir[i].free_ns = l.start_ns;
		if (l.dir[i].trace.ms) /* both directions' traces start with the link */
			trace_start(&l.dir[i].trace, l.start_ns);
	}

	/* After SIGTERM is blocked: its writer thread inherits the mask, so
	 * the signal still reaches the signalfd and not a thread it kills. */
	open_capture(&l);
	/* The control socket answers only once everything else is ready:
	 * clients take "it answers" to mean "it forwards". */
	for (int i = 0; i < 2 && l.cfg.sender_threads; i++)
		if (tx_start(&l.dir[i], err, sizeof(err)) < 0)
			die(err);
	if (control_open(&l, epfd, err, sizeof(err)) < 0)
		die(err);
	if (!l.cfg.quiet) {
		char q0[256], q1[256];
		aqm_describe(l.dir[0].q, q0, sizeof(q0));
		aqm_describe(l.dir[1].q, q1, sizeof(q1));
		fprintf(stderr,
			"ckcd-link: %s <-> %s, ab %llu bit/s %.3f ms [%s], ba %llu bit/s %.3f ms [%s], "
			"control %s, seed %llu\n",
			l.cfg.if_name[0], l.cfg.if_name[1], (unsigned long long)l.dir[0].rate_bps,
			l.dir[0].delay_ns / 1e6, q0, (unsigned long long)l.dir[1].rate_bps,
			l.dir[1].delay_ns / 1e6, q1, l.cfg.control_path, (unsigned long long)l.cfg.seed);
	}

	while (running) {
		int n = epoll_wait(epfd, events, 32, -1);
		int readable[2] = {0, 0}, requests = 0;
		struct epoll_event control[32];
		uint64_t t;

		if (n < 0 && errno != EINTR)
			die("epoll_wait failed");
		l.wakeups++;
		for (int i = 0; i < n; i++) {
			struct ep_tag *tag = events[i].data.ptr;
			switch (tag->kind) {
			case EP_PORT_A:
			case EP_PORT_B: {
				int port = tag->kind == EP_PORT_A ? 0 : 1;
				if (events[i].events & EPOLLERR)
					port_clear_error(&l.dir[port], l.cfg.if_name[port]);
				readable[port] = 1;
				break;
			}
			case EP_TIMER: {
				uint64_t expirations;
				if (read(tfd, &expirations, sizeof(expirations)) < 0) {
					/* spurious: nothing to clear */
				}
				armed = UINT64_MAX;
				break;
			}
			case EP_SIGNAL: running = 0; break;
			default: control[requests++] = events[i]; break;
			}
		}
		/* Serve up to now first, so arrivals see the queue the link
		 * would have left them; each control request (stats, a new
		 * discipline or rate) sees the queue as it is at its own time. */
		t = now_ns();
		for (int i = 0; i < 2; i++)
			dir_reclaim(&l.dir[i]);
		serve_all(&l, t);
		for (int i = 0; i < requests; i++) {
			serve_all(&l, now_ns());
			control_event(&l, epfd, control[i].data.ptr, control[i].events);
		}
		/* Single thread: due frames go out before new arrivals are read
		 * (sending can run the receiving host's stack inline). */
		for (int i = 0; i < 2 && !l.cfg.sender_threads; i++)
			tx_release_inline(&l.dir[i]);
		for (int i = 0; i < 2; i++) {
			if (readable[i]) {
				port_receive(&l.dir[i], RX_BUDGET);
				dir_serve(&l.dir[i], now_ns());
			}
		}
		for (int i = 0; i < 2 && !l.cfg.sender_threads; i++) {
			tx_release_inline(&l.dir[i]);
			dir_reclaim(&l.dir[i]);
		}

		t = now_ns();
		if (t >= l.next_log_ns) {
			serve_all(&l, t);
			report_log_tick(&l, t);
			while (l.next_log_ns <= t)
				l.next_log_ns += l.cfg.log_interval_ns;
		}
		arm_timer(tfd, next_wakeup(&l, t), &armed);
	}

	serve_all(&l, now_ns()); /* the final log line and stats: the queues as they are now */
	for (int i = 0; i < 2; i++)
		tx_stop(&l.dir[i]);
	/* Every record written before the final stats count them; the frames
	 * dir_destroy() flushes below are in neither. */
	capture_close(l.cap);
	if (l.log) {
		report_log_tick(&l, now_ns());
		fclose(l.log);
	}
	print_final_stats(&l);
	control_close(&l);
	capture_free(l.cap);
	l.cap = NULL;
	for (int i = 0; i < 2; i++)
		dir_destroy(&l.dir[i]);
	for (int i = 0; i < 2; i++)
		port_close(fd[i], &l.dir[i].ring);
	return 0;
}
