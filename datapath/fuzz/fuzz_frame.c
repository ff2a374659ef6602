/* fuzz_frame.c - libFuzzer target: ckcd-link's frame validation and
 * classification (link/frame.c), as the daemon calls them on every frame it
 * reads: frame_check at the default MTU, then frame_classify and
 * flow_key_format on what passed. The input is copied to a buffer of exactly
 * its length so ASan sees any read past the frame.
 * Built with clang -fsanitize=fuzzer,address,undefined (fuzz.mk). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../link/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_info fi;
	char text[160];
	uint8_t *frame;

	if (size > 9216 + ETH_HDR_LEN + VLAN_TAG_LEN)
		return 0;
	frame = malloc(size ? size : 1);
	if (!frame)
		return 0;
	memcpy(frame, data, size);
	if (frame_check(frame, (uint32_t)size, 9216) == FRAME_OK) {
		frame_classify(frame, (uint32_t)size, 7, &fi);
		if (flow_key_format(&fi.key, text, sizeof(text)) >= sizeof(text))
			abort();
	}
	free(frame);
	return 0;
}
