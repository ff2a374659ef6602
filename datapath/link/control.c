/* control.c - ckcd-link's control socket: a UNIX stream socket, one JSON
 * request per line, one JSON reply per line. Nothing a client sends can
 * stop forwarding: bad requests get {"ok": false, ...} and the
 * configuration stays as it was. The commands are documented in
 * docs/ckcd-link.md. */
#define _GNU_SOURCE
#include "link.h"
#include "control.h"
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 16
#define MAX_LINE 65536
/* Replies a client has not read yet, at most. The daemon answers on its
 * forwarding thread: a client that sends requests and never reads would
 * otherwise grow its buffer without bound (53 400 unread `stats` replies took
 * the daemon from 102 to 259 MiB). Past this it is disconnected and counted
 * (`show`: control.clients_dropped_unread). Four times the largest reply, a
 * `stats` of both directions with max_flows 4096 (about 2 MiB). */
#define MAX_UNREAD_REPLY_BYTES (8u << 20)

struct client {
	struct ep_tag tag; /* first */
	int fd;
	char *in;
	size_t in_len;
	int discarding; /* inside an over-long line: drop until newline */
	struct jbuf out;
	size_t out_sent;
};

static struct ep_tag listen_tag = {EP_CONTROL_LISTEN};
static uint64_t clients_dropped_unread;
static int listen_fd = -1;
static struct client *clients[MAX_CLIENTS];

int control_open(struct link *l, int epfd, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_tag};
	const char *path = l->cfg.control_path;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "control socket path too long");
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (listen_fd < 0) {
		snprintf(err, errlen, "socket(AF_UNIX): %s", strerror(errno));
		return -1;
	}
	unlink(path); /* a stale socket from a killed daemon */
	if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(listen_fd, 8) < 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev) < 0) {
		snprintf(err, errlen, "control socket %s: %s", path, strerror(errno));
		close(listen_fd);
		listen_fd = -1;
		return -1;
	}
	return 0;
}

static void client_close(struct client *c)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i] == c)
			clients[i] = NULL;
	close(c->fd); /* also removes it from the epoll set */
	free(c->in);
	jb_free(&c->out);
	free(c);
}

uint64_t control_clients_dropped_unread(void)
{
	return clients_dropped_unread;
}

void control_close(struct link *l)
{
	for (int i = 0; i < MAX_CLIENTS; i++)
		if (clients[i])
			client_close(clients[i]);
	if (listen_fd >= 0) {
		close(listen_fd);
		unlink(l->cfg.control_path);
		listen_fd = -1;
	}
}

/* ---- commands -------------------------------------------------------- */

struct request {
	struct jfield f[JSON_MAX_FIELDS];
	int n;
	struct jbuf *out;
	const char *cmd;
};

