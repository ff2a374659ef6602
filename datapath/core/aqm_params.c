/* aqm_params.c - the one place where specs are parsed and parameters checked.
 *
 * A spec is "<discipline> key=value key=value ..." (whitespace separated);
 * "bands" also takes child specs after '|'. Every value is checked against
 * the discipline's table (name, unit, min, max, default) here, once; error
 * messages name the discipline and the parameter. Also the freestanding text
 * helpers the core uses instead of libc.
 */
#include "aqm_impl.h"

/* ---- freestanding string helpers ---------------------------------------- */

size_t aqm_strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

int aqm_streqn(const char *a, size_t alen, const char *b)
{
	size_t i;

	for (i = 0; i < alen; i++)
		if (a[i] != b[i] || !b[i])
			return 0;
	return b[alen] == 0;
}

void aqm_zero(void *p, size_t n)
{
	volatile unsigned char *c = p; /* volatile: keep the compiler from calling memset */

	while (n--)
		*c++ = 0;
}

/* ---- bounded writer ------------------------------------------------------ */

static size_t put_char(char *buf, size_t len, size_t pos, char c)
{
	if (len && pos + 1 < len) {
		buf[pos] = c;
		buf[pos + 1] = 0;
	}
	return pos + 1;
}

size_t aqm_put_strn(char *buf, size_t len, size_t pos, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && s[i]; i++)
		pos = put_char(buf, len, pos, s[i]);
	if (len && pos < len)
		buf[pos] = 0;
	return pos;
}

size_t aqm_put_str(char *buf, size_t len, size_t pos, const char *s)
{
	return aqm_put_strn(buf, len, pos, s, (size_t)-1);
}

size_t aqm_put_u64(char *buf, size_t len, size_t pos, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		pos = put_char(buf, len, pos, tmp[--n]);
	return pos;
}

size_t aqm_put_i64(char *buf, size_t len, size_t pos, int64_t v)
{
	if (v < 0) {
		pos = put_char(buf, len, pos, '-');
		return aqm_put_u64(buf, len, pos, (uint64_t)0 - (uint64_t)v);
	}
	return aqm_put_u64(buf, len, pos, (uint64_t)v);
}

