/* capture.c - the pcapng writer of --capture (capture.h). Blocks follow
 * draft-ietf-opsawg-pcapng and are written in the host's byte order, which
 * the Section Header Block's byte-order magic tells a reader. */
#define _GNU_SOURCE
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define BT_SHB 0x0A0D0D0Au
#define BT_IDB 0x00000001u
#define BT_EPB 0x00000006u
#define BYTE_ORDER_MAGIC 0x1A2B3C4Du
#define LINKTYPE_ETHERNET 1u
#define OPT_COMMENT 1u
#define OPT_IF_NAME 2u
#define OPT_IF_DESCRIPTION 3u
#define OPT_SHB_USERAPPL 4u
#define OPT_IF_TSRESOL 9u
/* An EPB without its data and options: type, length, interface, the two
 * timestamp words, captured and original length, trailing length. */
#define EPB_FIXED 32u

/* 8 MiB of records in flight: at 100 Mbit/s a frame makes two records of
 * under 200 bytes each (enqueue, dequeue), so the writer may stall for
 * about a second before the main thread counts an overrun. A chunk holds
 * the largest record (a 65535-byte snap length) many times over. */
#define CHUNK_BYTES (1u << 20)
#define CHUNKS 8u
/* A chunk goes to the writer when full or this long after its first
 * record: a file read while the daemon runs, or left by a killed daemon,
 * trails the events by about this much at low rates. */
#define FLUSH_AFTER_NS 1000000000ull
#define NOTE_MAX 96u   /* "reason=<32> sojourn_ns=<20 digits> ce=1" */
#define REASON_MAX 32u
#define HEADER_MAX 4096u /* the SHB and 12 IDBs of at most ~280 bytes each */

struct chunk {
	uint8_t *buf;
	uint32_t len;
	uint64_t first_ns;                  /* its first record's time (capture_tick) */
	uint64_t n[CAP_DIRS][CAP_EVENTS];   /* its records, counted once written */
};

struct capture {
	int fd;
	int dirfd;  /* the directory the file was created in, or -1 */
	char *path;
	char *base; /* the file's name in dirfd */
	uint32_t snaplen;
	uint64_t max_bytes;
	int64_t wall_offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC, taken once */
	uint8_t *mem;
	struct chunk chunk[CHUNKS];

	/* the main thread's */
	struct chunk *cur;  /* being filled, or NULL */
	uint64_t committed; /* bytes accepted: the header and every record given a chunk */
	int limit_hit, closed;
	uint64_t skipped, overrun;
	uint64_t failed_after; /* records made after a failed write: never formatted */

	/* Chunk k % CHUNKS is handed over when filled > k and free again when
	 * written > k. filled is the main thread's, written the writer's; both
	 * change under lock, and the main thread reads written with acquire. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t filled, written;
	int stop, started;
	pthread_t thread;

	/* the writer's, read by capture_get_stats with relaxed atomics */
	uint64_t records[CAP_DIRS][CAP_EVENTS];
	uint64_t bytes, failed;
	int error;
};

static const char *const event_names[CAP_EVENTS] = {
	[CAP_ENQUEUE] = "enqueue", [CAP_DROP] = "drop",   [CAP_MARK] = "mark",
	[CAP_DEQUEUE] = "dequeue", [CAP_LOST] = "lost",   [CAP_DISCARD] = "discard",
};

/* Each IDB's if_description, so a capture explains itself in Wireshark. */
static const char *const event_desc[CAP_EVENTS] = {
	[CAP_ENQUEUE] = "frames accepted into the queue",
	[CAP_DROP] = "frames the queue discipline dropped (reason, and sojourn_ns if queued, in the comment)",
	[CAP_MARK] = "frames the queue discipline marked CE (reason in the comment)",
	[CAP_DEQUEUE] = "frames leaving the queue for the link, bytes as queued (sojourn_ns in the comment)",
	[CAP_LOST] = "frames the link's loss model lost after serialization",
	[CAP_DISCARD] = "frames discarded before the queue (reason in the comment)",
};

const char *capture_event_name(enum cap_event ev)
{
	return (unsigned)ev < CAP_EVENTS ? event_names[ev] : "unknown";
}

const char *capture_dir_name(int dir)
{
	return dir == 0 ? "ab" : "ba";
}

