/*
 * status.c - the live status page: GET /status, one static HTML page
 * (no external assets: its script and style are inline, and its CSP
 * allows nothing else), which polls GET /status.json every 2 s and draws
 * the rules with their limits in force, the decisions, the hottest keys
 * and rules of the last minute (hot.c), decisions over the last 10
 * minutes, in all and per rule (hot_history.c), the store's state, and
 * with --state-file the load at start and the last save (state_file.c).
 * Served on the metrics and admin listeners, and on the main one only
 * with --public-status true (docs/operations.md, "The status page").
 */
#include <string.h>

#include "runtime/hot.h"
#include "runtime/rules_json.h"
#include "runtime/metrics.h"
#include "runtime/state_file.h"
#include "http/respond.h"
#include "api/status.h"

/* How many of the hottest keys and rules the page gets. */
#define STATUS_TOP 10

static const char page[] =
    "<!doctype html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
    "<title>sluice status</title>\n"
    "<style>\n"
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
    "h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.2em 0 "
    ".4em}\n"
    "table{border-collapse:collapse;min-width:30em}td,th{padding:.2em "
    ".7em;border-bottom:1px solid #ddd;text-align:left}\n"
    "td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".tiles{display:flex;gap:1em;flex-wrap:wrap}.tile{border:1px solid "
    "#ccc;border-radius:6px;padding:.5em 1em;min-width:9em}\n"
    ".tile b{display:block;font-size:1.6em}.up{color:#080}.down{color:#c00}"
    ".degraded{color:#c60}\n"
    "#err{color:#c00}code{font-size:.95em}\n"
    "svg text{font:11px system-ui,sans-serif;fill:#555}\n"
    "</style></head><body>\n"
    "<h1>sluice <span id=\"version\"></span></h1>\n"
    "<div>rules <code id=\"rules_version\"></code> &middot; updated <span "
    "id=\"updated\">never</span> <span id=\"err\"></span></div>\n"
    "<h2>Now</h2><div class=\"tiles\">\n"
    "<div class=\"tile\">allowed<b id=\"checks_ok\">-</b><span "
    "id=\"rate_ok\"></span></div>\n"
    "<div class=\"tile\">over the limit<b id=\"checks_over\">-</b><span "
    "id=\"rate_over\"></span></div>\n"
    "<div class=\"tile\">store <span id=\"store_kind\"></span><b "
    "id=\"store_status\">-</b><span id=\"store_more\"></span></div>\n"
    "</div>\n"
    "<h2>Rule decisions per 5 s, last 10 minutes</h2>\n"
    "<svg id=\"history\" viewBox=\"0 0 760 210\" role=\"img\" "
    "aria-label=\"rule decisions per 5 s, allowed and over the limit, "
    "last 10 minutes\" style=\"width:100%;max-width:60em\"></svg>\n"
    "<h2>Decisions per rule per 5 s, last 10 minutes</h2>\n"
    "<svg id=\"per_rule\" viewBox=\"0 0 760 210\" role=\"img\" "
    "aria-label=\"decisions and over-limit decisions of the busiest rules "
    "per 5 s, last 10 minutes\" style=\"width:100%;max-width:60em\"></svg>\n"
    "<h2>Hottest keys, last minute</h2><table id=\"hot_keys\"><thead><tr>"
    "<th>key</th><th>domain</th><th>rule</th><th class=\"n\">decisions"
    "</th><th class=\"n\">over</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Hottest rules, last minute</h2><table id=\"hot_rules\"><thead><tr>"
    "<th>rule</th><th class=\"n\">decisions</th><th "
    "class=\"n\">over</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Rules and their limits in force</h2><table "
    "id=\"rules\"><thead><tr><th>rule</th><th>domain</th><th "
    "class=\"n\">limit</th><th>per</th><th>algorithm</th><th>source</th>"
    "</tr></thead><tbody></tbody></table>\n"
    "<div id=\"state\" hidden><h2>State file</h2><table id=\"state_file\">"
    "<tbody></tbody></table></div>\n"
    "<script>\n"
    "'use strict';\n"
    "const $ = id => document.getElementById(id);\n"
    "let last = null;\n"
    "function per(ms) { for (const [u, n] of [['d', 86400000], ['h', "
    "3600000], ['m', 60000], ['s', 1000]]) if (ms % n === 0) return ms / n "
    "+ u; return ms + 'ms'; }\n"
    "function cell(row, text, num) { const td = row.insertCell(); "
    "td.textContent = text === undefined || text === null ? '' : "
    "String(text); if (num) td.className = 'n'; }\n"
    "function fill(id, rows, cols) { const body = $(id).tBodies[0]; "
    "body.replaceChildren(); for (const r of rows) { const tr = "
    "body.insertRow(); for (const [f, num] of cols) cell(tr, f(r), num); } "
    "}\n"
    "const NS = 'http://www.w3.org/2000/svg';\n"
    "function el(svg, name, attrs, text) { const e = "
    "document.createElementNS(NS, name); for (const k in attrs) "
    "e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = "
    "text; svg.appendChild(e); return e; }\n"
    "const X0 = 56, Y0 = 170, W = 680, H = 150;\n"
    "function frame(svg, n, top) {\n"
    "  const step = Math.pow(10, Math.floor(Math.log10(Math.max(1, top))));\n"
    "  const max = Math.ceil(Math.max(1, top) / step) * step;\n"
    "  svg.replaceChildren();\n"
    "  for (const f of [0, 0.5, 1]) { const y = Y0 - f * H;\n"
    "    el(svg, 'line', {x1: X0, x2: X0 + W, y1: y, y2: y, stroke: f ? "
    "'#eee' : '#999'});\n"
    "    el(svg, 'text', {x: X0 - 6, y: y + 4, 'text-anchor': 'end'}, "
    "String(Math.round(f * max))); }\n"
    "  for (const [i, label] of [[0, '-10 min'], [n / 2, '-5 min'], [n, "
    "'now']]) el(svg, 'text', {x: X0 + i * W / n, y: Y0 + 16, 'text-anchor': "
    "i ? (i === n ? 'end' : 'middle') : 'start'}, label);\n"
    "  return max;\n"
    "}\n"
    "function legend(svg, items, y) {\n"
    "  let x = X0;\n"
    "  for (const [label, color, dash] of items) {\n"
    "    const w = 34 + 6.5 * label.length;\n"
    "    if (x + w > X0 + W) { x = X0; y += 16; }\n"
    "    el(svg, 'line', {x1: x, x2: x + 16, y1: y - 4, y2: y - 4, stroke: "
    "color, 'stroke-width': dash === undefined ? 8 : 2, 'stroke-dasharray': "
    "dash || ''});\n"
    "    el(svg, 'text', {x: x + 20, y: y}, label);\n"
    "    x += w;\n"
    "  }\n"
    "  svg.setAttribute('viewBox', '0 0 760 ' + (y + 8));\n"
    "}\n"
    "function history(points) {\n"
    "  const svg = $('history'), n = points.length, bw = W / n;\n"
    "  const max = frame(svg, n, Math.max(...points.map(p => p.within + "
    "p.over)));\n"
    "  points.forEach((p, i) => {\n"
    "    for (const [v, base, color] of [[p.within, 0, '#4a8'], [p.over, "
    "p.within, '#d33']]) {\n"
    "      if (!v) continue;\n"
    "      el(svg, 'rect', {x: X0 + i * bw, width: Math.max(1, bw - 1), y: Y0 "
    "- (base + v) * H / max, height: v * H / max, fill: color});\n"
    "    }\n"
    "  });\n"
    "  legend(svg, [['allowed', '#4a8'], ['over the limit', '#d33']], 203);\n"
    "}\n"
    "const COLORS = ['#1f77b4', '#e07b00', '#2a9d3a', '#8e44ad', '#b5651d'];\n"
    "function perRule(h) {\n"
    "  const svg = $('per_rule'), n = h.points.length, bw = W / n;\n"
    "  const series = h.rules.map((r, i) => [r.rule, r, COLORS[i % "
    "COLORS.length]]);\n"
    "  if (h.other.decisions.some(v => v)) series.push(['other rules', "
    "h.other, '#888']);\n"
    "  const max = frame(svg, n, Math.max(0, ...series.flatMap(s => "
    "s[1].decisions)));\n"
    "  for (const [, s, color] of series)\n"
    "    for (const [vals, dash] of [[s.decisions, ''], [s.over_limit, '5 "
    "3']]) {\n"
    "      if (!vals.some(v => v)) continue;\n"
    "      el(svg, 'polyline', {points: vals.map((v, i) => (X0 + (i + 0.5) * "
    "bw).toFixed(1) + ',' + (Y0 - v * H / max).toFixed(1)).join(' '), fill: "
    "'none', stroke: color, 'stroke-width': 1.5, 'stroke-dasharray': dash});\n"
    "    }\n"
    "  if (!series.length) el(svg, 'text', {x: X0 + W / 2, y: Y0 - H / 2, "
    "'text-anchor': 'middle'}, 'no decisions in the last 10 minutes');\n"
    "  legend(svg, [['decisions', '#555', ''], ['over the limit', '#555', '5 "
    "3'], ...series.map(([name, , color]) => [name, color])], 203);\n"
    "}\n"
    "function limit(r) { if (r.algorithm === 'unlimited') return "
    "'unlimited'; if (r.algorithm === 'deny') return 'deny (0)'; return "
    "r.requests_per_unit + (r.requests_per_unit !== "
    "r.base_requests_per_unit ? ' (base ' + r.base_requests_per_unit + ')' "
    ": ''); }\n"
    "function stateFile(f) {\n"
    "  $('state').hidden = !f;\n"
    "  if (!f) return;\n"
    "  const l = f.last_save, saved = l.at_ms > 0;\n"
    "  fill('state_file', [['file', f.path], ['load at start', f.load + "
    "(f.loaded_keys ? ', ' + f.loaded_keys + ' keys' : '')], ['last save', "
    "saved ? new Date(l.at_ms).toLocaleString() : 'none yet'], ['took', "
    "saved ? l.duration_ms.toFixed(1) + ' ms' : ''], ['keys', saved ? l.keys "
    ": ''], ['bytes', saved ? l.bytes : ''], ['saves', f.saves_ok + ' ok, ' "
    "+ f.saves_failed + ' failed' + (f.last_error ? ': ' + f.last_error : "
    "'')]], [[r => r[0]], [r => r[1]]]);\n"
    "}\n"
    "async function update() {\n"
    "  try {\n"
    "    const res = await fetch('status.json', {cache: 'no-store'});\n"
    "    if (!res.ok) throw new Error('status.json: HTTP ' + res.status);\n"
    "    const s = await res.json();\n"
    "    $('version').textContent = s.version;\n"
    "    $('rules_version').textContent = s.rules_version;\n"
    "    $('checks_ok').textContent = s.checks.ok;\n"
    "    $('checks_over').textContent = s.checks.over_limit;\n"
    "    if (last) { const dt = (s.now_ms - last.now_ms) / 1000 || 1;\n"
    "      $('rate_ok').textContent = ((s.checks.ok - last.checks.ok) / "
    "dt).toFixed(1) + '/s';\n"
    "      $('rate_over').textContent = ((s.checks.over_limit - "
    "last.checks.over_limit) / dt).toFixed(1) + '/s'; }\n"
    "    last = s;\n"
    "    $('store_kind').textContent = s.store.kind;\n"
    "    $('store_status').textContent = s.store.status;\n"
    "    $('store_status').className = s.store.status;\n"
    "    $('store_more').textContent = s.store.kind === 'redis' ? "
    "s.store.nodes_live + ' nodes live' : s.store.keys + ' keys';\n"
    "    stateFile(s.store.state_file);\n"
    "    history(s.history.points);\n"
    "    perRule(s.history);\n"
    "    fill('hot_keys', s.hot_keys, [[r => r.key], [r => r.domain], [r => "
    "r.rule], [r => r.decisions, 1], [r => r.over_limit, 1]]);\n"
    "    fill('hot_rules', s.hot_rules, [[r => r.rule], [r => r.decisions, "
    "1], [r => r.over_limit, 1]]);\n"
    "    fill('rules', s.rules, [[r => r.id + (r.shadow_mode ? ' (shadow)' "
    ": '')], [r => r.domain], [r => limit(r), 1], [r => r.period_ms ? "
    "per(r.period_ms) : ''], [r => r.algorithm], [r => r.source]]);\n"
    "    $('updated').textContent = new Date(s.now_ms).toLocaleTimeString();\n"
    "    $('err').textContent = '';\n"
    "  } catch (e) { $('err').textContent = String(e.message || e); }\n"
    "}\n"
    "update(); setInterval(update, 2000);\n"
    "</script></body></html>\n";

/* Nothing but the page's own inline script and style, and its fetch. */
#define PAGE_HEADERS                                                           \
    "Content-Security-Policy: default-src 'none'; script-src "                 \
    "'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'\r\n"       \
    "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"

void sv_status_page(sv_worker *w, sv_buf *out, int keep_alive)
{
    (void)w;
    sv_respond_body(out, 200, "text/html; charset=utf-8", PAGE_HEADERS, page,
                    sizeof(page) - 1, keep_alive);
}

json_t *sv_status_json(sv_worker *w)
{
    sv_server *s = w->server;
    sl_nanos now = sv_now(w);
    uint64_t ok = 0, over = 0;
    for (int i = 0; i < s->n_workers; i++) {
        ok += atomic_load_explicit(&s->workers[i].stats.checks_ok,
                                   memory_order_relaxed);
        over += atomic_load_explicit(&s->workers[i].stats.checks_over,
                                     memory_order_relaxed);
    }
    int redis = sd_engine_uses_redis(s->engine);
    sl_store_stats st;
    sl_store_get_stats(s->store, &st);
    json_t *store =
        json_pack("{s:s,s:s,s:I}", "kind", redis ? "redis" : "memory", "status",
                  sv_metrics_store_status(s), "keys", (json_int_t)st.keys);
    if (redis)
        json_object_set_new(store, "nodes_live",
                            json_integer(sd_engine_nodes(s->engine)));
    json_t *state_file = sv_state_json(s);
    if (state_file != NULL)
        json_object_set_new(store, "state_file", state_file);
    json_t *body = sv_hot_report(s, now, STATUS_TOP);
    if (body == NULL)
        body = json_object();
    json_object_update_new(
        body,
        json_pack("{s:s,s:s,s:I,s:{s:I,s:I},s:o,s:o}", "version", SL_VERSION,
                  "rules_version", sl_rules_version(w->rules->rules), "now_ms",
                  (json_int_t)(now / SL_NS_PER_MS), "checks", "ok",
                  (json_int_t)ok, "over_limit", (json_int_t)over, "store",
                  store, "rules", sv_rules_json(w)));
    return body;
}

void sv_status_json_get(sv_worker *w, sv_buf *out, int keep_alive)
{
    json_t *body = sv_status_json(w);
    sv_respond_json(out, 200, "Cache-Control: no-store\r\n", body, keep_alive);
    json_decref(body);
}

/* The main listener, which faces clients, serves the page only when
 * asked to (--public-status true): its hottest keys name clients, as
 * /metrics does.  1 when it answered 404 for that. */
static int private(sv_worker *w, sv_buf *out, int keep_alive)
{
    if (w->server->cfg.public_status)
        return 0;
    sv_respond_error(out, 404, "ENOTFOUND",
                     "no such route: the status page is on --metrics-listen "
                     "and --admin-listen (or --public-status true)",
                     keep_alive);
    return 1;
}

void sv_status_page_public(sv_worker *w, sv_buf *out, int keep_alive)
{
    if (!private(w, out, keep_alive))
        sv_status_page(w, out, keep_alive);
}

void sv_status_json_public(sv_worker *w, sv_buf *out, int keep_alive)
{
    if (!private(w, out, keep_alive))
        sv_status_json_get(w, out, keep_alive);
}