size_t aqm_put_fixed(char *buf, size_t len, size_t pos, int64_t v, unsigned decimals)
{
	uint64_t scale = 1, a, frac;
	unsigned i;
	char digits[20];

	if (!decimals)
		return aqm_put_i64(buf, len, pos, v);
	for (i = 0; i < decimals; i++)
		scale *= 10;
	if (v < 0) {
		pos = put_char(buf, len, pos, '-');
		a = (uint64_t)0 - (uint64_t)v;
	} else {
		a = (uint64_t)v;
	}
	pos = aqm_put_u64(buf, len, pos, a / scale);
	frac = a % scale;
	if (!frac)
		return pos;
	for (i = decimals; i-- > 0;) {
		digits[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	i = decimals;
	while (i > 0 && digits[i - 1] == '0') /* trailing zeros off: 0.0020 -> 0.002 */
		i--;
	pos = put_char(buf, len, pos, '.');
	return aqm_put_strn(buf, len, pos, digits, i);
}

size_t aqm_put_kv(char *buf, size_t len, size_t pos, const char *key, uint64_t v)
{
	if (pos)
		pos = put_char(buf, len, pos, ' ');
	pos = aqm_put_str(buf, len, pos, key);
	pos = put_char(buf, len, pos, '=');
	return aqm_put_u64(buf, len, pos, v);
}

size_t aqm_put_kfixed(char *buf, size_t len, size_t pos, const char *key, int64_t v,
		      unsigned decimals)
{
	if (pos)
		pos = put_char(buf, len, pos, ' ');
	pos = aqm_put_str(buf, len, pos, key);
	pos = put_char(buf, len, pos, '=');
	return aqm_put_fixed(buf, len, pos, v, decimals);
}

size_t aqm_put_kvi(char *buf, size_t len, size_t pos, const char *key, int64_t v)
{
	if (pos)
		pos = put_char(buf, len, pos, ' ');
	pos = aqm_put_str(buf, len, pos, key);
	pos = put_char(buf, len, pos, '=');
	return aqm_put_i64(buf, len, pos, v);
}

/* The unknown name into err->key when it is printable ASCII and fits (a
 * host may show it; a cut multibyte character or a control byte must not
 * reach it), else "". */
static void err_key(struct aqm_error *err, const char *key, size_t n)
{
	size_t i;

	err->key[0] = 0;
	if (n >= sizeof(err->key))
		return;
	for (i = 0; i < n; i++)
		if (key[i] < 0x21 || key[i] > 0x7e)
			return;
	aqm_put_strn(err->key, sizeof(err->key), 0, key, n);
}

void aqm_err_clear(struct aqm_error *err)
{
	err->code = AQM_ERR_NONE;
	err->disc = 0;
	err->param = -1;
	err->other = -1;
	err->band = -1;
	err->key[0] = 0;
	err->text[0] = 0;
}

void aqm_err(struct aqm_error *err, enum aqm_err_code code, const char *a, const char *b, const char *c)
{
	size_t pos;

	err->code = code;
	err->text[0] = 0;
	pos = aqm_put_str(AQM_ERR_TEXT(err), 0, a);
	if (b)
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, b);
	if (c)
		aqm_put_str(AQM_ERR_TEXT(err), pos, c);
}

void aqm_err_at(struct aqm_error *err, enum aqm_err_code code, const struct aqm_ops *ops, int param,
		int other)
{
	err->code = code;
	err->disc = ops ? ops->name : 0;
	err->param = param;
	err->other = other;
}

void aqm_err_param(struct aqm_error *err, enum aqm_err_code code, const struct aqm_ops *ops, int param,
		   int other, const char *what)
{
	size_t pos;

	aqm_err_at(err, code, ops, param, other);
	pos = aqm_put_str(AQM_ERR_TEXT(err), 0, ops->name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter '");
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ops->params[param].name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' ");
	aqm_put_str(AQM_ERR_TEXT(err), pos, what);
}

/* ---- the registry -------------------------------------------------------- */

/* Adding a discipline: one file defining aqm_<name>_ops, one line here. */
static const struct aqm_ops *const registry[] = {
	&aqm_droptail_ops,
	&aqm_red_ops,
	&aqm_codel_ops,
	&aqm_hdcodel_ops,
	&aqm_choke_ops,
	&aqm_sred_ops,
	&aqm_fred_ops,
	&aqm_sfb_ops,
	&aqm_care_ops,
	&aqm_ckcd_ops,
	&aqm_cocoa_ops,
	&aqm_fq_codel_ops,
	&aqm_pie_ops,
	&aqm_dualpi2_ops,
	&aqm_bands_ops,
};
#define NREGISTRY (sizeof(registry) / sizeof(registry[0]))

static const char *names[NREGISTRY + 1];

const char *const *aqm_discipline_names(void)
{
	unsigned i;

	for (i = 0; i < NREGISTRY; i++)
		names[i] = registry[i]->name;
	names[NREGISTRY] = 0;
	return names;
}

const struct aqm_ops *aqm_find_ops(const char *name, size_t len)
{
	unsigned i;

	for (i = 0; i < NREGISTRY; i++)
		if (aqm_streqn(name, len, registry[i]->name))
			return registry[i];
	return 0;
}

int aqm_param_desc(const char *name, unsigned i, struct aqm_param_desc *out)
{
	const struct aqm_ops *ops = aqm_find_ops(name, aqm_strlen(name));
	const struct aqm_param *p;

	if (!ops || i >= ops->nparams)
		return 0;
	p = &ops->params[i];
	out->name = p->name;
	out->unit = p->unit;
	out->min = p->min;
	out->max = p->max;
	out->def = p->def;
	out->decimals = p->decimals;
	out->text = p->kind == AQM_PARAM_TEXT;
	out->def_text = p->def_text;
	return 1;
}

int aqm_discipline_takes_children(const char *name)
{
	const struct aqm_ops *ops = aqm_find_ops(name, aqm_strlen(name));

	return ops && ops->takes_children;
}

/* ---- the parser ----------------------------------------------------------- */

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* "[-]digits[.digits]" -> value * 10^decimals. Returns 0, -1 not a number,
 * -2 too many decimals, -3 too large. */
static int parse_fixed(const char *s, size_t n, unsigned decimals, int64_t *out)
{
	size_t i = 0;
	int neg = 0, seen_digit = 0;
	unsigned frac_digits = 0, in_frac = 0;
	uint64_t v = 0;

	if (i < n && (s[i] == '-' || s[i] == '+')) {
		neg = s[i] == '-';
		i++;
	}
	for (; i < n; i++) {
		char c = s[i];

		if (c == '.' && !in_frac) {
			in_frac = 1;
			continue;
		}
		if (c == '_' && seen_digit) /* 100_000_000 */
			continue;
		if (c < '0' || c > '9')
			return -1;
		seen_digit = 1;
		if (in_frac) {
			if (frac_digits == decimals) {
				if (c != '0')
					return -2;
				continue;
			}
			frac_digits++;
		}
		if (v > (UINT64_C(1) << 62) / 10)
			return -3;
		v = v * 10 + (uint64_t)(c - '0');
	}
	if (!seen_digit)
		return -1;
	for (; frac_digits < decimals; frac_digits++) {
		if (v > (UINT64_C(1) << 62) / 10)
			return -3;
		v *= 10;
	}
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

static size_t put_range(struct aqm_error *err, size_t pos, const struct aqm_param *p)
{
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " (allowed ");
	pos = aqm_put_fixed(AQM_ERR_TEXT(err), pos, p->min, p->decimals);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "..");
	pos = aqm_put_fixed(AQM_ERR_TEXT(err), pos, p->max, p->decimals);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " ");
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, p->unit);
	return aqm_put_str(AQM_ERR_TEXT(err), pos, ")");
}