static void reply_error(struct jbuf *out, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reply_error(struct jbuf *out, const char *param, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	jb_reset(out);
	jb_obj_open(out);
	jb_kbool(out, "ok", 0);
	jb_kstr(out, "error", msg);
	if (param)
		jb_kstr(out, "param", param);
	jb_obj_close(out);
}

/* Refuse fields a command does not know: a typo must not be ignored. */
static int check_fields(struct request *r, const char *const *allowed)
{
	for (int i = 0; i < r->n; i++) {
		const char *k = r->f[i].key;
		int ok = strcmp(k, "cmd") == 0;
		for (const char *const *a = allowed; !ok && *a; a++)
			ok = strcmp(k, *a) == 0;
		if (!ok) {
			reply_error(r->out, k, "%s: unknown field '%s' for command '%s'", k, k, r->cmd);
			return -1;
		}
	}
	return 0;
}

/* Direction field: "ab"/"fwd" -> 1, "ba"/"rev" -> 2, "both" -> 3. */
static int get_dir_mask(struct request *r, int required, int allow_both)
{
	const struct jfield *f = json_get(r->f, r->n, "dir");

	if (!f) {
		if (required) {
			reply_error(r->out, "dir", "dir: missing (\"ab\" or \"ba\")");
			return -1;
		}
		return 3;
	}
	if (f->type == J_STR) {
		if (!strcmp(f->str, "ab") || !strcmp(f->str, "fwd"))
			return 1;
		if (!strcmp(f->str, "ba") || !strcmp(f->str, "rev"))
			return 2;
		if (allow_both && !strcmp(f->str, "both"))
			return 3;
	}
	reply_error(r->out, "dir", "dir: must be \"ab\" (fwd) or \"ba\" (rev)%s",
		    allow_both ? " or \"both\"" : "");
	return -1;
}

static int get_uint(struct request *r, const char *key, double min, double max, double dflt,
		    double *out)
{
	const struct jfield *f = json_get(r->f, r->n, key);

	if (!f) {
		*out = dflt;
		return 0;
	}
	if (f->type != J_NUM || f->num != floor(f->num) || f->num < min || f->num > max) {
		reply_error(r->out, key, "%s: must be an integer in %.0f..%.0f", key, min, max);
		return -1;
	}
	*out = f->num;
	return 0;
}

static void reply_ok_open(struct request *r)
{
	jb_reset(r->out);
	jb_obj_open(r->out);
	jb_kbool(r->out, "ok", 1);
	jb_kstr(r->out, "cmd", r->cmd);
}

static void cmd_show(struct link *l, struct request *r)
{
	static const char *const allowed[] = {NULL};

	if (check_fields(r, allowed) < 0)
		return;
	reply_ok_open(r);
	report_show(l, r->out);
	jb_obj_close(r->out);
}

static void cmd_stats(struct link *l, struct request *r)
{
	static const char *const allowed[] = {"dir", "max_flows", NULL};
	double max_flows;
	int mask;

	if (check_fields(r, allowed) < 0)
		return;
	if ((mask = get_dir_mask(r, 0, 1)) < 0)
		return;
	if (get_uint(r, "max_flows", 0, FLOW_TABLE_SIZE, 64, &max_flows) < 0)
		return;
	reply_ok_open(r);
	report_stats(l, r->out, (int)max_flows, mask);
	jb_obj_close(r->out);
}

static void cmd_samples(struct link *l, struct request *r)
{
	static const char *const allowed[] = {"dir", "n", NULL};
	double n;
	int mask;

	if (check_fields(r, allowed) < 0)
		return;
	if ((mask = get_dir_mask(r, 1, 0)) < 0)
		return;
	if (get_uint(r, "n", 1, SAMPLE_RING, 100, &n) < 0)
		return;
	reply_ok_open(r);
	report_samples(&l->dir[mask == 1 ? DIR_AB : DIR_BA], r->out, (unsigned)n);
	jb_obj_close(r->out);
}

static void cmd_set_qdisc(struct link *l, struct request *r)
{
	static const char *const allowed[] = {"dir", "spec", NULL};
	const struct jfield *spec = json_get(r->f, r->n, "spec");
	struct link_dir *d;
	char err[512];
	int mask;

	if (check_fields(r, allowed) < 0)
		return;
	if ((mask = get_dir_mask(r, 1, 0)) < 0)
		return;
	if (!spec || spec->type != J_STR) {
		reply_error(r->out, "spec", "spec: missing or not a string (e.g. \"ckcd limit=80\")");
		return;
	}
	d = &l->dir[mask == 1 ? DIR_AB : DIR_BA];
	err[0] = '\0';
	if (dir_set_qdisc(d, spec->str, err, sizeof(err)) < 0) {
		reply_error(r->out, "spec", "spec: %s", err[0] ? err : "refused by the core");
		return;
	}
	reply_ok_open(r);
	jb_kstr(r->out, "dir", d->name);
	{
		char buf[1024];
		aqm_describe(d->q, buf, sizeof(buf));
		jb_kstr(r->out, "qdisc", buf);
	}
	jb_ku64(r->out, "qlen_pkts", aqm_qlen_pkts(d->q));
	jb_obj_close(r->out);
}

/* rate_bps of a set_link request: 0 when absent, -1 (reply written) when bad. */
static int get_rate(struct request *r, uint64_t *rate_bps)
{
	const struct jfield *f = json_get(r->f, r->n, "rate_bps");
	char err[256];

	*rate_bps = 0;
	if (!f)
		return 0;
	/* the bound keeps the conversion exact; check_rate() then says the range */
	if (f->type != J_NUM || f->num != floor(f->num) || f->num < 0 || f->num > 1e15) {
		reply_error(r->out, "rate_bps", "rate_bps: must be an integer number of bit/s");
		return -1;
	}
	*rate_bps = (uint64_t)f->num;
	if (check_rate(*rate_bps, err, sizeof(err)) < 0) {
		reply_error(r->out, "rate_bps", "rate_bps: %s", err);
		return -1;
	}
	return 1;
}

/* delay_ms of a set_link request: 0 when absent, -1 (reply written) when bad. */
static int get_delay(struct request *r, uint64_t *delay_ns)
{
	const struct jfield *f = json_get(r->f, r->n, "delay_ms");
	const double max_ms = (double)LINK_DELAY_MAX_NS / 1e6;

	*delay_ns = 0;
	if (!f)
		return 0;
	if (f->type != J_NUM || !(f->num >= 0 && f->num <= max_ms)) {
		reply_error(r->out, "delay_ms", "delay_ms: must be a number of milliseconds in 0..%.0f", max_ms);
		return -1;
	}
	*delay_ns = (uint64_t)llround(f->num * 1e6);
	return 1;
}

static void reply_link(struct link *l, struct request *r)
{
	reply_ok_open(r);
	jb_key(r->out, "dirs");
	jb_obj_open(r->out);
	for (int i = 0; i < 2; i++) {
		jb_key(r->out, l->dir[i].name);
		jb_obj_open(r->out);
		jb_ku64(r->out, "rate_bps", l->dir[i].rate_bps);
		jb_kdbl(r->out, "delay_ms", (double)l->dir[i].delay_ns / 1e6);
		jb_obj_close(r->out);
	}
	jb_obj_close(r->out);
	jb_obj_close(r->out);
}

/* All or nothing: everything is checked, and every discipline that follows the
 * link's rate is rebuilt aside, before either direction changes. */
static void cmd_set_link(struct link *l, struct request *r)
{
	static const char *const allowed[] = {"dir", "rate_bps", "delay_ms", NULL};
	struct aqm_queue *rebuilt[2] = {NULL, NULL};
	uint64_t rate_bps, delay_ns;
	int mask, has_rate, has_delay;
	char err[256];

	if (check_fields(r, allowed) < 0 || (mask = get_dir_mask(r, 0, 1)) < 0)
		return;
	if ((has_rate = get_rate(r, &rate_bps)) < 0 || (has_delay = get_delay(r, &delay_ns)) < 0)
		return;
	if (!has_rate && !has_delay) {
		reply_error(r->out, "rate_bps", "set_link needs rate_bps and/or delay_ms");
		return;
	}
	for (int i = 0; has_rate && i < 2; i++) {
		if ((mask & (1 << i)) && l->dir[i].trace.ms) {
			reply_error(r->out, "rate_bps", "rate_bps: direction %s follows a trace (--trace): its rate is the "
				    "trace's", l->dir[i].name);
			return;
		}
	}
	for (int i = 0; has_rate && i < 2; i++) {
		if (!(mask & (1 << i)))
			continue;
		if (dir_prepare_rate(&l->dir[i], rate_bps, &rebuilt[i], err, sizeof(err)) < 0) {
			reply_error(r->out, "rate_bps", "rate_bps: the %s discipline refuses it: %s",
				    l->dir[i].name, err);
			for (int j = 0; j < i; j++)
				if (rebuilt[j])
					aqm_destroy(rebuilt[j]);
			return;
		}
	}
	/* Frames already serialized or in the delay line keep their computed
	 * times; the new values apply from the next frame. */
	for (int i = 0; i < 2; i++) {
		if (!(mask & (1 << i)))
			continue;
		if (has_rate)
			dir_commit_rate(&l->dir[i], rate_bps, rebuilt[i]);
		if (has_delay)
			l->dir[i].delay_ns = delay_ns;
	}
	reply_link(l, r);
}

static void cmd_ping(struct link *l, struct request *r)
{
	static const char *const allowed[] = {NULL};

	if (check_fields(r, allowed) < 0)
		return;
	reply_ok_open(r);
	jb_ku64(r->out, "pid", (uint64_t)getpid());
	jb_kdbl(r->out, "uptime_s", (double)(now_ns() - l->start_ns) / 1e9);
	jb_obj_close(r->out);
}

static const struct {
	const char *name;
	void (*fn)(struct link *l, struct request *r);
} commands[] = {
	{"ping", cmd_ping},
	{"show", cmd_show},
	{"stats", cmd_stats},
	{"samples", cmd_samples},
	{"set_qdisc", cmd_set_qdisc},
	{"set_link", cmd_set_link},
};

/* Handles one request line; appends one reply line to out. */
void control_handle_line(struct link *l, char *line, struct jbuf *out)
{
	static const char oom_reply[] = "{\"ok\":false,\"error\":\"out of memory\"}";
	struct request r = {.out = out};
	struct jbuf reply;
	const struct jfield *cmd;
	char err[256];

	jb_init(&reply);
	r.out = &reply;
	r.n = json_parse_flat(line, r.f, JSON_MAX_FIELDS, err, sizeof(err));
	if (r.n < 0) {
		reply_error(&reply, NULL, "%s", err);
		goto done;
	}
	cmd = json_get(r.f, r.n, "cmd");
	if (!cmd || cmd->type != J_STR) {
		reply_error(&reply, "cmd", "cmd: missing or not a string");
		goto done;
	}
	r.cmd = cmd->str;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(commands[i].name, r.cmd) == 0) {
			commands[i].fn(l, &r);
			goto done;
		}
	}
	reply_error(&reply, "cmd",
		    "cmd: unknown command '%s' (ping, show, stats, samples, set_qdisc, set_link)", r.cmd);
