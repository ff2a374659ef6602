/* capture.h - ckcd-link's optional packet capture (--capture FILE): every
 * event a frame meets in the daemon, written as pcapng (the IETF draft
 * draft-ietf-opsawg-pcapng) so that tshark and Wireshark read it.
 *
 * Layout (docs/ckcd-link.md, "Packet capture"): a Section Header Block;
 * one Interface Description Block per (direction, event), named
 * "ab.enqueue", "ab.drop", ..., "ba.discard" (link type Ethernet, if_tsresol
 * 9: nanoseconds), so a display filter on frame.interface_name picks one
 * event; then an Enhanced Packet Block per event: the frame up to the snap
 * length, its full length, the daemon's CLOCK_MONOTONIC time moved to wall
 * time by one offset taken at open, and what the event knows (a drop's
 * reason, a dequeue's sojourn) as "key=value" words in its comment.
 *
 * Threads: every event is made by one thread, the main thread (the sender
 * threads only send), and that thread must never wait on the disk: it
 * reads arrivals and feeds the senders. So records go into large chunks in
 * memory, and a writer thread of the capture's own writes the full ones.
 * The two meet under a mutex held only to pass a chunk's index, never
 * across a write. When the disk falls behind by every chunk, records are
 * counted as overrun rather than waited for. */
#ifndef CKCD_LINK_CAPTURE_H
#define CKCD_LINK_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#define CAP_SNAPLEN_DEFAULT 128u
#define CAP_SNAPLEN_MIN 64u    /* Ethernet, IPv6 and a TCP header's ports and sequence numbers */
#define CAP_SNAPLEN_MAX 65535u /* the largest snap length pcapng readers accept without complaint */
#define CAP_MAX_MB_DEFAULT 1024u
#define CAP_MAX_MB_MAX (1u << 20) /* 1 TiB: anything larger is a typo, not a plan */

enum cap_event {
	CAP_ENQUEUE,  /* accepted into the queue */
	CAP_DROP,     /* dropped by the discipline (reason=) */
	CAP_MARK,     /* marked CE by the discipline (reason=) */
	CAP_DEQUEUE,  /* left the queue for the serializer (sojourn_ns=) */
	CAP_LOST,     /* lost on the link by --loss, after serialization */
	CAP_DISCARD,  /* discarded before the queue (reason=: rx_oversize, ...) */
	CAP_EVENTS
};
#define CAP_DIRS 2 /* ab, ba */

struct capture_config {
	const char *path;
	uint32_t snaplen;
	uint64_t max_bytes;      /* the file's size limit, header included */
	const char *dir_desc[CAP_DIRS]; /* "la -> lb": each IDB's if_description says it */
};

/* One event's frame. */
struct cap_rec {
	uint64_t t_ns;        /* CLOCK_MONOTONIC, the daemon's clock */
	const uint8_t *data;
	uint32_t avail;       /* bytes readable at data */
	uint32_t len;         /* the frame's full length */
	const char *reason;   /* NULL, or the reason= word */
	int64_t sojourn_ns;   /* -1: none */
	int ce;               /* a dequeue: the frame leaves CE-marked */
};

struct capture_stats {
	uint64_t records[CAP_DIRS][CAP_EVENTS]; /* in the file */
	uint64_t bytes;    /* in the file */
	uint64_t skipped;  /* not written: the file would have exceeded max_bytes */
	uint64_t overrun;  /* not written: the writer held every chunk */
	uint64_t failed;   /* not written: a write failed (error) */
	int error;         /* errno of the first failed write, or 0 */
};

struct capture;

/* Creates path (never an existing file or a symbolic link: the daemon runs
 * as root) and writes the header blocks. NULL with err on failure. */
struct capture *capture_open(const struct capture_config *cfg, char *err, size_t errlen);
/* Records one event of direction dir (0 ab, 1 ba). Main thread only. */
void capture_record(struct capture *c, int dir, enum cap_event ev, const struct cap_rec *r);
/* Hands a chunk older than a second to the writer, so the file trails the
 * events by about that much; returns when to call again (UINT64_MAX: no
 * records waiting). */
uint64_t capture_tick(struct capture *c, uint64_t now_ns);
/* Writes what is buffered, stops the writer and closes the file; later
 * records are ignored. Statistics stay readable until capture_free(). */
void capture_close(struct capture *c);
void capture_free(struct capture *c);

void capture_get_stats(const struct capture *c, struct capture_stats *st);
const char *capture_path(const struct capture *c);
uint32_t capture_snaplen(const struct capture *c);
uint64_t capture_max_bytes(const struct capture *c);
const char *capture_event_name(enum cap_event ev);
const char *capture_dir_name(int dir);

#endif
