// tests/status/status.js - drives Debian's chromium (headless, through
// puppeteer-core) at sluice's status page: it loads with no console error,
// failed request or request off the sluice origin, shows the rules (deny
// and unlimited ones as such) and the state file's load and last save,
// and its counters, hot keys (as key=value), history and per-rule lines
// (with axes and legends) move when traffic flows; a screenshot is kept
// for a look.
// Usage: node status.js CHROMIUM PAGE_URL API_URL SCREENSHOT
//   PAGE_URL: the listener that serves /status (--metrics-listen);
//   API_URL: the decision API (--listen).  Prints PASS/FAIL lines.
'use strict';
const puppeteer = require('puppeteer-core');
const [chromium, pageBase, base, shot] = process.argv.slice(2);
let failed = 0;
const check = (name, ok, why) => {
  console.log((ok ? 'PASS ' : 'FAIL ') + name + (ok ? '' : ': ' + why));
  if (!ok) failed = 1;
};
const check_api = (value) => fetch(base + '/v1/check', {
  method: 'POST',
  body: JSON.stringify({domain: 'api', descriptors: [{entries: [
    {key: 'tenant', value: 'acme'}, {key: 'user', value: value}]}]}),
}).then(r => r.status);

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    const errors = [], foreign = [];
    page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', e => errors.push(String(e)));
    page.on('requestfailed', r => errors.push('failed: ' + r.url()));
    page.on('request', r => { if (!r.url().startsWith(pageBase)) foreign.push(r.url()); });
    const res = await page.goto(pageBase + '/status', {waitUntil: 'load'});
    check('the page loads (200)', res.status() === 200, res.status());
    await page.waitForFunction(() => document.querySelectorAll('#rules tbody tr').length > 0,
                               {timeout: 10000});
    const rules = await page.$$eval('#rules tbody tr td:first-child', tds => tds.map(t => t.textContent));
    check('the rules are shown', rules.includes('user_burst') && rules.includes('user_hourly'),
          JSON.stringify(rules));
    const limit = await page.$$eval('#rules tbody tr', trs => {
      const tr = trs.find(t => t.cells[0].textContent === 'user_burst');
      return tr && [tr.cells[2].textContent, tr.cells[3].textContent];
    });
    check('with their limits in force', JSON.stringify(limit) === '["10","1s"]', JSON.stringify(limit));
    const kinds = await page.$$eval('#rules tbody tr', trs => trs.map(t => t.cells[2].textContent));
    check('deny and unlimited rules shown as such',
          kinds.includes('deny (0)') && kinds.includes('unlimited') && !kinds.includes('0'),
          JSON.stringify(kinds));
    const before = Number(await page.$eval('#checks_ok', e => e.textContent));
    // 15 for one user, one after the other, within user_burst's burst.
    const statuses = [];
    for (let i = 0; i < 15; i++) statuses.push(await check_api('browser-user'));
    const allowed = statuses.filter(s => s === 200).length;
    await page.waitForFunction(
      (b, n) => Number(document.getElementById('checks_ok').textContent) >= b + n,
      {timeout: 10000}, before, allowed);
    check('the allowed counter moves with traffic', true);
    check('the traffic was allowed', allowed === 15, allowed);
    // The address the rules deny: over the limit, every time.
    const denied = await fetch(base + '/v1/check', {method: 'POST', body: JSON.stringify(
      {domain: 'api', descriptors: [{entries: [{key: 'remote_address', value: '203.0.113.7'}]}]})});
    check('a denied address is refused (429)', denied.status === 429, denied.status);
    await page.waitForFunction(
      () => Number(document.getElementById('checks_over').textContent) === 1, {timeout: 10000});
    check('the over-the-limit counter moves', true);
    await page.waitForFunction(
      () => [...document.querySelectorAll('#hot_keys tbody td')].some(t => t.textContent.includes('browser-user')),
      {timeout: 10000});
    const hot = await page.$$eval('#hot_keys tbody tr', trs => trs.map(t => [...t.cells].map(c => c.textContent)));
    check('the hot keys show the traffic\'s key (key=value), domain and rule',
          hot.some(r => r[0] === 'tenant=acme, user=browser-user' && r[1] === 'api' &&
                   r[2] === 'user_burst' && Number(r[3]) === 15),
          JSON.stringify(hot));
    const bars = await page.$$eval('#history rect', rs => rs.length);
    check('the history draws the decisions, allowed and over (a bar each at least)', bars >= 2, bars);
    const labels = await page.$$eval('#history text', ts => ts.map(t => t.textContent));
    check('the history has its axes and legend',
          ['-10 min', 'now', '0', 'allowed', 'over the limit'].every(l => labels.includes(l)),
          JSON.stringify(labels));
    await page.waitForFunction(
      () => document.querySelectorAll('#per_rule polyline').length >= 3, {timeout: 10000});
    const lines = await page.$$eval('#per_rule polyline', ls => ls.map(l => [
      l.getAttribute('stroke'), l.getAttribute('stroke-dasharray'),
      l.getAttribute('points').split(' ').length]));
    const perLabels = await page.$$eval('#per_rule text', ts => ts.map(t => t.textContent));
    // user_burst and user_hourly decided, the deny rule refused: a line each,
    // and a dashed over-the-limit line for the deny rule, each a point per 5 s.
    check('the per-rule chart draws a line per rule, dashed for over the limit',
          lines.length >= 3 && lines.every(l => l[2] === 120) &&
          new Set(lines.map(l => l[0])).size >= 3 && lines.some(l => l[1] === '5 3'),
          JSON.stringify(lines.map(l => l.slice(0, 2))));
    check('the per-rule chart has its axes and a legend naming the rules',
          ['-10 min', 'now', '0', 'decisions', 'over the limit', 'user_burst', 'user_hourly']
            .every(l => perLabels.includes(l)),
          JSON.stringify(perLabels));
    await page.screenshot({path: shot, fullPage: true});
    check('a screenshot is taken', require('fs').statSync(shot).size > 10000, shot);
    // Started with --state-file and no file, then saved once (SIGUSR1).
    const state = await page.$$eval('#state_file tbody tr', trs =>
      Object.fromEntries(trs.map(t => [t.cells[0].textContent, t.cells[1].textContent])));
    const visible = await page.$eval('#state', e => !e.hidden);
    check('the state file section shows the load and the last save',
          visible && state['file'].endsWith('/state') && state['load at start'] === 'missing' &&
          state['last save'] !== 'none yet' && /^\d+\.\d ms$/.test(state['took']) &&
          Number(state['keys']) >= 1 && Number(state['bytes']) > 128 &&
          state['saves'] === '1 ok, 0 failed',
          JSON.stringify([visible, state]));
    const store = await page.$eval('#store_status', e => e.textContent);
    check('the store\'s state is shown', store === 'up', store);
    check('no console errors or failed requests', errors.length === 0, JSON.stringify(errors));
    check('no request leaves the sluice origin', foreign.length === 0, JSON.stringify(foreign));
  } catch (e) {
    check('the page', false, String(e));
  } finally {
    await browser.close();
  }
  process.exit(failed);
})();