/* ---- block encoding ---------------------------------------------------- */

static uint32_t pad4(uint32_t n)
{
	return (n + 3u) & ~3u;
}

static uint8_t *put16(uint8_t *o, uint16_t v)
{
	memcpy(o, &v, sizeof(v));
	return o + sizeof(v);
}

static uint8_t *put32(uint8_t *o, uint32_t v)
{
	memcpy(o, &v, sizeof(v));
	return o + sizeof(v);
}

/* n bytes and the zeros after them: every field and option of a block
 * starts on a 32-bit boundary. */
static uint8_t *put_padded(uint8_t *o, const void *s, uint32_t n)
{
	if (n)
		memcpy(o, s, n);
	memset(o + n, 0, pad4(n) - n);
	return o + pad4(n);
}

static uint8_t *put_opt(uint8_t *o, uint16_t code, const void *v, uint32_t len)
{
	o = put16(o, code);
	o = put16(o, (uint16_t)len);
	return put_padded(o, v, len);
}

/* opt_endofopt, then the block's total length, at its end and into its
 * second word: a reader can walk the file backwards as well. */
static size_t close_block(uint8_t *start, uint8_t *o, int options)
{
	uint32_t total;

	if (options)
		o = put32(o, 0);
	total = (uint32_t)(o - start) + 4u;
	put32(start + 4, total);
	put32(o, total);
	return total;
}

static size_t encode_shb(uint8_t *out)
{
	static const char appl[] = "ckcd-link";
	uint64_t section_len = UINT64_MAX; /* -1, "not given": the file grows as it is written */
	uint8_t *o = out;

	o = put32(o, BT_SHB);
	o = put32(o, 0);
	o = put32(o, BYTE_ORDER_MAGIC);
	o = put16(o, 1); /* version 1.0 */
	o = put16(o, 0);
	memcpy(o, &section_len, sizeof(section_len));
	o += sizeof(section_len);
	o = put_opt(o, OPT_SHB_USERAPPL, appl, sizeof(appl) - 1);
	return close_block(out, o, 1);
}

static size_t encode_idb(uint8_t *out, int dir, int ev, uint32_t snaplen, const char *dir_desc)
{
	/* 10^-9 s: the daemon's clock is in ns, and a dequeue's time less its
	 * enqueue's must be the sojourn the daemon measured, to the ns. */
	const uint8_t tsresol = 9;
	char name[24], desc[192];
	uint8_t *o = out;

	snprintf(name, sizeof(name), "%s.%s", capture_dir_name(dir), event_names[ev]);
	snprintf(desc, sizeof(desc), "ckcd-link %s (%s): %s", capture_dir_name(dir), dir_desc ? dir_desc : "",
		 event_desc[ev]);
	o = put32(o, BT_IDB);
	o = put32(o, 0);
	o = put16(o, LINKTYPE_ETHERNET);
	o = put16(o, 0); /* reserved */
	o = put32(o, snaplen);
	o = put_opt(o, OPT_IF_NAME, name, (uint32_t)strlen(name));
	o = put_opt(o, OPT_IF_DESCRIPTION, desc, (uint32_t)strlen(desc));
	o = put_opt(o, OPT_IF_TSRESOL, &tsresol, 1);
	return close_block(out, o, 1);
}

struct epb {
	uint32_t ifid;
	uint64_t ts; /* ns since the epoch */
	const uint8_t *data;
	uint32_t caplen, len;
	const char *note;
	uint32_t note_len;
};

static uint32_t epb_size(uint32_t caplen, uint32_t note_len)
{
	return EPB_FIXED + pad4(caplen) + (note_len ? 4u + pad4(note_len) + 4u : 0u);
}

static void encode_epb(uint8_t *out, const struct epb *e)
{
	uint8_t *o = out;

	o = put32(o, BT_EPB);
	o = put32(o, 0);
	o = put32(o, e->ifid);
	o = put32(o, (uint32_t)(e->ts >> 32));
	o = put32(o, (uint32_t)e->ts);
	o = put32(o, e->caplen);
	o = put32(o, e->len);
	o = put_padded(o, e->data, e->caplen);
	if (e->note_len)
		o = put_opt(o, OPT_COMMENT, e->note, e->note_len);
	close_block(out, o, e->note_len != 0);
}

