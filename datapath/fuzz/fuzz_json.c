/* fuzz_json.c - libFuzzer target: ckcd-link's request parser
 * (link/json.c json_parse_flat), as the control socket calls it: one line,
 * NUL-terminated where the newline was, parsed in place. Every field it
 * returns must be readable and every string NUL-terminated inside the line.
 * Built with clang -fsanitize=fuzzer,address,undefined (fuzz.mk). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../link/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jfield f[JSON_MAX_FIELDS];
	char err[256];
	char *line = malloc(size + 1);
	int n;

	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	n = json_parse_flat(line, f, JSON_MAX_FIELDS, err, sizeof(err));
	if (n < 0 && !memchr(err, '\0', sizeof(err)))
		abort(); /* an error must come with a terminated message */
	for (int i = 0; i < n; i++) {
		if (strlen(f[i].key) > size)
			abort();
		if (f[i].type == J_STR && strlen(f[i].str) > size)
			abort();
		if (json_get(f, n, f[i].key) == NULL)
			abort(); /* a parsed key must be found again */
	}
	free(line);
	return 0;
}
