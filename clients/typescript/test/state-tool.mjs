#!/usr/bin/env node
// The cross-language state tool (clients/SCENARIOS.md, save/restore): reads an
// inbox state JSON (written by any of the Go, Python or TypeScript clients)
// on stdin, restores it (no request), waits for the next unseen message
// (timeout: argv[2] seconds, default 20) and prints one JSON line
// {"subject": <its subject>, "state": <the new state>} on stdout; on an error,
// exit 1 with the error on stderr.
//
//   node clients/typescript/test/state-tool.mjs 20 < state.json

import { Mayfly } from '../dist/index.js';

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const state = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const seconds = Number(process.argv[2] ?? 20);
  const inbox = new Mayfly({ baseUrl: state.base, logger: () => {} }).restore(state);
  const msg = await inbox.waitForMessage({ since: 'unseen', timeout: Math.round(seconds * 1000) });
  process.stdout.write(JSON.stringify({ subject: msg.subject, state: inbox.state() }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`state-tool: ${err?.stack ?? err}\n`);
  process.exit(1);
});
