// Scenario C: the whole life of an inbox, as a signup-flow test would use it.
//   create -> select -> SMTP delivery -> message.received event -> list -> read -> delete
// Each iteration is a new client IP (X-Forwarded-For, from 198.18.0.0/15) with a
// cookie jar of its own. k6 speaks neither SMTP nor SSE, so the delivery and
// the event go through bench/cmd/flowrelay, which opens the inbox's event
// stream with the session cookie, sends the mail and waits for the event.
//
//   API=http://127.0.0.1:8080/v1 RELAY=http://127.0.0.1:9999 RATE=80 DURATION=10s \
//     k6 run --quiet bench/k6/flow.js
//
// It prints one JSON line (bench/cmd/benchrun reads it): flows/s, p50/p99 of
// a whole flow, failed checks.
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Trend } from 'k6/metrics';

const API = __ENV.API || 'http://127.0.0.1:8080/v1';
const RELAY = __ENV.RELAY || 'http://127.0.0.1:9999';
const RATE = parseInt(__ENV.RATE || '80', 10);
const DURATION = __ENV.DURATION || '10s';
const IP_BASE = parseInt(__ENV.IP_BASE || '0', 10);

export const options = {
  discardResponseBodies: false,
  summaryTrendStats: ['med', 'p(99)', 'max', 'count'],
  scenarios: {
    flow: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Math.max(10, RATE),
      maxVUs: Math.max(20, RATE * 4),
    },
  },
};

const flowTime = new Trend('flow_ms', true);
const eventTime = new Trend('event_ms', true);
const flowsDone = new Counter('flows_ok');
const flowsFailed = new Counter('flows_failed');

// Consecutive clients are in different /24s (the third octet changes
// first), as load.ClientIP: the edge shares creations out per network.
function clientIP(n) {
  n = (IP_BASE + n) % 131072;
  return `198.${18 + (n >> 16)}.${n & 255}.${(n >> 8) & 255}`;
}

function flow() {
  const ip = clientIP(exec.scenario.iterationInTest);
  const jar = new http.CookieJar();
  const p = (tag, extra) => Object.assign({ jar, headers: { 'X-Forwarded-For': ip }, tags: { name: tag } }, extra || {});

  let r = http.post(`${API}/mailboxes`, '{}', p('create', { headers: { 'X-Forwarded-For': ip, 'Content-Type': 'application/json' } }));
  if (!check(r, { 'create 201': (x) => x.status === 201 })) return false;
  const box = r.json('data.mailbox');

  r = http.post(`${API}/mailboxes/${box.id}/select`, null, p('select'));
  if (!check(r, { 'select 200': (x) => x.status === 200 })) return false;
  const session = jar.cookiesForURL(`${API}/messages`).service_session;
  if (!check(session, { 'session cookie': (s) => Array.isArray(s) && s.length === 1 })) return false;

  r = http.post(`${RELAY}/deliver`, JSON.stringify({ to: box.address, cookie: `service_session=${session[0]}`, ip }),
    { headers: { 'Content-Type': 'application/json' }, tags: { name: 'deliver' }, timeout: '20s' });
  if (!check(r, { 'delivered + event 200': (x) => x.status === 200 })) return false;
  const sent = r.json();
  eventTime.add(sent.event_ms);

  r = http.get(`${API}/messages?limit=20&offset=0`, p('list'));
  if (!check(r, {
    'list 200': (x) => x.status === 200,
    'list has the message': (x) => x.json('data.items').some((m) => m.id === sent.id && m.status === 'ready'),
  })) return false;

  r = http.get(`${API}/messages/${sent.id}`, p('read'));
  if (!check(r, {
    'read 200': (x) => x.status === 200,
    'read subject': (x) => x.json('data.message.subject') === sent.subject,
    'read html body': (x) => x.json('data.message.html_body').includes('verification code'),
  })) return false;

  r = http.del(`${API}/mailboxes/current`, null, p('delete'));
  return check(r, { 'delete 204': (x) => x.status === 204 });
}

export default function () {
  const t0 = Date.now();
  if (flow()) {
    flowsDone.add(1);
    flowTime.add(Date.now() - t0);
  } else {
    flowsFailed.add(1);
  }
}

function metric(data, name, field) {
  const m = data.metrics[name];
  return m && m.values[field] !== undefined ? m.values[field] : 0;
}

export function handleSummary(data) {
  const seconds = data.state.testRunDurationMs / 1000;
  const ok = metric(data, 'flows_ok', 'count');
  const failedChecks = metric(data, 'checks', 'fails');
  const failedFlows = metric(data, 'flows_failed', 'count');
  const dropped = metric(data, 'dropped_iterations', 'count');
  const out = {
    tool: 'k6-flow',
    ops: ok,
    errors: failedFlows + dropped,
    seconds,
    rate: ok / seconds,
    p50_ms: metric(data, 'flow_ms', 'med'),
    p99_ms: metric(data, 'flow_ms', 'p(99)'),
    max_ms: metric(data, 'flow_ms', 'max'),
    extra: {
      target_rate: RATE,
      failed_checks: failedChecks,
      dropped_iterations: dropped,
      http_reqs: metric(data, 'http_reqs', 'count'),
      http_req_failed: metric(data, 'http_req_failed', 'passes'),
      http_p99_ms: metric(data, 'http_req_duration', 'p(99)'),
      event_p50_ms: metric(data, 'event_ms', 'med'),
      event_p99_ms: metric(data, 'event_ms', 'p(99)'),
    },
  };
  return { stdout: JSON.stringify(out) + '\n' };
}
