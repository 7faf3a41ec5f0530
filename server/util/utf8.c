/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "util/utf8.h"

int utf8_len(const unsigned char *s)
{
	int n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}