/* ---- a record's comment ------------------------------------------------- */

static char *put_word(char *o, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	memcpy(o, s, n);
	return o + n;
}

static char *put_dec(char *o, uint64_t v)
{
	char tmp[20];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*o++ = tmp[--n];
	return o;
}

/* "reason=delay sojourn_ns=5120334 ce=1": the words the event knows, in
 * that order, so a display filter (frame.comment contains
 * "reason=overflow") or a reader's split finds them. Formatted by hand,
 * without printf's format parsing: it runs for every record, on the main
 * thread. */
static uint32_t format_note(const struct cap_rec *r, char *out)
{
	char *o = out;

	if (r->reason) {
		o = put_word(o, "reason=", 8);
		o = put_word(o, r->reason, REASON_MAX);
	}
	if (r->sojourn_ns >= 0) {
		if (o != out)
			*o++ = ' ';
		o = put_word(o, "sojourn_ns=", 12);
		o = put_dec(o, (uint64_t)r->sojourn_ns);
	}
	if (r->ce) {
		if (o != out)
			*o++ = ' ';
		o = put_word(o, "ce=1", 5);
	}
	return (uint32_t)(o - out);
}

/* ---- the writer thread -------------------------------------------------- */

/* 0, or the errno that stopped it (ENOSPC for a write of nothing). */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : ENOSPC;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One chunk into the file; then its records count as written. After a
 * failed write nothing more is written: the file is cut back to its last
 * whole block, so it stays readable up to the failure, and every record
 * from then on counts as failed. */
static void write_chunk(struct capture *c, const struct chunk *k)
{
	int e = c->error ? c->error : write_all(c->fd, k->buf, k->len);
	uint64_t total = 0;

	for (int d = 0; d < CAP_DIRS; d++) {
		for (int ev = 0; ev < CAP_EVENTS; ev++) {
			total += k->n[d][ev];
			if (!e)
				__atomic_store_n(&c->records[d][ev], c->records[d][ev] + k->n[d][ev],
						 __ATOMIC_RELAXED);
		}
	}
	if (!e) {
		__atomic_store_n(&c->bytes, c->bytes + k->len, __ATOMIC_RELAXED);
		return;
	}
	if (!c->error) {
		if (ftruncate(c->fd, (off_t)c->bytes) < 0) {
			/* the partial block stays; a reader stops at it */
		}
		__atomic_store_n(&c->error, e, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&c->failed, c->failed + total, __ATOMIC_RELAXED);
}

static void *writer_main(void *arg)
{
	struct capture *c = arg;
	uint64_t next;

	prctl(PR_SET_NAME, "ckcd-capture", 0, 0, 0); /* its own line in top and perf */
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (c->written == c->filled && !c->stop)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->written == c->filled)
			break; /* stopped, and every chunk handed over is written */
		next = c->written;
		pthread_mutex_unlock(&c->lock);
		write_chunk(c, &c->chunk[next % CHUNKS]);
		pthread_mutex_lock(&c->lock);
		__atomic_store_n(&c->written, next + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- the main thread's side --------------------------------------------- */

static void hand_off(struct capture *c)
{
	pthread_mutex_lock(&c->lock);
	c->filled++;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
	c->cur = NULL;
}

/* The chunk a record of size bytes goes into: the one being filled while
 * it has room, else the next after handing that one to the writer. NULL
 * when the writer still holds every chunk (the disk is behind): the main
 * thread never waits for it. */
static struct chunk *chunk_for(struct capture *c, uint32_t size, uint64_t t)
{
	struct chunk *k = c->cur;

	if (k && k->len + size <= CHUNK_BYTES)
		return k;
	if (k)
		hand_off(c);
	if (c->filled - __atomic_load_n(&c->written, __ATOMIC_ACQUIRE) >= CHUNKS)
		return NULL;
	k = &c->chunk[c->filled % CHUNKS];
	k->len = 0;
	k->first_ns = t;
	memset(k->n, 0, sizeof(k->n));
	c->cur = k;
	return k;
}

static uint64_t wall_ns(const struct capture *c, uint64_t mono_ns)
{
	int64_t w = (int64_t)mono_ns + c->wall_offset_ns;

	return w < 0 ? 0 : (uint64_t)w;
}

void capture_record(struct capture *c, int dir, enum cap_event ev, const struct cap_rec *r)
{
	char note[NOTE_MAX];
	struct chunk *k;
	struct epb e;
	uint32_t size;

	if (c->closed || (unsigned)dir >= CAP_DIRS || (unsigned)ev >= CAP_EVENTS)
		return;
	/* After a failed write nothing more reaches the file: count the record
	 * as failed at once instead of formatting it for a writer that drops it. */
	if (__atomic_load_n(&c->error, __ATOMIC_RELAXED)) {
		c->failed_after++;
		return;
	}
	e.caplen = r->len < r->avail ? r->len : r->avail;
	if (e.caplen > c->snaplen)
		e.caplen = c->snaplen;
	e.note_len = format_note(r, note);
	size = epb_size(e.caplen, e.note_len);
	/* Past the limit nothing more is written, not even a smaller record
	 * that would still fit: the file then holds every event up to a time,
	 * which a reader can trust, rather than a sample with holes. */
	if (c->limit_hit || c->committed + size > c->max_bytes) {
		c->limit_hit = 1;
		c->skipped++;
		return;
	}
	k = chunk_for(c, size, r->t_ns);
	if (!k) {
		c->overrun++;
		return;
	}
	e.ifid = (uint32_t)dir * CAP_EVENTS + (uint32_t)ev;
	e.ts = wall_ns(c, r->t_ns);
	e.data = r->data;
	e.len = r->len;
	e.note = note;
	encode_epb(k->buf + k->len, &e);
	k->len += size;
	k->n[dir][ev]++;
	c->committed += size;
}

uint64_t capture_tick(struct capture *c, uint64_t now_ns)
{
	if (c->closed || !c->cur)
		return UINT64_MAX;
	/* A lost frame's time is its end of serialization, which may be ahead
	 * of now: compare without subtracting. */
	if (now_ns >= c->cur->first_ns + FLUSH_AFTER_NS) {
		hand_off(c);
		return UINT64_MAX;
	}
	return c->cur->first_ns + FLUSH_AFTER_NS;
}

/* ---- open and close ------------------------------------------------------- */

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* CLOCK_REALTIME read between two CLOCK_MONOTONIC readings, against their
 * midpoint. One offset for the whole capture: the daemon's intervals (a
 * sojourn) stay exact in the file, and an NTP step during the run moves
 * no record against another. */
static int64_t wall_offset(void)
{
	struct timespec m0, r, m1;

	clock_gettime(CLOCK_MONOTONIC, &m0);
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m1);
	return (int64_t)ts_ns(&r) - (int64_t)((ts_ns(&m0) + ts_ns(&m1)) / 2);
}