done:
	if (reply.oom) {
		jb_reset(&reply);
		jb_raw(&reply, oom_reply, sizeof(oom_reply) - 1);
	}
	jb_raw(out, reply.p, reply.len);
	jb_raw(out, "\n", 1);
	jb_free(&reply);
}

/* ---- connections ----------------------------------------------------- */

static void client_flush(struct client *c, int epfd)
{
	struct epoll_event ev = {.data.ptr = c};

	while (c->out_sent < c->out.len) {
		ssize_t w = send(c->fd, c->out.p + c->out_sent, c->out.len - c->out_sent,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			c->out_sent = c->out.len; /* peer gone: discard */
			break;
		}
		c->out_sent += (size_t)w;
	}
	if (c->out_sent == c->out.len) {
		jb_reset(&c->out);
		c->out_sent = 0;
	}
	ev.events = EPOLLIN | (c->out.len ? EPOLLOUT : 0);
	epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void client_accept(int epfd)
{
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *c;
		int slot = -1;
		struct epoll_event ev;

		if (fd < 0)
			return;
		for (int i = 0; i < MAX_CLIENTS; i++)
			if (!clients[i]) {
				slot = i;
				break;
			}
		c = slot >= 0 ? calloc(1, sizeof(*c)) : NULL;
		if (c)
			c->in = malloc(MAX_LINE);
		if (!c || !c->in) {
			static const char busy[] = "{\"ok\":false,\"error\":\"too many control clients\"}\n";
			if (send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
				/* nothing more to do for a client we refuse */
			}
			close(fd);
			if (c)
				free(c);
			continue;
		}
		c->tag.kind = EP_CONTROL_CLIENT;
		c->fd = fd;
		jb_init(&c->out);
		ev.events = EPOLLIN;
		ev.data.ptr = c;
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c->in);
			free(c);
			continue;
		}
		clients[slot] = c;
	}
}

