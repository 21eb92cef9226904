/*
 * man.c - a man page made from a command's --help text, so that the two
 * cannot drift apart: the page is the text, set verbatim (.nf) under the
 * usual sections, with roff's special characters escaped.  Hyphens are
 * written \- so that options copied from the page are ASCII hyphens.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "sluice.h"

/* Text escaped for roff. */
static void roff_text(FILE *out, const char *line, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (line[i] == '\\')
            fputs("\\e", out);
        else if (line[i] == '-')
            fputs("\\-", out);
        else
            fputc(line[i], out);
    }
}

/* One line of text, escaped, in a no-fill block. */
static void roff_line(FILE *out, const char *line, size_t n)
{
    if (n > 0 && (line[0] == '.' || line[0] == '\''))
        fputs("\\&", out);
    roff_text(out, line, n);
    fputc('\n', out);
}

static void upper(FILE *out, const char *s)
{
    for (; *s != '\0'; s++)
        fputc(*s >= 'a' && *s <= 'z' ? *s - 'a' + 'A' : *s, out);
}

int cmd_man_page(FILE *out, const char *name, const char *what,
                 void (*usage)(FILE *to), const char *const *see_also)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL)
        return -1;
    usage(mem);
    if (fclose(mem) != 0) {
        free(text);
        return -1;
    }
    fputs(".TH \"", out);
    upper(out, name);
    fprintf(out, "\" 1 \"\" \"sluice %s\" \"sluice manual\"\n", SL_VERSION);
    fputs(".SH NAME\n", out);
    roff_text(out, name, strlen(name));
    fputs(" \\- ", out);
    roff_line(out, what, strlen(what));
    /* SYNOPSIS: the "usage:" lines, to the first empty one. */
    const char *p = text;
    int section = 0; /* 0: none yet, 1: synopsis, 2: description */
    while (*p != '\0') {
        size_t n = strcspn(p, "\n");
        if (section == 0 && strncmp(p, "usage: ", 7) == 0) {
            fputs(".SH SYNOPSIS\n.nf\n", out);
            roff_line(out, p + 7, n - 7);
            section = 1;
        } else if (section < 2 && n == 0) {
            fputs(section == 1 ? ".fi\n" : "", out);
            fputs(".SH DESCRIPTION\n.nf\n", out);
            section = 2;
        } else if (section == 0) {
            fputs(".SH DESCRIPTION\n.nf\n", out);
            roff_line(out, p, n);
            section = 2;
        } else {
            /* The synopsis's later lines are aligned under "usage: ". */
            size_t skip = 0;
            if (section == 1)
                while (skip < 7 && skip < n && p[skip] == ' ')
                    skip++;
            roff_line(out, p + skip, n - skip);
        }
        p += n;
        if (*p == '\n')
            p++;
    }
    if (section > 0)
        fputs(".fi\n", out);
    free(text);
    if (see_also != NULL && see_also[0] != NULL) {
        fputs(".SH SEE ALSO\n", out);
        for (size_t i = 0; see_also[i] != NULL; i++) {
            const char *paren = strchr(see_also[i], '(');
            int stem =
                paren ? (int)(paren - see_also[i]) : (int)strlen(see_also[i]);
            fprintf(out, "%s\\fB", i > 0 ? ",\n" : "");
            roff_text(out, see_also[i], (size_t)stem);
            fprintf(out, "\\fR%s", paren ? paren : "");
        }
        fputs("\n", out);
    }
    return 0;
}
