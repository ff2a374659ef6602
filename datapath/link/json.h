/* json.h - the little JSON ckcd-link needs: a growing output buffer with
 * comma bookkeeping, and a parser for one flat request object per line
 * ({"cmd": "set_link", "rate_bps": 50000000, ...}: string, number, boolean
 * and null values; nested objects and arrays are refused). */
#ifndef CKCD_LINK_JSON_H
#define CKCD_LINK_JSON_H

#include <stddef.h>
#include <stdint.h>

struct jbuf {
	char *p;
	size_t len, cap;
	int oom; /* an allocation failed: the content is truncated */
};

void jb_init(struct jbuf *b);
void jb_free(struct jbuf *b);
void jb_reset(struct jbuf *b);
void jb_raw(struct jbuf *b, const char *s, size_t n);
void jb_printf(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Structure: jb_obj_open/close, jb_arr_open/close; a comma is inserted
 * automatically before a key or an array element when one is needed. */
void jb_obj_open(struct jbuf *b);
void jb_obj_close(struct jbuf *b);
void jb_arr_open(struct jbuf *b);
void jb_arr_close(struct jbuf *b);
void jb_key(struct jbuf *b, const char *key); /* "key": */
void jb_str(struct jbuf *b, const char *s);    /* quoted, escaped value */
void jb_u64(struct jbuf *b, uint64_t v);
void jb_i64(struct jbuf *b, int64_t v);
void jb_dbl(struct jbuf *b, double v);
void jb_bool(struct jbuf *b, int v);
/* key + value shorthands */
void jb_kstr(struct jbuf *b, const char *key, const char *s);
void jb_ku64(struct jbuf *b, const char *key, uint64_t v);
void jb_kdbl(struct jbuf *b, const char *key, double v);
void jb_kbool(struct jbuf *b, const char *key, int v);

enum jtype { J_STR, J_NUM, J_BOOL, J_NULL };

struct jfield {
	const char *key;
	enum jtype type;
	const char *str; /* J_STR: decoded, NUL-terminated (points into the line) */
	double num;      /* J_NUM */
	int boolean;     /* J_BOOL */
};

#define JSON_MAX_FIELDS 16

/* Parses line (modified in place). Returns the number of fields, or -1 with
 * a message in err. */
int json_parse_flat(char *line, struct jfield *fields, int max_fields, char *err, size_t errlen);

/* Field lookup; NULL when absent. */
const struct jfield *json_get(const struct jfield *f, int n, const char *key);

#endif
