/* host_delay.c - parsing and matching --host-delay (host_delay.h says what it is). */
#include "host_delay.h"
#include "host_key.h"
#include "units.h"

#include <stdio.h>
#include <string.h>

static size_t addr_len(int family)
{
	return family == 4 ? 4 : 16;
}

int host_delay_parse(const char *arg, const struct host_delay *table, unsigned n,
		     struct host_delay *out, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	char why[128];
	size_t len;

	memset(out, 0, sizeof(*out));
	if (!eq) {
		snprintf(err, errlen, "'%s' is not ADDR=DELAY (e.g. 10.0.0.1=40ms)", arg);
		return -1;
	}
	len = (size_t)(eq - arg);
	out->family = (uint8_t)host_addr_parse(arg, len, out->addr);
	if (!out->family) {
		snprintf(err, errlen, "'%.*s' is not an IPv4 or IPv6 address", (int)(len < 64 ? len : 64), arg);
		return -1;
	}
	if (parse_delay(eq + 1, &out->delay_ns, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%.*s: %s", (int)(len < 64 ? len : 64), arg, why);
		return -1;
	}
	if (out->family == 6 && memcmp(out->addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
		/* An IPv4 host's frames carry its IPv4 address: this would match none. */
		snprintf(err, errlen, "'%.*s' is an IPv4-mapped IPv6 address: give the IPv4 address",
			 (int)(len < 64 ? len : 64), arg);
		return -1;
	}
	snprintf(out->addr_text, sizeof(out->addr_text), "%.*s", (int)len, arg);
	for (unsigned i = 0; i < n; i++) {
		if (table[i].family == out->family &&
		    memcmp(table[i].addr, out->addr, addr_len(out->family)) == 0) {
			snprintf(err, errlen, "%s is given twice", out->addr_text);
			return -1;
		}
	}
	if (n >= HOST_DELAY_MAX) {
		snprintf(err, errlen, "at most %d hosts", HOST_DELAY_MAX);
		return -1;
	}
	return 0;
}

int host_delay_find(const struct host_delay *table, unsigned n, const struct flow_key *key)
{
	if (key->family != 4 && key->family != 6)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (table[i].family == key->family &&
		    memcmp(table[i].addr, key->src, addr_len(key->family)) == 0)
			return (int)i;
	return -1;
}
