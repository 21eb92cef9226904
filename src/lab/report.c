/*
 * report.c - the lab's report (report.h): report.md (plots as SVG files
 * under plots/) and report.html (the same plots inline), drawn here as
 * plain SVG: polylines and rectangles with fixed-precision numbers, no
 * script, no fonts or files from elsewhere, so it opens offline and the
 * same inputs give the same bytes.
 */
#include "lab/report.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#define MAX_CELLS 64
#define W 720
#define H 220
#define ML 56 /* margins: left, right, top, bottom */
#define MR 16
#define MT 38
#define MB 30

/* The columns of samples.csv a plot draws. */
enum { C_OFFERED, C_ALLOWED, C_R429, C_LIMIT, C_B_P50, C_B_P99, C_QUEUE, C_N };
static const char *const col_names[C_N] = {"offered",    "allowed",  "r429",
                                           "limit",      "b_p50_ms", "b_p99_ms",
                                           "b_max_queue"};

typedef struct series_cell {
    char key[96];  /* scenario/algorithm/variant */
    char file[96]; /* the same with '-' */
    int n, cap;
    double *v[C_N];
    char (*phase)[24];
} series_cell;

typedef struct report {
    series_cell cells[MAX_CELLS];
    int n;
    json_t *results;
    FILE *md, *html;
    char dir[PATH_MAX];
} report;

static series_cell *cell_for(report *r, const char *sc, const char *alg,
                             const char *var)
{
    char key[96];
    snprintf(key, sizeof(key), "%s/%s/%s", sc, alg, var);
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->cells[i].key, key) == 0)
            return &r->cells[i];
    if (r->n == MAX_CELLS)
        return NULL;
    series_cell *c = &r->cells[r->n++];
    memset(c, 0, sizeof(*c));
    strcpy(c->key, key);
    snprintf(c->file, sizeof(c->file), "%s-%s-%s", sc, alg, var);
    return c;
}

static int push(series_cell *c, const double v[C_N], const char *phase)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 128;
        for (int k = 0; k < C_N; k++) {
            double *p = realloc(c->v[k], (size_t)cap * sizeof(double));
            if (!p)
                return -1;
            c->v[k] = p;
        }
        char(*ph)[24] = realloc(c->phase, (size_t)cap * sizeof(*ph));
        if (!ph)
            return -1;
        c->phase = ph;
        c->cap = cap;
    }
    for (int k = 0; k < C_N; k++)
        c->v[k][c->n] = v[k];
    snprintf(c->phase[c->n], sizeof(c->phase[0]), "%s", phase);
    c->n++;
    return 0;
}

