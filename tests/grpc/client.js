// tests/grpc/client.js ADDR OPS - gRPC calls to `sluice serve
// --grpc-listen ADDR` with grpc's own Node client (@grpc/grpc-js), for
// tests/test_serve_grpc.sh.  OPS is a JSON array of operations, run in
// order on one channel; the results are printed as one JSON array:
//
//   {"op": "rls", "req": RateLimitRequest, "deadline_ms": N}
//       -> {"code": 0, "response": RateLimitResponse, "ms": N}
//          or {"code": STATUS, "details": "...", "ms": N}
//   {"op": "many", "n": N, "req": RateLimitRequest}
//       -> N calls at once: {"OK": n, "OVER_LIMIT": n, "errors": {code: n}}
//   {"op": "health", "service": "..."} -> {"code": 0, "status": "SERVING"}
//   {"op": "raw", "path": "/pkg.Svc/Method", "hex": "..."}
//       -> the request message's bytes as given (malformed ones too):
//          {"code": 0, "hex": "..."} or {"code": STATUS, "details": "..."}
//
// With GRPC_TLS_CA=FILE the channel is TLS (grpc.credentials.createSsl),
// verifying the server against that CA as "localhost"; GRPC_TLS_CERT and
// GRPC_TLS_KEY add a client certificate (mutual TLS), for
// tests/test_tls.sh.
'use strict';
const path = require('path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const def = loader.loadSync(
  ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'],
  {keepCase: true, longs: Number, enums: String, defaults: true,
   includeDirs: [path.join(__dirname, 'proto')]});
const pkg = grpc.loadPackageDefinition(def);
const addr = process.argv[2];
const ops = JSON.parse(process.argv[3]);
const fs = require('fs');
const env = process.env;
const creds = env.GRPC_TLS_CA
  ? grpc.credentials.createSsl(
      fs.readFileSync(env.GRPC_TLS_CA),
      env.GRPC_TLS_KEY ? fs.readFileSync(env.GRPC_TLS_KEY) : null,
      env.GRPC_TLS_CERT ? fs.readFileSync(env.GRPC_TLS_CERT) : null)
  : grpc.credentials.createInsecure();
const chanOpts = env.GRPC_TLS_CA
  ? {'grpc.ssl_target_name_override': 'localhost'} : {};
const rls = new pkg.envoy.service.ratelimit.v3.RateLimitService(addr, creds,
                                                                 chanOpts);
const health = new pkg.grpc.health.v1.Health(addr, creds, chanOpts);

function options(op) {
  return op.deadline_ms ? {deadline: Date.now() + op.deadline_ms} : {};
}

// A unary call as a promise of {code, response | details, ms}.
function call(fn, client, arg, opts) {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    fn.call(client, arg, opts, (err, response) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      resolve(err ? {code: err.code, details: err.details, ms}
                  : {code: 0, response, ms});
    });
  });
}

async function run(op) {
  switch (op.op) {
    case 'rls':
      return call(rls.ShouldRateLimit, rls, op.req, options(op));
    case 'many': {
      const calls = [];
      for (let i = 0; i < op.n; i++)
        calls.push(call(rls.ShouldRateLimit, rls, op.req, options(op)));
      const out = {OK: 0, OVER_LIMIT: 0, errors: {}};
      for (const r of await Promise.all(calls)) {
        if (r.code !== 0)
          out.errors[r.code] = (out.errors[r.code] || 0) + 1;
        else
          out[r.response.overall_code]++;
      }
      return out;
    }
    case 'health': {
      const r = await call(health.Check, health, {service: op.service},
                           options(op));
      return r.code === 0 ? {code: 0, status: r.response.status} : r;
    }
    case 'raw': {
      const bytes = (b) => b;
      const t0 = process.hrtime.bigint();
      return new Promise((resolve) => {
        rls.makeUnaryRequest(op.path, bytes, bytes, Buffer.from(op.hex, 'hex'),
          new grpc.Metadata(), options(op), (err, response) => {
            const ms = Number(process.hrtime.bigint() - t0) / 1e6;
            resolve(err ? {code: err.code, details: err.details, ms}
                        : {code: 0, hex: response.toString('hex'), ms});
          });
      });
    }
    default:
      throw new Error('unknown op: ' + op.op);
  }
}

(async () => {
  const results = [];
  for (const op of ops)
    results.push(await run(op));
  console.log(JSON.stringify(results));
  rls.close();
  health.close();
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
