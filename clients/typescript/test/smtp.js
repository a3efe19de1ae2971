// A tiny SMTP client over net, for the tests only: one message per
// connection, each reply checked.

import net from 'node:net';

/**
 * Sends one message. headers: {Subject, From, ...}; text and/or html give
 * the parts (both: multipart/alternative).
 */
export async function sendMail(addr, { to, from = 'sender@example.org', subject = 'hello', text, html, headers = {}, raw }) {
  const [host, port] = addr.split(':');
  const sock = net.connect({ host, port: Number(port) });
  sock.setEncoding('utf8');
  let buf = '';
  const waiters = [];
  const pump = () => {
    for (;;) {
      // A reply ends with a line "ddd text" (not "ddd-text").
      const m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\r?\n/.exec(buf);
      if (!m || waiters.length === 0) return;
      buf = buf.slice(m[0].length);
      waiters.shift().resolve({ code: Number(m[1]), text: m[0] });
    }
  };
  sock.on('data', (d) => {
    buf += d;
    pump();
  });
  const failAll = (err) => {
    while (waiters.length) waiters.shift().reject(err);
  };
  sock.on('error', failAll);
  sock.on('close', () => failAll(new Error('smtp: connection closed')));
  const reply = () => new Promise((resolve, reject) => {
    waiters.push({ resolve, reject });
    pump();
  });
  const expect = async (want, what) => {
    const r = await reply();
    if (r.code !== want) throw new Error(`smtp: ${what}: got ${r.text.trim()}, want ${want}`);
    return r;
  };
  const cmd = async (line, want) => {
    sock.write(line + '\r\n');
    return expect(want, line.split(':')[0]);
  };
  try {
    await new Promise((resolve, reject) => {
      sock.once('connect', resolve);
      sock.once('error', reject);
    });
    await expect(220, 'greeting');
    await cmd('EHLO client.example', 250);
    await cmd(`MAIL FROM:<${from}>`, 250);
    await cmd(`RCPT TO:<${to}>`, 250);
    await cmd('DATA', 354);
    const lines = [
      `From: ${from}`,
      `To: ${to}`,
      `Subject: ${subject}`,
      `Date: ${new Date().toUTCString()}`,
      `Message-ID: <${Date.now()}.${Math.random().toString(36).slice(2)}@example.org>`,
      'MIME-Version: 1.0',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    if (text !== undefined && html !== undefined) {
      const b = 'b' + Math.random().toString(36).slice(2);
      lines.push(`Content-Type: multipart/alternative; boundary="${b}"`, '',
        `--${b}`, 'Content-Type: text/plain; charset=utf-8', '', text,
        `--${b}`, 'Content-Type: text/html; charset=utf-8', '', html, `--${b}--`);
    } else if (html !== undefined) {
      lines.push('Content-Type: text/html; charset=utf-8', '', html);
    } else {
      lines.push('Content-Type: text/plain; charset=utf-8', '', text ?? '');
    }
    const body = (raw ?? lines.join('\r\n')).replace(/\r?\n/g, '\r\n').split('\r\n').map((l) => (l.startsWith('.') ? '.' + l : l)).join('\r\n');
    sock.write(body + '\r\n.\r\n');
    await expect(250, 'end of data');
    sock.write('QUIT\r\n');
    await reply().catch(() => {});
  } finally {
    sock.destroy();
  }
}
