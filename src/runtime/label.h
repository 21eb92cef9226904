/*
 * label.h - a Prometheus label value made safe from untrusted bytes.
 */
#ifndef SV_LABEL_H
#define SV_LABEL_H

#include <stddef.h>

#include "runtime/buf.h"

/* The longest label value /metrics writes, in bytes before escaping. */
#define SV_LABEL_MAX 128

/* v (len bytes, any bytes) as label text: each byte that starts no valid
 * UTF-8 sequence, and NUL, replaced by U+FFFD, and when that is over SV_LABEL_MAX bytes, cut at
 * a character boundary and ended with "…" and 16 hex digits of a hash of
 * all of v, so that values sharing a long prefix stay distinct series.
 * Unescaped; at most SV_LABEL_MAX bytes.  Text it made comes out the
 * same. */
void sv_label_text(sv_buf *out, const char *v, size_t len);
/* sv_label_text() escaped for the inside of the quotes of the text
 * exposition format: '\\', '"' and '\n' as \\, \" and \n. */
void sv_label_value(sv_buf *out, const char *v, size_t len);

#endif
