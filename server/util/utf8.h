/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 checking for names that come from other users (container runtimes, confined programs):
 * what the control client prints and what the metrics carry must be text, whatever was sent.
 */
#ifndef SV_UTF8_H
#define SV_UTF8_H

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
int utf8_len(const unsigned char *s);

#endif
