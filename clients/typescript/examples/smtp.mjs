// A minimal SMTP sender (no dependencies) for the examples: it stands in for
// the application under test, which mails a code to the address it is given.
// One message per connection; every reply is checked.

import net from 'node:net';

/** Sends a plain-text mail to `to` through the SMTP server at addr ("host:port"). */
export async function sendMail(addr, { to, from = 'app@example.org', subject, text }) {
  const [host, port] = addr.split(':');
  const sock = net.connect({ host, port: Number(port) });
  sock.setEncoding('utf8');
  let buf = '';
  let waiting;
  sock.on('data', (d) => {
    buf += d;
    const m = /^(?:\d{3}-[^\n]*\n)*(\d{3})(?: [^\n]*)?\r?\n/.exec(buf);
    if (m && waiting) {
      buf = buf.slice(m[0].length);
      const w = waiting;
      waiting = undefined;
      w.resolve(m[0]);
    }
  });
  sock.on('error', (err) => waiting?.reject(err));
  const step = (line, want) => new Promise((resolve, reject) => {
    waiting = {
      resolve: (reply) => (reply.startsWith(String(want)) ? resolve() : reject(new Error(`smtp ${line ?? 'greeting'}: ${reply.trim()}`))),
      reject,
    };
    if (line !== undefined) sock.write(line + '\r\n');
  });
  try {
    await step(undefined, 220);
    await step('EHLO app.example', 250);
    await step(`MAIL FROM:<${from}>`, 250);
    await step(`RCPT TO:<${to}>`, 250);
    await step('DATA', 354);
    const body = [`From: ${from}`, `To: ${to}`, `Subject: ${subject}`, `Date: ${new Date().toUTCString()}`,
      'Content-Type: text/plain; charset=utf-8', '', ...text.split('\n').map((l) => (l.startsWith('.') ? '.' + l : l))];
    await step(body.join('\r\n') + '\r\n.', 250);
    sock.write('QUIT\r\n');
  } finally {
    sock.end();
  }
}
