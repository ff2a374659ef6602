/* host_key.c - `heavy_key=SRC>DST` in a spec becomes the host pair's hash
 * (host_key.h says why). */
#include "host_key.h"
#include "frame.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define PARAM "heavy_key="

int host_addr_parse(const char *text, size_t len, uint8_t *bytes)
{
	char buf[INET6_ADDRSTRLEN];

	if (len == 0 || len >= sizeof(buf))
		return 0;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (inet_pton(AF_INET, buf, bytes) == 1)
		return 4;
	if (inet_pton(AF_INET6, buf, bytes) == 1)
		return 6;
	return 0;
}

/* The value of one heavy_key token (up to the next space or the end of a
 * band, '|'): the decimal hash into out, or -1 with err set. 1 when the value
 * is not a pair (left for the core to judge). */
static int resolve_pair(const char *value, size_t len, uint64_t hash_seed, char *out, size_t outlen,
			char *err, size_t errlen)
{
	const char *gt = memchr(value, '>', len);
	struct flow_key k;
	int fa, fb;

	if (!gt)
		return 1;
	memset(&k, 0, sizeof(k));
	fa = host_addr_parse(value, (size_t)(gt - value), k.src);
	fb = host_addr_parse(gt + 1, len - (size_t)(gt + 1 - value), k.dst);
	if (!fa || !fb || fa != fb) {
		snprintf(err, errlen, "heavy_key: '%.*s' is not a host pair: two IPv4 or two IPv6 "
			 "addresses, sender>receiver (e.g. 10.0.0.1>10.0.0.3)", (int)len, value);
		return -1;
	}
	k.family = (uint8_t)fa;
	if ((size_t)snprintf(out, outlen, "%u", frame_host_hash(hash_seed, &k)) >= outlen) {
		snprintf(err, errlen, "heavy_key: spec too long");
		return -1;
	}
	return 0;
}

int host_key_resolve(const char *spec, uint64_t hash_seed, char *out, size_t outlen,
		     char *err, size_t errlen)
{
	size_t o = 0;
	const char *s = spec;

	while (*s) {
		/* A parameter starts the spec or follows a space or a band's '|'. */
		int at_token = s == spec || s[-1] == ' ' || s[-1] == '\t' || s[-1] == '|';

		if (at_token && strncmp(s, PARAM, strlen(PARAM)) == 0) {
			const char *value = s + strlen(PARAM);
			size_t len = strcspn(value, " \t|");
			char number[16];
			int rc;

			rc = resolve_pair(value, len, hash_seed, number, sizeof(number), err, errlen);
			if (rc < 0)
				return -1;
			if (rc == 0) {
				if (o + strlen(PARAM) + strlen(number) >= outlen)
					goto too_long;
				o += (size_t)sprintf(out + o, "%s%s", PARAM, number);
				s = value + len;
				continue;
			}
		}
		if (o + 1 >= outlen)
			goto too_long;
		out[o++] = *s++;
	}
	if (outlen == 0)
		goto too_long;
	out[o] = '\0';
	return 0;
too_long:
	snprintf(err, errlen, "longer than %zu bytes once heavy_key's host pair is resolved", outlen - 1);
	return -1;
}