/* The SHB and the IDBs, written at once: a capture in which no frame
 * passed is still a valid file with its interfaces. */
static int write_header(struct capture *c, const struct capture_config *cfg, char *err, size_t errlen)
{
	uint8_t hdr[HEADER_MAX];
	size_t n = encode_shb(hdr);
	int e;

	for (int d = 0; d < CAP_DIRS; d++)
		for (int ev = 0; ev < CAP_EVENTS; ev++)
			n += encode_idb(hdr + n, d, ev, c->snaplen, cfg->dir_desc[d]);
	if (n > c->max_bytes) {
		snprintf(err, errlen, "the size limit (%llu bytes) is below the header's %zu",
			 (unsigned long long)c->max_bytes, n);
		return -1;
	}
	e = write_all(c->fd, hdr, n);
	if (e) {
		snprintf(err, errlen, "writing '%s': %s", c->path, strerror(e));
		return -1;
	}
	c->bytes = c->committed = n;
	return 0;
}

static int start_writer(struct capture *c, char *err, size_t errlen)
{
	int e;

	c->mem = malloc((size_t)CHUNKS * CHUNK_BYTES); /* pages are touched only as chunks fill */
	if (!c->mem) {
		snprintf(err, errlen, "out of memory for the capture's buffers");
		return -1;
	}
	for (unsigned i = 0; i < CHUNKS; i++)
		c->chunk[i].buf = c->mem + (size_t)i * CHUNK_BYTES;
	/* The writer starts with SIGXFSZ blocked: past a file size limit
	 * (ulimit -f) its write() then fails with EFBIG, which stops the capture
	 * alone, instead of the signal killing the whole daemon mid-run. */
	sigset_t xfsz, old;
	sigemptyset(&xfsz);
	sigaddset(&xfsz, SIGXFSZ);
	pthread_sigmask(SIG_BLOCK, &xfsz, &old);
	e = pthread_create(&c->thread, NULL, writer_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		snprintf(err, errlen, "capture writer thread: %s", strerror(e));
		return -1;
	}
	c->started = 1;
	return 0;
}

