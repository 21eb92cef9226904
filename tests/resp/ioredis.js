// tests/resp/ioredis.js PORT [REDIS_STORE_PORT] - sluice's Redis protocol
// listener driven by ioredis (pinned in package-lock.json), as an
// application would: its connect handshake (ioredis waits for INFO's
// loading:0), CL.THROTTLE and GCRA as custom commands, pipelines, error
// replies, and hundreds of clients on one key with exactly the capacity
// allowed.  Prints PASS/FAIL lines; exits 1 if any failed.
'use strict';
const Redis = require('ioredis');

const port = Number(process.argv[2]);
let failed = 0;
function check(name, cond, why) {
  if (cond) {
    console.log('PASS ioredis: ' + name);
  } else {
    failed = 1;
    console.log('FAIL ioredis: ' + name + ': ' + (why || ''));
  }
}

function client() {
  // No retries: a test must fail, not wait, when sluice misbehaves.
  return new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0,
                     retryStrategy: () => null, lazyConnect: true });
}

async function main() {
  const r = client();
  await r.connect();
  check('connects (INFO ready check)', r.status === 'ready', r.status);
  check('PING', (await r.ping()) === 'PONG');

  const first = await r.call('CL.THROTTLE', 'io:user123', '15', '30', '60');
  check('CL.THROTTLE README example', JSON.stringify(first) === '[0,16,15,-1,2]',
        JSON.stringify(first));

  // A pipeline: replies in order, one per command.
  const p = r.pipeline();
  for (let i = 0; i < 20; i++) p.call('CL.THROTTLE', 'io:pipe', '4', '1', '3600');
  const res = await p.exec();
  const limited = res.map(([err, v]) => (err ? 'E' : v[0]));
  check('pipeline: 5 allowed then limited, in order',
        limited.join('') === '00000' + '1'.repeat(15), limited.join(''));
  const remaining = res.slice(0, 5).map(([, v]) => v[2]).join(',');
  check('pipeline: remaining counts down', remaining === '4,3,2,1,0', remaining);

  const g = await r.call('GCRA', 'io:g', '1', '10', '0.5', 'TOKENS', '2');
  check('GCRA with a fractional period', JSON.stringify(g) === '[0,2,0,-1,1]',
        JSON.stringify(g));

  let err = '';
  try { await r.call('CL.THROTTLE', 'io:x', 'abc', '1', '1'); } catch (e) { err = e.message; }
  check('error reply rejects the call', err === 'Cell error: Couldn\'t parse as integer: abc', err);
  check('the connection stays usable after an error', (await r.ping()) === 'PONG');

  // Hundreds of clients, one key: exactly the capacity (max_burst + 1)
  // allowed, since at one per hour nothing refills during the test.
  const N = 200, EACH = 5, CAP = 150;
  const clients = [];
  for (let i = 0; i < N; i++) clients.push(client());
  await Promise.all(clients.map((c) => c.connect()));
  const all = await Promise.all(clients.flatMap((c) =>
    Array.from({ length: EACH }, () =>
      c.call('CL.THROTTLE', 'io:storm', String(CAP - 1), '1', '3600'))));
  const allowed = all.filter((v) => v[0] === 0).length;
  check(N + ' clients x ' + EACH + ' calls: exactly ' + CAP + ' allowed',
        allowed === CAP, 'allowed ' + allowed);
  clients.forEach((c) => c.disconnect());
  r.disconnect();
}

main().then(() => process.exit(failed), (e) => {
  console.log('FAIL ioredis: ' + e.stack);
  process.exit(1);
});
