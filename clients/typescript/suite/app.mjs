// The app under test of the public-limits suite: a tiny signup app. GET /
// is a sign-up form; POST /signup mails the address a 6-digit code and a
// "Verify your email" link (text and HTML parts) over SMTP to
// MAYFLY_SUITE_SMTP, as a real app's mailer would: one connection kept open,
// at most 2 transactions a second (Mayfly's default SMTP limit is 120 MAIL
// a minute per client IP), a refused or failed send tried again after a
// pause. POST /confirm takes the code; GET /verify?token=… verifies the
// address once the code was confirmed.

import http from 'node:http';
import net from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';

const page = (title, body) => `<!doctype html>
<html><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1>${body}</body></html>`;

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Starts the app on a free loopback port; resolves { url, close, sent }. */
export async function startApp({ smtp, pace = 500 }) {
  if (!smtp) throw new Error('MAYFLY_SUITE_SMTP (host:port of the Mayfly SMTP listener) is not set');
  const users = new Map(); // email -> { code, token, confirmed, verified }
  const byToken = new Map();
  const mailer = new Mailer(smtp, pace);
  let url;

  const server = http.createServer(async (req, res) => {
    const u = new URL(req.url, 'http://app');
    const send = (status, html) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' });
      res.end(html);
    };
    try {
      if (req.method === 'GET' && u.pathname === '/') {
        return send(200, page('Sign up', `<form method="post" action="/signup">
<label>Email <input id="email" name="email" type="email" required></label>
<button type="submit">Sign up</button></form>`));
      }
      if (req.method === 'POST' && u.pathname === '/signup') {
        const form = new URLSearchParams(await body(req));
        const email = (form.get('email') ?? '').trim();
        if (!/^[^@\s<>]+@[^@\s<>]+$/.test(email)) return send(400, page('Invalid email', ''));
        const user = { email, code: String(randomInt(100000, 1000000)), token: randomBytes(16).toString('hex'), confirmed: false, verified: false };
        users.set(email.toLowerCase(), user);
        byToken.set(user.token, user);
        const link = `${url}/verify?token=${user.token}`;
        mailer.send(email, 'Verify your email address',
          `Welcome!\r\n\r\nYour verification code is ${user.code}.\r\n\r\nVerify your email: ${link}\r\n`,
          `<p>Welcome!</p><p>Your verification code is <b>${user.code}</b>.</p><p><a href="${link}">Verify your email</a></p>`);
        return send(200, page('Check your inbox', `<p>We sent a code to ${esc(email)}.</p>
<form method="post" action="/confirm"><input type="hidden" name="email" value="${esc(email)}">
<label>Code <input id="code" name="code" inputmode="numeric" required></label>
<button type="submit">Confirm</button></form>`));
      }
      if (req.method === 'POST' && u.pathname === '/confirm') {
        const form = new URLSearchParams(await body(req));
        const user = users.get((form.get('email') ?? '').toLowerCase());
        if (user === undefined || form.get('code') !== user.code) return send(400, page('Wrong code', ''));
        user.confirmed = true;
        return send(200, page('Code confirmed', '<p>Now follow the link in the mail.</p>'));
      }
      if (req.method === 'GET' && u.pathname === '/verify') {
        const user = byToken.get(u.searchParams.get('token') ?? '');
        if (user === undefined) return send(404, page('Unknown link', ''));
        if (!user.confirmed) return send(409, page('Enter the code first', ''));
        user.verified = true;
        return send(200, page('Your email is verified', `<p>${esc(user.email)} is verified.</p>`));
      }
      send(404, page('Not found', ''));
    } catch (err) {
      send(500, page('Error', esc(err.message)));
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    get sent() {
      return mailer.sent;
    },
    close: async () => {
      mailer.close();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function body(req) {
  return new Promise((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (d) => {
      s += d;
      if (s.length > 10_000) req.destroy();
    });
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });
}

/**
 * A minimal SMTP client (RFC 5321 over node:net): one connection reused for
 * every message, a queue sent in order, at most one MAIL per `pace` ms; a
 * message refused with a 4xx or cut off by the connection is sent again on a
 * new connection after a pause (5xx is given up, logged).
 */
class Mailer {
  constructor(addr, pace) {
    const [host, port] = addr.split(':');
    this.host = host;
    this.port = Number(port);
    this.pace = pace;
    this.queue = [];
    this.busy = false;
    this.conn = undefined;
    this.lastMail = 0;
    this.sent = 0;
    this.closed = false;
  }

  send(to, subject, text, html) {
    this.queue.push({ to, subject, text, html, tries: 0 });
    if (!this.busy) this.#drain();
  }

  close() {
    this.closed = true;
    this.conn?.end();
  }

  async #drain() {
    this.busy = true;
    while (this.queue.length > 0 && !this.closed) {
      const m = this.queue[0];
      const wait = this.lastMail + this.pace - Date.now();
      if (wait > 0) await sleep(wait);
      try {
        if (this.conn === undefined) this.conn = await Connection.open(this.host, this.port);
        this.lastMail = Date.now();
        await this.conn.transaction('signup@app.example', m.to, message(m));
        this.queue.shift();
        this.sent++;
      } catch (err) {
        this.conn?.destroy();
        this.conn = undefined;
        if (err.code >= 500 || ++m.tries > 20) {
          console.error(`signup app: giving up mail to ${m.to}: ${err.message}`);
          this.queue.shift();
        } else {
          await sleep(err.code === 421 ? 5000 : 1000);
        }
      }
    }
    this.busy = false;
  }
}

function message({ to, subject, text, html }) {
  const b = `b-${randomBytes(8).toString('hex')}`;
  return [
    'From: Signup App <signup@app.example>', `To: <${to}>`, `Subject: ${subject}`,
    `Date: ${new Date().toUTCString()}`, `Message-ID: <${randomBytes(12).toString('hex')}@app.example>`,
    'MIME-Version: 1.0', `Content-Type: multipart/alternative; boundary="${b}"`, '',
    `--${b}`, 'Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 7bit', '', text,
    `--${b}`, 'Content-Type: text/html; charset=utf-8', 'Content-Transfer-Encoding: 7bit', '', html,
    `--${b}--`, '',
  ].join('\r\n');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One SMTP connection: replies read in order; an error carries the reply's code. */
class Connection {
  static async open(host, port) {
    const c = new Connection(net.connect({ host, port }));
    await c.#expect(220, 'greeting');
    c.sock.write('EHLO app.example\r\n');
    await c.#expect(250, 'EHLO');
    return c;
  }

  constructor(sock) {
    this.sock = sock;
    this.buf = '';
    this.waiters = [];
    this.error = undefined;
    sock.setEncoding('utf8');
    sock.on('data', (d) => {
      this.buf += d;
      this.#pump();
    });
    const fail = (err) => {
      this.error = err;
      while (this.waiters.length) this.waiters.shift().reject(err);
    };
    sock.on('error', fail);
    sock.on('close', () => fail(Object.assign(new Error('smtp: connection closed'), { code: 0 })));
  }

  #pump() {
    for (;;) {
      const m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\r?\n/.exec(this.buf);
      if (!m || this.waiters.length === 0) return;
      this.buf = this.buf.slice(m[0].length);
      this.waiters.shift().resolve({ code: Number(m[1]), text: m[0].trim() });
    }
  }

  async #expect(want, what) {
    if (this.error) throw this.error;
    const r = await new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.#pump();
    });
    if (r.code !== want) throw Object.assign(new Error(`smtp: ${what}: ${r.text}`), { code: r.code });
  }

  async transaction(from, to, data) {
    this.sock.write(`MAIL FROM:<${from}>\r\n`);
    await this.#expect(250, 'MAIL');
    this.sock.write(`RCPT TO:<${to}>\r\n`);
    await this.#expect(250, 'RCPT');
    this.sock.write('DATA\r\n');
    await this.#expect(354, 'DATA');
    this.sock.write(data.replace(/\r\n\./g, '\r\n..') + '\r\n.\r\n');
    await this.#expect(250, 'end of DATA');
  }

  destroy() {
    this.sock.destroy();
  }

  end() {
    this.sock.end('QUIT\r\n');
  }
}