/* 1 when the client's unread replies are over the bound even after sending
 * what its socket takes now. */
static int over_unread_bound(struct client *c, int epfd)
{
	if (c->out.len - c->out_sent <= MAX_UNREAD_REPLY_BYTES)
		return 0;
	client_flush(c, epfd);
	return c->out.len - c->out_sent > MAX_UNREAD_REPLY_BYTES;
}

static void client_read(struct link *l, struct client *c, int epfd)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->in + c->in_len, MAX_LINE - c->in_len, MSG_DONTWAIT);
		size_t start = 0;

		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			client_flush(c, epfd);
			client_close(c);
			return;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		c->in_len += (size_t)r;
		for (size_t i = 0; i < c->in_len; i++) {
			if (c->in[i] != '\n')
				continue;
			c->in[i] = '\0';
			if (c->discarding) {
				c->discarding = 0;
			} else if (i > start) {
				control_handle_line(l, c->in + start, &c->out);
				if (over_unread_bound(c, epfd)) {
					clients_dropped_unread++;
					fprintf(stderr, "ckcd-link: control client disconnected: more than "
						"%u bytes of replies unread\n", MAX_UNREAD_REPLY_BYTES);
					client_close(c);
					return;
				}
			}
			start = i + 1;
		}
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
		if (c->in_len == MAX_LINE) {
			/* No newline in 64 KiB: answer once, skip to the next one. */
			static const char too_long[] =
				"{\"ok\":false,\"error\":\"request line longer than 65536 bytes\"}\n";
			if (!c->discarding)
				jb_raw(&c->out, too_long, sizeof(too_long) - 1);
			c->discarding = 1;
			c->in_len = 0;
		}
	}
	client_flush(c, epfd);
}

void control_event(struct link *l, int epfd, void *tag, uint32_t events)
{
	struct ep_tag *t = tag;

	if (t->kind == EP_CONTROL_LISTEN) {
		client_accept(epfd);
		return;
	}
	struct client *c = (struct client *)t;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		client_read(l, c, epfd);
	else if (events & EPOLLOUT)
		client_flush(c, epfd);
}
