/*
 * fuzz_label.c - label values for /metrics from any bytes (src/server/
 * label.c): the text is valid UTF-8 without NUL, at most SV_LABEL_MAX
 * bytes, made again from itself unchanged, and its escaped form holds no
 * raw newline and no '"' or '\\' that is not escaped.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/label.h"

/* Strict UTF-8 (RFC 3629) without NUL: 1, or 0. */
static int valid_utf8(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len;
        uint32_t cp;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xe0) == 0xc0)
            len = 2, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
            len = 3, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
            len = 4, cp = c & 0x07;
        else
            return 0;
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sv_buf text = {0}, again = {0}, esc = {0};
    sv_label_text(&text, (const char *)data, size);
    if (text.failed)
        goto out;
    if (text.len > SV_LABEL_MAX ||
        !valid_utf8((const unsigned char *)text.data, text.len))
        abort();
    sv_label_text(&again, text.data ? text.data : "", text.len);
    if (!again.failed &&
        (again.len != text.len ||
         (text.len > 0 && memcmp(again.data, text.data, text.len) != 0)))
        abort();
    sv_label_value(&esc, (const char *)data, size);
    for (size_t i = 0; !esc.failed && i < esc.len; i++) {
        char c = esc.data[i];
        if (c == '\n' || c == '"')
            abort();
        if (c == '\\') {
            if (++i == esc.len || (esc.data[i] != '\\' && esc.data[i] != '"' &&
                                   esc.data[i] != 'n'))
                abort();
        }
    }
out:
    sv_buf_release(&text);
    sv_buf_release(&again);
    sv_buf_release(&esc);
    return 0;
}
