// The published shape: dist/ (committed, so that a clone installs with one
// command and no build) is exactly what tsc makes of src/; `npm pack` gives a
// tarball that installs into a scratch project, imports, type-checks and
// runs; so does installing the directory itself, the README's one command.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';

const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const tsc = path.join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const quiet = { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' };

function files(dir, base = dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? files(p, base) : [path.relative(base, p)];
  });
}

/** A loopback URL whose port refuses connections. */
async function closedUrl() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}/v1`;
}

function scratch(t) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mayfly-ts-scratch-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'scratch', version: '0.0.0', private: true, type: 'module' }));
  return dir;
}

// Runs in the scratch project: the package as a user gets it.
const SMOKE = `
import { Mayfly, createClient, links, code, MayflyError, InboxGoneError, CreationLimitError } from '@mayfly/client';
import pkg from '@mayfly/client/package.json' with { type: 'json' };
if (code({ text_body: 'your code is 123456' }) !== '123456') throw new Error('code');
if (links({ html_body: '<a href="https://x.example/?a=1&amp;b=2">x</a>' })[0] !== 'https://x.example/?a=1&b=2') throw new Error('links');
if (!(new InboxGoneError() instanceof MayflyError) || typeof CreationLimitError !== 'function') throw new Error('errors');
const c = createClient({ baseUrl: process.env.CLOSED_URL, maxAttempts: 1 });
if (!(c instanceof Mayfly)) throw new Error('createClient');
try { await c.createInbox(); throw new Error('no error'); } catch (e) { if (!(e instanceof MayflyError) || !/refused/.test(e.message)) throw e; }
const pw = await import('@mayfly/client/playwright');
const fx = pw.mayflyFixtures();
if (typeof fx.inbox !== 'function' || fx.mayfly[1].scope !== 'worker') throw new Error('playwright fixtures');
console.log('ok', pkg.name, pkg.version);
`;

// The same through require(): the CommonJS entry of a default \`npm init\` project.
const SMOKE_CJS = `
const { Mayfly, createClient, links, code, MayflyError, InboxGoneError, SessionInvalidError } = require('@mayfly/client');
const { mayflyFixtures } = require('@mayfly/client/playwright');
const pkg = require('@mayfly/client/package.json');
if (code({ text_body: 'your code is 123456' }) !== '123456') throw new Error('code');
if (links({ html_body: '<a href="https://x.example/?a=1&amp;b=2">x</a>' })[0] !== 'https://x.example/?a=1&b=2') throw new Error('links');
if (!(new InboxGoneError() instanceof SessionInvalidError) || !(new InboxGoneError() instanceof MayflyError)) throw new Error('errors');
if (typeof mayflyFixtures().inbox !== 'function') throw new Error('playwright fixtures');
const c = createClient({ baseUrl: process.env.CLOSED_URL, maxAttempts: 1 });
if (!(c instanceof Mayfly)) throw new Error('createClient');
c.createInbox().then(() => { throw new Error('no error'); }, (e) => {
  if (!(e instanceof MayflyError) || !/refused/.test(e.message) || !e.message.includes(process.env.CLOSED_URL)) throw e;
  console.log('ok', pkg.name, pkg.version);
});
`;

/** Runs both smoke scripts (ESM and CommonJS) in a scratch project where the package is installed. */
async function smoke(dir) {
  writeFileSync(path.join(dir, 'smoke.mjs'), SMOKE);
  writeFileSync(path.join(dir, 'smoke.cjs'), SMOKE_CJS);
  const env = { ...process.env, CLOSED_URL: await closedUrl() };
  for (const f of ['smoke.mjs', 'smoke.cjs']) {
    assert.match(execFileSync(process.execPath, [f], { ...quiet, cwd: dir, env }), /^ok @mayfly\/client /, f);
  }
}

// Type-checks in the scratch project against the package's .d.ts.
const TYPED = `
import { Mayfly, code, type Message, type Inbox, WaitTimeoutError } from '@mayfly/client';
export async function signUp(m: Mayfly): Promise<string | undefined> {
  const inbox: Inbox = await m.createInbox({ lifetimeMinutes: 5 });
  const msg: Message = await inbox.waitForMessage({ subject: /code/, since: 'now', timeout: 1000 });
  const e: WaitTimeoutError | undefined = undefined;
  void e;
  return code(msg);
}
// @ts-expect-error: subject is a RegExp or a string
export const bad = (i: Inbox) => i.waitForMessage({ subject: 42 });
`;

// Type-checks a CommonJS TypeScript file (require through the "require" condition's declarations).
const TYPED_CJS = `
import { Mayfly, code, linksWithText, type Inbox, type InboxState } from '@mayfly/client';
import { mayflyFixtures, type MayflyFixtures } from '@mayfly/client/playwright';
export async function f(m: Mayfly, st: InboxState): Promise<boolean> {
  const inbox: Inbox = m.restore(st);
  const [a, b] = await inbox.waitForMessages(2, { subject: /code/ });
  void code(a!); void linksWithText(b!)[0]?.text;
  const fx: MayflyFixtures | undefined = undefined; void fx; void mayflyFixtures;
  return inbox.delete();
}
`;

function typecheckCjs(dir) {
  const sub = path.join(dir, 'cjs');
  mkdirSync(sub);
  writeFileSync(path.join(sub, 'package.json'), JSON.stringify({ type: 'commonjs' }));
  writeFileSync(path.join(sub, 'typed.cts'), TYPED_CJS);
  writeFileSync(path.join(sub, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, lib: ['ES2022', 'DOM'] },
    files: ['typed.cts'],
  }));
  execFileSync(process.execPath, [tsc, '-p', sub], quiet);
}

function typecheck(dir) {
  writeFileSync(path.join(dir, 'typed.ts'), TYPED);
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, lib: ['ES2022', 'DOM'] },
    files: ['typed.ts'],
  }));
  execFileSync(process.execPath, [tsc, '-p', dir], quiet);
}

test('dist/ is the build of src/, ESM and CommonJS (run `npm run build` and commit dist/)', (t) => {
  const out = mkdtempSync(path.join(tmpdir(), 'mayfly-ts-dist-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  execFileSync(process.execPath, [path.join(pkgDir, 'scripts', 'build.mjs'), out], quiet);
  assert.ok(files(out).includes(path.join('cjs', 'index.js')) && files(out).includes(path.join('cjs', 'package.json')));
  const want = files(out).sort();
  assert.deepEqual(files(path.join(pkgDir, 'dist')).sort(), want);
  for (const f of want) {
    assert.equal(readFileSync(path.join(pkgDir, 'dist', f), 'utf8'), readFileSync(path.join(out, f), 'utf8'), `dist/${f} is stale`);
  }
});

test('npm pack: the tarball installs into a scratch project, type-checks and runs', async (t) => {
  const dir = scratch(t);
  const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', dir, pkgDir], quiet));
  const tarball = path.join(dir, packed[0].filename);
  const size = statSync(tarball).size;
  console.log(`# tarball ${packed[0].filename}: ${size} bytes, ${packed[0].files.length} files`);
  assert.ok(size < 64 * 1024, `tarball ${size} bytes`);
  const names = packed[0].files.map((f) => f.path);
  assert.ok(names.includes('dist/index.d.ts') && names.includes('README.md'), names.join(' '));
  assert.ok(!names.some((n) => n.startsWith('src/') || n.startsWith('test/')), names.join(' '));
  execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { ...quiet, cwd: dir });
  await smoke(dir);
  typecheck(dir);
  typecheckCjs(dir);
});