static int read_samples(report *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int idx[C_N], i_sc = -1, i_alg = -1, i_var = -1, i_phase = -1, rc = 0;
    char *field[64];
    for (int row = 0; getline(&line, &cap, f) > 0; row++) {
        line[strcspn(line, "\r\n")] = '\0';
        int n = 0;
        for (char *p = line; n < 64;) {
            field[n++] = p;
            char *comma = strchr(p, ',');
            if (!comma)
                break;
            *comma = '\0';
            p = comma + 1;
        }
        if (row == 0) {
            for (int k = 0; k < C_N; k++) {
                idx[k] = -1;
                for (int j = 0; j < n; j++)
                    if (strcmp(field[j], col_names[k]) == 0)
                        idx[k] = j;
                if (idx[k] < 0)
                    rc = -1;
            }
            for (int j = 0; j < n; j++) {
                if (strcmp(field[j], "scenario") == 0)
                    i_sc = j;
                if (strcmp(field[j], "algorithm") == 0)
                    i_alg = j;
                if (strcmp(field[j], "variant") == 0)
                    i_var = j;
                if (strcmp(field[j], "phase") == 0)
                    i_phase = j;
            }
            if (rc || i_sc < 0 || i_alg < 0 || i_var < 0 || i_phase < 0) {
                rc = -1;
                break;
            }
            continue;
        }
        int need = i_sc;
        for (int k = 0; k < C_N; k++)
            if (idx[k] > need)
                need = idx[k];
        if (n <= need || n <= i_phase || n <= i_var || n <= i_alg)
            continue;
        series_cell *c = cell_for(r, field[i_sc], field[i_alg], field[i_var]);
        double v[C_N];
        for (int k = 0; k < C_N; k++)
            v[k] = strtod(field[idx[k]], NULL);
        if (!c || push(c, v, field[i_phase]) != 0) {
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---- SVG ---- */

/* A round number at or above v for an axis's top: 1, 2 or 5 x 10^k. */
static double nice_max(double v)
{
    if (v <= 0)
        return 1;
    double p = pow(10, floor(log10(v)));
    double m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

typedef struct line {
    const char *label, *color;
    const double *y;
    int dashed;
} line;

static void svg_open(FILE *f, int w, int h, const char *title)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
            "font-size=\"11\">\n<title>%s</title>\n"
            "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n"
            "<text x=\"%d\" y=\"15\" font-size=\"13\">%s</text>\n",
            w, h, w, h, title, w, h, ML, title);
}

/* Phase changes as dotted verticals, each new phase's name on top. */
static void svg_phases(FILE *f, const series_cell *c, double xs)
{
    for (int t = 1; t < c->n; t++) {
        if (strcmp(c->phase[t], c->phase[t - 1]) == 0)
            continue;
        double x = ML + t * xs;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" "
                "stroke=\"#bbb\" stroke-dasharray=\"2,3\"/>\n"
                "<text x=\"%.1f\" y=\"%d\" fill=\"#888\" font-size=\"9\">%s"
                "</text>\n",
                x, MT, x, H - MB, x + 2, MT + 9, c->phase[t]);
    }
}

static void svg_lines(FILE *f, const series_cell *c, const char *title,
                      const char *unit, const line *lines, int n_lines)
{
    double top = 0;
    for (int l = 0; l < n_lines; l++)
        for (int t = 0; t < c->n; t++)
            if (lines[l].y[t] > top)
                top = lines[l].y[t];
    top = nice_max(top * 1.05);
    double xs = c->n > 1 ? (double)(W - ML - MR) / (c->n - 1) : 1;
    double ys = (H - MT - MB) / top;
    svg_open(f, W, H, title);
    /* Axes, four gridlines with their values, time ticks. */
    for (int g = 0; g <= 4; g++) {
        double y = H - MB - g * (H - MT - MB) / 4.0;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
                "stroke=\"#eee\"/>\n<text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n",
                ML, y, W - MR, y, ML - 4, y + 4, top * g / 4);
    }
    int step = c->n > 100 ? 30 : c->n > 30 ? 10 : 5;
    for (int t = 0; t < c->n; t += step)
        fprintf(f,
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n",
                ML + t * xs, H - MB + 14, t);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">s</text>\n"
            "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" "
            "text-anchor=\"middle\">%s</text>\n",
            W - MR, H - 4, H / 2, H / 2, unit);
    svg_phases(f, c, xs);
    for (int l = 0; l < n_lines; l++) {
        fprintf(f,
                "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s "
                "points=\"",
                lines[l].color,
                lines[l].dashed ? " stroke-dasharray=\"6,3\"" : "");
        for (int t = 0; t < c->n; t++)
            fprintf(f, "%s%.1f,%.1f", t ? " " : "", ML + t * xs,
                    H - MB - lines[l].y[t] * ys);
        fprintf(f, "\"/>\n");
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"3\" "
                "fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                ML + l * 90, 25, lines[l].color, ML + 14 + l * 90, 30,
                lines[l].label);
    }
    fprintf(f, "</svg>\n");
}

/* Bars: one per cell of a scenario, for one measure. */
static void svg_bars(FILE *f, const char *title, const char *unit,
                     const char *const *labels, const double *v, int n)
{
    int h = 60 + 18 * n;
    double top = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > top)
            top = v[i];
    top = nice_max(top * 1.05);
    int left = 230, right = W - 70;
    svg_open(f, W, h, title);
    for (int i = 0; i < n; i++) {
        double len = v[i] > 0 ? (right - left) * v[i] / top : 0;
        int y = 30 + 18 * i;
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n"
                "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"12\" "
                "fill=\"#4878a8\"/>\n<text x=\"%.1f\" y=\"%d\">%.2f %s"
                "</text>\n",
                left - 6, y + 10, labels[i], left, y, len, left + len + 4,
                y + 10, v[i], unit);
    }
    fprintf(f, "</svg>\n");
}

/* ---- the report ---- */

/* Writes an SVG to plots/NAME.svg, and inline into the HTML. */
typedef void (*draw_fn)(FILE *f, const void *arg);

static int emit_svg(report *r, const char *name, const char *alt, draw_fn draw,
                    const void *arg)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof(path), "%s/plots/%s.svg", r->dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    draw(f, arg);
    if (fclose(f) != 0)
        return -1;
    draw(r->html, arg);
    fprintf(r->md, "![%s](plots/%s.svg)\n\n", alt, name);
    return 0;
}

