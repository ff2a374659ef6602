/* units.h - parsing and limits of ckcd-link's link parameters, shared by
 * the command line and the control socket so both refuse the same values. */
#ifndef CKCD_LINK_UNITS_H
#define CKCD_LINK_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define LINK_RATE_MIN_BPS 1000ull              /* 1 kbit/s */
#define LINK_RATE_MAX_BPS 100000000000ull      /* 100 Gbit/s */
#define LINK_DELAY_MAX_NS 10000000000ull       /* 10 s one way */
#define LINK_MTU_MIN 68u
#define LINK_MTU_MAX 9216u
#define LINK_OVERHEAD_MAX 256u

/* "50mbit", "50M", "1.5gbit", "100kbit", "50000000" (bit/s). Suffix
 * letters k/m/g/t are powers of 1000; "bit" and "bps" mean bit/s, "Bps"
 * (byte/s) is refused to avoid the tc ambiguity. Returns 0 or -1 with a
 * message in err; the range is checked too. */
int parse_rate(const char *s, uint64_t *bps, char *err, size_t errlen);

/* "10ms", "250us", "1.5s", "0", "10" (plain numbers are milliseconds). */
int parse_delay(const char *s, uint64_t *ns, char *err, size_t errlen);

int check_rate(uint64_t bps, char *err, size_t errlen);
int check_delay(uint64_t ns, char *err, size_t errlen);

/* Unsigned integer within [min, max]. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t errlen);

#endif
