// The published shape: dist/ (committed, so that a clone installs with one
// command and no build) is exactly what tsc makes of src/; `npm pack` gives a
// tarball that installs into a scratch project, imports, type-checks and
// runs; so does installing the directory itself, the README's one command.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
console.log('ok', pkg.name, pkg.version);
`;

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

function typecheck(dir) {
  writeFileSync(path.join(dir, 'typed.ts'), TYPED);
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, lib: ['ES2022', 'DOM'] },
    files: ['typed.ts'],
  }));
  execFileSync(process.execPath, [tsc, '-p', dir], quiet);
}

test('dist/ is the build of src/ (run `npm run build` and commit dist/)', (t) => {
  const out = mkdtempSync(path.join(tmpdir(), 'mayfly-ts-dist-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  execFileSync(process.execPath, [tsc, '-p', pkgDir, '--outDir', out], quiet);
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
  writeFileSync(path.join(dir, 'smoke.mjs'), SMOKE);
  const env = { ...process.env, CLOSED_URL: await closedUrl() };
  assert.match(execFileSync(process.execPath, ['smoke.mjs'], { ...quiet, cwd: dir, env }), /^ok @mayfly\/client /);
  typecheck(dir);
});

test('the README command: npm install <clone>/clients/typescript', async (t) => {
  const dir = scratch(t);
  execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', pkgDir], { ...quiet, cwd: dir });
  writeFileSync(path.join(dir, 'smoke.mjs'), SMOKE);
  const env = { ...process.env, CLOSED_URL: await closedUrl() };
  assert.match(execFileSync(process.execPath, ['smoke.mjs'], { ...quiet, cwd: dir, env }), /^ok @mayfly\/client /);
});
