// The build: src/ to ESM in dist/ and to CommonJS in dist/cjs/ (with a
// package.json saying so), both with declarations. `node scripts/build.mjs
// DIR` builds into DIR instead (test/package.test.js compares it with dist/).

import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const out = path.resolve(process.argv[2] ?? path.join(pkg, 'dist'));
const tsc = path.join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');

rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', path.join(pkg, 'tsconfig.json'), '--outDir', out], { stdio: 'inherit' });
execFileSync(process.execPath, [tsc, '-p', path.join(pkg, 'tsconfig.cjs.json'), '--outDir', path.join(out, 'cjs')], { stdio: 'inherit' });
mkdirSync(path.join(out, 'cjs'), { recursive: true });
writeFileSync(path.join(out, 'cjs', 'package.json'), '{\n  "type": "commonjs"\n}\n');