static void draw_traffic(FILE *f, const void *arg)
{
    const series_cell *c = arg;
    line l[] = {{"offered", "#888", c->v[C_OFFERED], 0},
                {"allowed", "#2a7", c->v[C_ALLOWED], 0},
                {"429", "#d33", c->v[C_R429], 0},
                {"limit", "#36c", c->v[C_LIMIT], 1}};
    char title[160];
    snprintf(title, sizeof(title), "%s: requests per second", c->key);
    svg_lines(f, c, title, "req/s", l, 4);
}

static void draw_b(FILE *f, const void *arg)
{
    const series_cell *c = arg;
    line l[] = {{"B p50", "#2a7", c->v[C_B_P50], 0},
                {"B p99", "#d33", c->v[C_B_P99], 0},
                {"B queue", "#888", c->v[C_QUEUE], 1}};
    char title[160];
    snprintf(title, sizeof(title),
             "%s: B's latency (ms) and its queue (requests, max per second)",
             c->key);
    svg_lines(f, c, title, "ms / requests", l, 3);
}

typedef struct bars {
    const char *title, *unit;
    const char *labels[MAX_CELLS];
    double v[MAX_CELLS];
    int n;
} bars;

static void draw_bars(FILE *f, const void *arg)
{
    const bars *b = arg;
    svg_bars(f, b->title, b->unit, b->labels, b->v, b->n);
}

static double get(json_t *o, const char *phase, const char *key)
{
    json_t *p = phase ? json_object_get(json_object_get(o, "phases"), phase)
                      : json_object_get(o, "all");
    return json_number_value(json_object_get(p, key));
}

