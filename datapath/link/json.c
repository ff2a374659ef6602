/* json.c - JSON output buffer and flat request parser for ckcd-link. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jb_init(struct jbuf *b)
{
	memset(b, 0, sizeof(*b));
}

void jb_free(struct jbuf *b)
{
	free(b->p);
	jb_init(b);
}

void jb_reset(struct jbuf *b)
{
	b->len = 0;
	b->oom = 0;
	if (b->p)
		b->p[0] = '\0';
}

static int jb_reserve(struct jbuf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	size_t cap;
	char *p;

	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
	if (jb_reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void jb_printf(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || jb_reserve(b, (size_t)n) < 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void jb_sep(struct jbuf *b)
{
	char last;

	if (b->len == 0)
		return;
	last = b->p[b->len - 1];
	if (last != '{' && last != '[' && last != ':' && last != '\n')
		jb_raw(b, ",", 1);
}

void jb_obj_open(struct jbuf *b)
{
	jb_sep(b);
	jb_raw(b, "{", 1);
}

void jb_obj_close(struct jbuf *b)
{
	jb_raw(b, "}", 1);
}

void jb_arr_open(struct jbuf *b)
{
	jb_sep(b);
	jb_raw(b, "[", 1);
}

void jb_arr_close(struct jbuf *b)
{
	jb_raw(b, "]", 1);
}

static void jb_escaped(struct jbuf *b, const char *s)
{
	jb_raw(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			jb_raw(b, e, 2);
		} else if (c < 0x20) {
			jb_printf(b, "\\u%04x", c);
		} else {
			jb_raw(b, s, 1);
		}
	}
	jb_raw(b, "\"", 1);
}

void jb_key(struct jbuf *b, const char *key)
{
	jb_sep(b);
	jb_escaped(b, key);
	jb_raw(b, ":", 1);
}

void jb_str(struct jbuf *b, const char *s)
{
	jb_sep(b);
	jb_escaped(b, s);
}

void jb_u64(struct jbuf *b, uint64_t v)
{
	jb_sep(b);
	jb_printf(b, "%llu", (unsigned long long)v);
}

void jb_i64(struct jbuf *b, int64_t v)
{
	jb_sep(b);
	jb_printf(b, "%lld", (long long)v);
}

void jb_dbl(struct jbuf *b, double v)
{
	jb_sep(b);
	if (!isfinite(v))
		jb_raw(b, "null", 4);
	else
		jb_printf(b, "%.6g", v);
}

void jb_bool(struct jbuf *b, int v)
{
	jb_sep(b);
	if (v)
		jb_raw(b, "true", 4);
	else
		jb_raw(b, "false", 5);
}

void jb_kstr(struct jbuf *b, const char *key, const char *s)
{
	jb_key(b, key);
	jb_str(b, s);
}

void jb_ku64(struct jbuf *b, const char *key, uint64_t v)
{
	jb_key(b, key);
	jb_u64(b, v);
}

void jb_kdbl(struct jbuf *b, const char *key, double v)
{
	jb_key(b, key);
	jb_dbl(b, v);
}

void jb_kbool(struct jbuf *b, const char *key, int v)
{
	jb_key(b, key);
	jb_bool(b, v);
}

/* ---- parser ---------------------------------------------------------- */

struct cursor {
	char *p;
	char *err;
	size_t errlen;
};

static void skip_ws(struct cursor *c)
{
	while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')
		c->p++;
}

static int fail(struct cursor *c, const char *msg)
{
	snprintf(c->err, c->errlen, "malformed request: %s", msg);
	return -1;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes a string starting at the opening quote, in place. */
static int parse_string(struct cursor *c, const char **out)
{
	char *w, *r;

	if (*c->p != '"')
		return fail(c, "expected a string");
	r = w = ++c->p;
	*out = w;
	for (;;) {
		char ch = *r++;
		if (ch == '\0')
			return fail(c, "unterminated string");
		if (ch == '"')
			break;
		if ((unsigned char)ch < 0x20)
			return fail(c, "control character in string");
		if (ch != '\\') {
			*w++ = ch;
			continue;
		}
		ch = *r++;
		switch (ch) {
		case '"': *w++ = '"'; break;
		case '\\': *w++ = '\\'; break;
		case '/': *w++ = '/'; break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'u': {
			int v = 0, i;
			for (i = 0; i < 4; i++) {
				int h = hexval(r[i]);
				if (h < 0)
					return fail(c, "bad \\u escape");
				v = v << 4 | h;
			}
			if (v == 0 || v > 0x7f)
				return fail(c, "only ASCII \\u escapes are accepted");
			*w++ = (char)v;
			r += 4;
			break;
		}
		default:
			return fail(c, "bad escape");
		}
	}
	c->p = r;
	*w = '\0'; /* w < r: the terminator never overwrites unread input */
	return 0;
}

static int parse_value(struct cursor *c, struct jfield *f)
{
	char *end;

	if (*c->p == '"') {
		f->type = J_STR;
		return parse_string(c, &f->str);
	}
	if (*c->p == '{' || *c->p == '[')
		return fail(c, "nested objects and arrays are not accepted");
	if (strncmp(c->p, "true", 4) == 0) {
		f->type = J_BOOL;
		f->boolean = 1;
		c->p += 4;
		return 0;
	}
	if (strncmp(c->p, "false", 5) == 0) {
		f->type = J_BOOL;
		f->boolean = 0;
		c->p += 5;
		return 0;
	}
	if (strncmp(c->p, "null", 4) == 0) {
		f->type = J_NULL;
		c->p += 4;
		return 0;
	}
	if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
		f->type = J_NUM;
		f->num = strtod(c->p, &end);
		if (end == c->p || !isfinite(f->num))
			return fail(c, "bad number");
		/* strtod also takes hex and "inf": insist on JSON's charset */
		for (char *q = c->p; q < end; q++)
			if (!strchr("0123456789+-.eE", *q))
				return fail(c, "bad number");
		c->p = end;
		return 0;
	}
	return fail(c, "expected a value");
}

int json_parse_flat(char *line, struct jfield *fields, int max_fields, char *err, size_t errlen)
{
	struct cursor c = {line, err, errlen};
	int n = 0;

	skip_ws(&c);
	if (*c.p != '{')
		return fail(&c, "expected a JSON object");
	c.p++;
	skip_ws(&c);
	if (*c.p == '}') {
		c.p++;
		goto done;
	}
	for (;;) {
		struct jfield f;

		if (n == max_fields)
			return fail(&c, "too many fields");
		memset(&f, 0, sizeof(f));
		skip_ws(&c);
		if (parse_string(&c, &f.key) < 0)
			return -1;
		skip_ws(&c);
		if (*c.p != ':')
			return fail(&c, "expected ':'");
		c.p++;
		skip_ws(&c);
		if (parse_value(&c, &f) < 0)
			return -1;
		if (json_get(fields, n, f.key))
			return fail(&c, "duplicate key");
		fields[n++] = f;
		skip_ws(&c);
		if (*c.p == ',') {
			c.p++;
			continue;
		}
		if (*c.p == '}') {
			c.p++;
			break;
		}
		return fail(&c, "expected ',' or '}'");
	}
done:
	skip_ws(&c);
	if (*c.p != '\0')
		return fail(&c, "trailing characters after the object");
	return n;
}

const struct jfield *json_get(const struct jfield *f, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (strcmp(f[i].key, key) == 0)
			return &f[i];
	return NULL;
}
