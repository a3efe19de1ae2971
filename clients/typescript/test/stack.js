// The stack of clients/SCENARIOS.md: `bin/mayfly all` as a child process on
// free loopback ports, against the cluster of MAYFLY_TEST_REDIS_ADDRS, with a
// key prefix of its own. A missing cluster or binary fails the suite, as the
// Go and Python suites do: it never skips (`npm run test:unit` runs the tests
// that need no stack).

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, '../../..');

/**
 * Throws when the stack cannot run here: the suite fails, never skips (as
 * the Go and Python suites). Returns undefined, for `{ skip }` options.
 */
export function stackUnavailable() {
  let why;
  if (!process.env.MAYFLY_TEST_REDIS_ADDRS) {
    why = 'MAYFLY_TEST_REDIS_ADDRS is not set (make test sets it; by hand: bash deploy/cluster.sh up; `npm run test:unit` needs no stack)';
  } else if (!existsSync(binary())) why = `${binary()} is missing (make build)`;
  if (why !== undefined) throw new Error(`the stack is required: ${why}`);
  return undefined;
}

export function binary() {
  return process.env.MAYFLY_BIN ?? path.join(repo, 'bin', 'mayfly');
}

/** n distinct free loopback ports: each stays bound until all are picked (one closed before the next listen could be picked again). */
async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      s.unref();
      servers.push(s);
      await new Promise((resolve, reject) => {
        s.once('error', reject);
        s.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => (s.listening ? s.close(() => r()) : r()))));
  }
}

export class Stack {
  /** env: MAYFLY_* settings over the suite's (e.g. a lower active cap). */
  constructor(env = {}) {
    this.extra = env;
    this.prefix = `ts${randomBytes(4).toString('hex')}`;
    this.proc = undefined;
    this.log = [];
  }

  async start() {
    if (this.http === undefined) {
      const [http, smtp, admin] = await freePorts(3);
      this.http = `127.0.0.1:${http}`;
      this.smtp = `127.0.0.1:${smtp}`;
      this.admin = `127.0.0.1:${admin}`;
    }
    const env = {
      ...process.env,
      MAYFLY_REDIS_ADDRS: process.env.MAYFLY_TEST_REDIS_ADDRS,
      MAYFLY_REDIS_PREFIX: this.prefix,
      MAYFLY_HTTP_ADDR: this.http,
      MAYFLY_SMTP_ADDR: this.smtp,
      MAYFLY_ADMIN_ADDR: this.admin,
      MAYFLY_SMTP_HOSTNAME: 'mx.mayfly.test',
      MAYFLY_DOMAINS: 'mayfly.test',
      MAYFLY_COOKIE_SECURE: 'false',
      MAYFLY_RATE_REQUESTS_PER_SECOND: '8',
      MAYFLY_RATE_CREATE_PER_MINUTE: '100',
      MAYFLY_RATE_CREATE_PER_HOUR: '1000',
      MAYFLY_RATE_CREATE_PER_DAY: '1000',
      MAYFLY_RATE_ACTIVE_PER_IP: '100',
      MAYFLY_SHUTDOWN_TIMEOUT: '1s',
      MAYFLY_DRAIN_DELAY: '0s', // no load balancer to drain from: stop at once
      MAYFLY_EVENTS_HEARTBEAT: '2s',
      MAYFLY_LOG_LEVEL: 'warn',
      ...this.extra,
    };
    const proc = spawn(binary(), ['all'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      this.log.push(d);
      if (this.log.length > 200) this.log.shift();
    });
    this.exited = new Promise((resolve) => proc.once('exit', resolve));
    const until = Date.now() + 20_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`mayfly all exited ${proc.exitCode}: ${this.log.join('')}`);
      try {
        const r = await fetch(`http://${this.admin}/readyz`);
        await r.arrayBuffer();
        if (r.ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > until) throw new Error(`mayfly all not ready in 20 s: ${this.log.join('')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return this;
  }

  /** Stops the node (SIGTERM, then SIGKILL) and waits for it to exit: its ports refuse connections. */
  async stop() {
    const p = this.proc;
    if (p === undefined || p.exitCode !== null || p.signalCode !== null) return;
    p.kill('SIGTERM');
    const killer = setTimeout(() => p.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(killer);
  }

  /** The mailboxes this node created (its admin /metrics: POST /mailboxes answered 201). */
  async creations() {
    return creationsAt(this.admin);
  }

  get baseUrl() {
    return `http://${this.http}/v1`;
  }
}

/** The mailboxes created by the node whose admin listener is at admin (host:port), from its /metrics. */
export async function creationsAt(admin) {
  const text = await (await fetch(`http://${admin}/metrics`)).text();
  const m = /^mayfly_http_requests_total\{route="POST \/mailboxes",status="201"\} (\d+)/m.exec(text);
  return m === null ? 0 : Number(m[1]);
}
