/* host_key.h - naming a host pair in a discipline spec by its addresses.
 *
 * hdcodel's Static baseline (seed 003, Sec. II-H) is given the most
 * bandwidth-consuming connection: `mode=static heavy_key=K`, where K is the
 * value of the key the packets carry. ckcd-link's host-pair key is a hash keyed
 * per run (frame.c), so no user can know K in advance; here the link daemon,
 * which owns the key, turns `heavy_key=10.0.0.1>10.0.0.3` (sender > receiver)
 * into that number before the core parses the spec. */
#ifndef CKCD_LINK_HOST_KEY_H
#define CKCD_LINK_HOST_KEY_H

#include <stddef.h>
#include <stdint.h>

/* Copies spec into out (outlen bytes), every `heavy_key=SRC>DST` value (two
 * IPv4 or two IPv6 addresses) replaced by the host pair's hash under
 * hash_seed. Other tokens are copied unchanged, a numeric heavy_key too.
 * Returns 0, or -1 with err naming the bad value (an address that does not
 * parse, mixed families, no room in out). */
/* An IPv4 or IPv6 address of len characters into bytes (4 or 16 of them,
 * as struct flow_key holds it); its family (4 or 6), or 0. */
int host_addr_parse(const char *text, size_t len, uint8_t *bytes);

int host_key_resolve(const char *spec, uint64_t hash_seed, char *out, size_t outlen,
		     char *err, size_t errlen);

#endif