/* "12.3" or "—" for a measure that does not apply (JSON null). */
static void cellv(char *buf, size_t len, json_t *o, const char *phase,
                  const char *key, int decimals)
{
    json_t *p = phase ? json_object_get(json_object_get(o, "phases"), phase)
                      : json_object_get(o, "all");
    json_t *v = json_object_get(p, key);
    if (json_is_boolean(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "yes" : "NO");
    else if (!json_is_number(v))
        snprintf(buf, len, "—");
    else
        snprintf(buf, len, "%.*f", decimals, json_number_value(v));
}

static const struct {
    const char *head, *key;
    int decimals;
} columns[] = {
    {"% 429", "pct_429", 2},
    {"% 429 legit", "pct_429_legit", 2},
    {"P_A %", "P_A", 2},
    {"S_L %", "S_L", 2},
    {"mean ms", "lat_mean_ms", 1},
    {"p99 ms", "lat_p99_ms", 1},
    {"B p99 ms", "b_p99_ms", 1},
    {"F_B", "F_B", 0},
    {"protection %", "protection_pct", 1},
    {"B protected", "b_protected", 0},
    {"goodput r/s", "goodput_rps", 1},
    {"limit CV", "limit_cv", 3},
};
#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

static void table_head(report *r)
{
    fprintf(r->md, "| cell | phase |");
    fprintf(r->html, "<table><tr><th>cell</th><th>phase</th>");
    for (size_t i = 0; i < N_COLUMNS; i++) {
        fprintf(r->md, " %s |", columns[i].head);
        fprintf(r->html, "<th>%s</th>", columns[i].head);
    }
    fprintf(r->md, "\n|---|---|");
    for (size_t i = 0; i < N_COLUMNS; i++)
        fprintf(r->md, "---:|");
    fprintf(r->md, "\n");
    fprintf(r->html, "</tr>\n");
}

static void table_row(report *r, json_t *cell, const char *label,
                      const char *phase)
{
    fprintf(r->md, "| %s | %s |", label, phase ? phase : "all");
    fprintf(r->html, "<tr><td>%s</td><td>%s</td>", label,
            phase ? phase : "all");
    for (size_t i = 0; i < N_COLUMNS; i++) {
        char v[32];
        cellv(v, sizeof(v), cell, phase, columns[i].key, columns[i].decimals);
        fprintf(r->md, " %s |", v);
        fprintf(r->html, "<td>%s</td>", v);
    }
    fprintf(r->md, "\n");
    fprintf(r->html, "</tr>\n");
}

static void both(report *r, const char *md, const char *html)
{
    fputs(md, r->md);
    fputs(html, r->html);
}

static int write_scenario(report *r, const char *sc, const char *title)
{
    json_t *cells = json_object_get(r->results, "cells"), *cell;
    size_t i;
    fprintf(r->md, "## %s: %s\n\n", sc, title);
    fprintf(r->html, "<h2>%s: %s</h2>\n", sc, title);
    table_head(r);
    static char labels[MAX_CELLS][96];
    bars b429 = {.unit = "%"}, bpa = {.unit = "%"}, bp99 = {.unit = "ms"};
    json_array_foreach(cells, i, cell)
    {
        if (strcmp(json_string_value(json_object_get(cell, "scenario")), sc))
            continue;
        char label[96];
        snprintf(label, sizeof(label), "%s/%s",
                 json_string_value(json_object_get(cell, "algorithm")),
                 json_string_value(json_object_get(cell, "variant")));
        table_row(r, cell, label, NULL);
        json_t *phases = json_object_get(cell, "phases");
        const char *ph;
        json_t *pv;
        void *tmp;
        (void)pv;
        json_object_foreach_safe(phases, tmp, ph, pv)
        {
            table_row(r, cell, label, ph);
        }
        if (b429.n < MAX_CELLS && i < MAX_CELLS) {
            snprintf(labels[i], sizeof(labels[i]), "%s", label);
            b429.labels[b429.n] = bpa.labels[b429.n] = bp99.labels[b429.n] =
                labels[i];
            b429.v[b429.n] = get(cell, NULL, "pct_429_legit");
            bpa.v[b429.n] = get(cell, NULL, "P_A");
            bp99.v[b429.n] = get(cell, NULL, "b_p99_ms");
            b429.n++;
        }
    }
    both(r, "\n", "</table>\n");
    bpa.n = bp99.n = b429.n;
    char name[160], t1[96], t2[96], t3[96];
    snprintf(t1, sizeof(t1), "%s: legitimate requests refused (429), %%", sc);
    snprintf(t2, sizeof(t2), "%s: abusers' requests passed (P_A), %%", sc);
    snprintf(t3, sizeof(t3), "%s: B's p99 latency, ms", sc);
    b429.title = t1;
    bpa.title = t2;
    bp99.title = t3;
    snprintf(name, sizeof(name), "%s-bars-legit429", sc);
    if (b429.n && emit_svg(r, name, t1, draw_bars, &b429) != 0)
        return -1;
    snprintf(name, sizeof(name), "%s-bars-pa", sc);
    if (b429.n && strcmp(sc, "s3") >= 0 &&
        emit_svg(r, name, t2, draw_bars, &bpa) != 0)
        return -1;
    snprintf(name, sizeof(name), "%s-bars-bp99", sc);
    if (b429.n && emit_svg(r, name, t3, draw_bars, &bp99) != 0)
        return -1;
    for (int k = 0; k < r->n; k++) {
        series_cell *c = &r->cells[k];
        size_t sl = strlen(sc);
        if (strncmp(c->key, sc, sl) != 0 || c->key[sl] != '/')
            continue;
        snprintf(name, sizeof(name), "%s-traffic", c->file);
        if (emit_svg(r, name, c->key, draw_traffic, c) != 0)
            return -1;
        snprintf(name, sizeof(name), "%s-b", c->file);
        if (emit_svg(r, name, c->key, draw_b, c) != 0)
            return -1;
    }
    return 0;
}

static void write_checks(report *r)
{
    json_t *checks = json_object_get(r->results, "checks"), *ch;
    size_t i;
    both(r,
         "## Acceptance checks\n\n| verdict | cell | phase | check | value |\n"
         "|---|---|---|---|---|\n",
         "<h2>Acceptance checks</h2>\n<table><tr><th>verdict</th><th>cell"
         "</th><th>phase</th><th>check</th><th>value</th></tr>\n");
    json_array_foreach(checks, i, ch)
    {
        const char *v[5] = {json_string_value(json_object_get(ch, "verdict")),
                            json_string_value(json_object_get(ch, "cell")),
                            json_string_value(json_object_get(ch, "phase")),
                            json_string_value(json_object_get(ch, "check")),
                            json_string_value(json_object_get(ch, "value"))};
        fprintf(r->md, "| %s | %s | %s | %s | %s |\n", v[0], v[1], v[2], v[3],
                v[4]);
        fprintf(r->html,
                "<tr class=\"%s\"><td>%s</td><td>%s</td><td>%s</td><td>%s"
                "</td><td>%s</td></tr>\n",
                v[0], v[0], v[1], v[2], v[3], v[4]);
    }
    both(r, "\n", "</table>\n");
}

static const char css[] =
    "body{font-family:sans-serif;max-width:1100px;margin:1em auto;"
    "color:#222}table{border-collapse:collapse;font-size:12px;margin:"
    "0.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "td:first-child,td:nth-child(2){text-align:left}.FAIL{background:"
    "#fdd}.PASS{background:#efe}svg{display:block;margin:0.5em 0}";

int lb_report_write(const char *dir)
{
    static report r;
    memset(&r, 0, sizeof(r));
    snprintf(r.dir, sizeof(r.dir), "%s", dir);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/results.json", dir);
    json_error_t jerr;
    r.results = json_load_file(path, 0, &jerr);
    if (!r.results) {
        fprintf(stderr, "sluice lab report: %s:%d: %s\n", path, jerr.line,
                jerr.text);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/samples.csv", dir);
    int rc = read_samples(&r, path);
    if (rc != 0)
        fprintf(stderr, "sluice lab report: cannot read '%s'\n", path);
    snprintf(path, sizeof(path), "%s/plots", dir);
    if (rc == 0 && mkdir(path, 0755) != 0 && errno != EEXIST)
        rc = -1;
    snprintf(path, sizeof(path), "%s/report.md", dir);
    if (rc == 0 && !(r.md = fopen(path, "w")))
        rc = -1;
    snprintf(path, sizeof(path), "%s/report.html", dir);
    if (rc == 0 && !(r.html = fopen(path, "w")))
        rc = -1;
    if (rc == 0) {
        json_t *lab = json_object_get(r.results, "lab");
        char params[512], key_burst[48] = "";
        /* Since the per-key burst became its own (results of before
         * have one burst for both). */
        json_t *kb = json_object_get(lab, "key_burst");
        if (kb)
            snprintf(key_burst, sizeof(key_burst), " (per key %lld)",
                     (long long)json_integer_value(kb));
        snprintf(params, sizeof(params),
                 "profile %s, seed %lld, Redis failure policy %s and timeout "
                 "%s, global "
                 "limit %lld/s, per key %lld/s, burst %lld%s; B: %lld servers, "
                 "FIFO cap %lld",
                 json_string_value(json_object_get(lab, "profile")),
                 json_integer_value(json_object_get(lab, "seed")),
                 json_string_value(json_object_get(lab, "policy")),
                 json_string_value(json_object_get(lab, "redis_timeout")),
                 json_integer_value(json_object_get(lab, "global_limit")),
                 json_integer_value(json_object_get(lab, "key_limit")),
                 json_integer_value(json_object_get(lab, "burst")), key_burst,
                 json_integer_value(json_object_get(lab, "b_servers")),
                 json_integer_value(json_object_get(lab, "b_cap")));
        fprintf(r.md,
                "# sluice lab report\n\n%s. Measures are defined in "
                "docs/lab.md.\n\n",
                params);
        fprintf(r.html,
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                "<title>sluice lab report</title><style>%s</style></head>"
                "<body>\n<h1>sluice lab report</h1>\n<p>%s. Measures are "
                "defined in docs/lab.md.</p>\n",
                css, params);
        write_checks(&r);
        json_t *cells = json_object_get(r.results, "cells"), *cell;
        size_t i;
        char seen[8][8];
        int n_seen = 0;
        json_array_foreach(cells, i, cell)
        {
            const char *sc =
                json_string_value(json_object_get(cell, "scenario"));
            int dup = 0;
            for (int k = 0; k < n_seen; k++)
                dup |= strcmp(seen[k], sc) == 0;
            if (dup || n_seen == 8)
                continue;
            snprintf(seen[n_seen++], sizeof(seen[0]), "%s", sc);
            if (write_scenario(
                    &r, sc,
                    json_string_value(json_object_get(cell, "title"))) != 0) {
                rc = -1;
                break;
            }
        }
        fprintf(r.html, "</body></html>\n");
    }
    if (r.md && fclose(r.md) != 0)
        rc = -1;
    if (r.html && fclose(r.html) != 0)
        rc = -1;
    for (int k = 0; k < r.n; k++) {
        for (int c = 0; c < C_N; c++)
            free(r.cells[k].v[c]);
        free(r.cells[k].phase);
    }
    json_decref(r.results);
    if (rc != 0)
        fprintf(stderr, "sluice lab report: cannot write the report in '%s'\n",
                dir);
    return rc;
}

int lb_report_main(int argc, char **argv)
{
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else {
            fputs("usage: sluice lab report --out DIR (a `sluice lab run` "
                  "output: results.json, samples.csv)\n",
                  c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : 2;
        }
    }
    if (!out || optind != argc) {
        fputs("usage: sluice lab report --out DIR\n", stderr);
        return 2;
    }
    return lb_report_write(out) == 0 ? 0 : 1;
}