static int create_file(struct capture *c, char *err, size_t errlen)
{
	/* O_EXCL refuses an existing file and, with O_NOFOLLOW, any symbolic
	 * link, dangling or not: as root the daemon must not be the tool
	 * that truncates /etc/passwd through a planted link. The directory is
	 * opened once, not through a link either, and the file made and (on a
	 * failed start) removed relative to it, so a directory swapped for a
	 * link in between cannot send either elsewhere. Mode 0600: the frames'
	 * first bytes are the experiment's traffic, not every local user's. */
	char *dir_copy = strdup(c->path), *base_copy = strdup(c->path);

	if (!dir_copy || !base_copy || !(c->base = strdup(basename(base_copy)))) {
		free(dir_copy);
		free(base_copy);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->dirfd = open(dirname(dir_copy), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	free(dir_copy);
	free(base_copy);
	if (c->dirfd < 0) {
		snprintf(err, errlen, "cannot open the directory of '%s': %s", c->path, strerror(errno));
		return -1;
	}
	c->fd = openat(c->dirfd, c->base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (c->fd >= 0)
		return 0;
	if (errno == EEXIST)
		snprintf(err, errlen, "'%s' already exists (a capture never overwrites a file or follows a link)",
			 c->path);
	else
		snprintf(err, errlen, "cannot create '%s': %s", c->path, strerror(errno));
	return -1;
}

struct capture *capture_open(const struct capture_config *cfg, char *err, size_t errlen)
{
	struct capture *c = calloc(1, sizeof(*c));

	if (!c || !(c->path = strdup(cfg->path))) {
		snprintf(err, errlen, "out of memory");
		free(c);
		return NULL;
	}
	c->fd = c->dirfd = -1;
	c->snaplen = cfg->snaplen;
	c->max_bytes = cfg->max_bytes;
	c->wall_offset_ns = wall_offset();
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	if (create_file(c, err, errlen) < 0) {
		capture_free(c);
		return NULL;
	}
	if (write_header(c, cfg, err, errlen) < 0 || start_writer(c, err, errlen) < 0) {
		unlinkat(c->dirfd, c->base, 0); /* ours: O_EXCL created it */
		capture_free(c);
		return NULL;
	}
	return c;
}

void capture_close(struct capture *c)
{
	if (!c || c->closed)
		return;
	c->closed = 1;
	if (c->cur)
		hand_off(c);
	if (c->started) {
		pthread_mutex_lock(&c->lock);
		c->stop = 1;
		pthread_cond_signal(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
		c->started = 0;
	}
	/* close() can be where a network file system reports a failed write. */
	if (c->fd >= 0 && close(c->fd) < 0 && !c->error)
		c->error = errno;
	c->fd = -1;
}

void capture_free(struct capture *c)
{
	if (!c)
		return;
	capture_close(c);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	if (c->dirfd >= 0)
		close(c->dirfd);
	free(c->mem);
	free(c->path);
	free(c->base);
	free(c);
}

void capture_get_stats(const struct capture *c, struct capture_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (int d = 0; d < CAP_DIRS; d++)
		for (int ev = 0; ev < CAP_EVENTS; ev++)
			st->records[d][ev] = __atomic_load_n(&c->records[d][ev], __ATOMIC_RELAXED);
	st->bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
	st->failed = __atomic_load_n(&c->failed, __ATOMIC_RELAXED) + c->failed_after;
	st->error = __atomic_load_n(&c->error, __ATOMIC_RELAXED);
	st->skipped = c->skipped;
	st->overrun = c->overrun;
}

const char *capture_path(const struct capture *c)
{
	return c->path;
}

uint32_t capture_snaplen(const struct capture *c)
{
	return c->snaplen;
}

uint64_t capture_max_bytes(const struct capture *c)
{
	return c->max_bytes;
}