static void param_err(struct aqm_error *err, enum aqm_err_code code, const struct aqm_ops *ops,
		      const struct aqm_param *p, const char *val, size_t vlen, const char *what)
{
	size_t pos = 0;

	aqm_err_at(err, code, ops, (int)(p - ops->params), -1);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ops->name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": parameter '");
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, p->name);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' = '");
	pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, val, vlen);
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "': ");
	pos = aqm_put_str(AQM_ERR_TEXT(err), pos, what);
	if (p->kind == AQM_PARAM_INT)
		put_range(err, pos, p);
}

int aqm_parse_spec(const char *spec, size_t speclen, const struct aqm_ops **opsp,
		   struct aqm_args *a, struct aqm_error *err)
{
	const char *s = spec, *end = spec + speclen, *tok, *own_end;
	const struct aqm_ops *ops;
	unsigned i;
	size_t pos;

	aqm_zero(a, sizeof(*a));
	while (s < end && is_space(*s))
		s++;
	tok = s;
	while (s < end && !is_space(*s) && *s != '|')
		s++;
	if (s == tok) {
		aqm_err(err, AQM_ERR_SYNTAX, "empty spec: expected a discipline name", 0, 0);
		return -1;
	}
	ops = aqm_find_ops(tok, (size_t)(s - tok));
	if (!ops) {
		const char *const *n = aqm_discipline_names();

		err->code = AQM_ERR_UNKNOWN_DISC;
		pos = aqm_put_str(AQM_ERR_TEXT(err), 0, "unknown discipline '");
		pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, tok, (size_t)(s - tok));
		pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' (known:");
		for (; *n; n++) {
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " ");
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, *n);
		}
		aqm_put_str(AQM_ERR_TEXT(err), pos, ")");
		return -1;
	}
	/* This discipline's own parameters end at the first '|'. */
	own_end = s;
	while (own_end < end && *own_end != '|')
		own_end++;
	if (own_end < end) {
		const char *c = own_end;

		if (!ops->takes_children) {
			aqm_err(err, AQM_ERR_CHILDREN, ops->name, ": takes no '|' child specs (only bands does)", 0);
			err->disc = ops->name;
			return -1;
		}
		while (c < end) {
			const char *cs = c + 1, *ce = cs;

			while (ce < end && *ce != '|')
				ce++;
			if (a->nchild == 8) {
				aqm_err(err, AQM_ERR_CHILDREN, ops->name, ": at most 8 bands", 0);
				err->disc = ops->name;
				return -1;
			}
			a->child[a->nchild] = cs;
			a->childlen[a->nchild] = (size_t)(ce - cs);
			a->nchild++;
			c = ce;
		}
	}
	if (ops->nparams > AQM_MAX_PARAMS) { /* a discipline outgrew the argument arrays */
		aqm_err(err, AQM_ERR_ENV, ops->name, ": more parameters than AQM_MAX_PARAMS", 0);
		return -1;
	}
	for (i = 0; i < ops->nparams; i++) {
		a->v[i] = ops->params[i].def;
		if (ops->params[i].kind == AQM_PARAM_TEXT) {
			a->text[i] = ops->params[i].def_text;
			a->textlen[i] = aqm_strlen(ops->params[i].def_text);
		}
	}
	for (;;) {
		const char *key, *eq, *val;
		const struct aqm_param *p = 0;

		while (s < own_end && is_space(*s))
			s++;
		if (s == own_end)
			break;
		key = s;
		while (s < own_end && !is_space(*s))
			s++;
		eq = key;
		while (eq < s && *eq != '=')
			eq++;
		if (eq == s || eq == key) {
			aqm_err_at(err, AQM_ERR_SYNTAX, ops, -1, -1);
			pos = aqm_put_str(AQM_ERR_TEXT(err), 0, ops->name);
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": expected key=value, got '");
			pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, key, (size_t)(s - key));
			aqm_put_str(AQM_ERR_TEXT(err), pos, "'");
			return -1;
		}
		for (i = 0; i < ops->nparams; i++)
			if (aqm_streqn(key, (size_t)(eq - key), ops->params[i].name)) {
				p = &ops->params[i];
				break;
			}
		if (!p) {
			unsigned j;

			aqm_err_at(err, AQM_ERR_UNKNOWN_PARAM, ops, -1, -1);
			err_key(err, key, (size_t)(eq - key));
			pos = aqm_put_str(AQM_ERR_TEXT(err), 0, ops->name);
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ": unknown parameter '");
			pos = aqm_put_strn(AQM_ERR_TEXT(err), pos, key, (size_t)(eq - key));
			pos = aqm_put_str(AQM_ERR_TEXT(err), pos, "' (known:");
			for (j = 0; j < ops->nparams; j++) {
				pos = aqm_put_str(AQM_ERR_TEXT(err), pos, " ");
				pos = aqm_put_str(AQM_ERR_TEXT(err), pos, ops->params[j].name);
			}
			aqm_put_str(AQM_ERR_TEXT(err), pos, ")");
			return -1;
		}
		val = eq + 1;
		if (a->given & (1u << i)) {
			param_err(err, AQM_ERR_TWICE, ops, p, val, (size_t)(s - val), "given twice");
			return -1;
		}
		a->given |= 1u << i;
		if (val == s) {
			param_err(err, AQM_ERR_SYNTAX, ops, p, val, 0, "empty value");
			return -1;
		}
		if (p->kind == AQM_PARAM_TEXT) {
			a->text[i] = val;
			a->textlen[i] = (size_t)(s - val);
			continue;
		}
		switch (parse_fixed(val, (size_t)(s - val), p->decimals, &a->v[i])) {
		case 0:
			break;
		case -2:
			param_err(err, AQM_ERR_NOT_NUMBER, ops, p, val, (size_t)(s - val), "too many decimal places");
			return -1;
		case -3:
			param_err(err, AQM_ERR_NOT_NUMBER, ops, p, val, (size_t)(s - val), "too large");
			return -1;
		default:
			param_err(err, AQM_ERR_NOT_NUMBER, ops, p, val, (size_t)(s - val), "not a number");
			return -1;
		}
		if (a->v[i] < p->min || a->v[i] > p->max) {
			param_err(err, AQM_ERR_RANGE, ops, p, val, (size_t)(s - val), "out of range");
			return -1;
		}
	}
	if (ops->takes_children && !a->nchild) {
		aqm_err(err, AQM_ERR_CHILDREN, ops->name, ": needs at least one child spec after '|'", 0);
		err->disc = ops->name;
		return -1;
	}
	*opsp = ops;
	return 0;
}