test('the README command: npm install <clone>/clients/typescript', async (t) => {
  const dir = scratch(t);
  execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', pkgDir], { ...quiet, cwd: dir });
  await smoke(dir);
});

// The README's fixture file, type-checked against @playwright/test's own types (a devDependency).
const PW_FIXTURES = `
import { test as base } from '@playwright/test';
import { mayflyFixtures, type MayflyFixtures, type MayflyWorkerFixtures } from '@mayfly/client/playwright';
import { code } from '@mayfly/client';

export const test = base.extend<MayflyFixtures, MayflyWorkerFixtures>(mayflyFixtures({ inbox: { lifetimeMinutes: 5 } }));
test('typed', async ({ inbox, mayfly }) => {
  const m = await inbox.waitForMessage({ subject: /code/ });
  void code(m);
  void mayfly.baseUrl;
  // @ts-expect-error: the fixture is an Inbox
  void inbox.nope;
});
`;

test('the Playwright fixture type-checks with test.extend of @playwright/test', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mayfly-ts-pw-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'pw', private: true, type: 'module' }));
  mkdirSync(path.join(dir, 'node_modules', '@mayfly'), { recursive: true });
  symlinkSync(pkgDir, path.join(dir, 'node_modules', '@mayfly', 'client'));
  for (const dep of ['@playwright', 'playwright', 'playwright-core']) {
    symlinkSync(path.join(pkgDir, 'node_modules', dep), path.join(dir, 'node_modules', dep));
  }
  writeFileSync(path.join(dir, 'fixtures.ts'), PW_FIXTURES);
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true },
    files: ['fixtures.ts'],
  }));
  execFileSync(process.execPath, [tsc, '-p', dir], quiet);
});
