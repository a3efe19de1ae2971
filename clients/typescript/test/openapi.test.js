// The hand-written types (src/types.ts) against the OpenAPI document the
// edge serves (GET /v1/openapi.yaml): every schema of components.schemas has
// a declaration of the same name (Error: ErrorResponse) with the same
// properties, the same required ones, the same enums and the same types.
// The declarations are read with the TypeScript compiler (a devDependency).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parseYAML } from './yaml.js';
import { Stack, stackUnavailable } from './stack.js';

const typesFile = fileURLToPath(new URL('../src/types.ts', import.meta.url));
const NAMES = { Error: 'ErrorResponse' };

/** The declarations of types.ts as plain descriptors. */
function declarations() {
  const sf = ts.createSourceFile(typesFile, readFileSync(typesFile, 'utf8'), ts.ScriptTarget.ES2022, true);
  const out = {};
  const members = (ms) => {
    const props = {};
    let index = false;
    for (const m of ms) {
      if (ts.isIndexSignatureDeclaration(m)) index = true;
      else if (ts.isPropertySignature(m)) props[m.name.getText(sf)] = { optional: !!m.questionToken, type: desc(m.type) };
    }
    return { kind: 'object', props, index };
  };
  const desc = (t) => {
    if (ts.isTypeLiteralNode(t)) return members(t.members);
    if (ts.isArrayTypeNode(t)) return { kind: 'array', of: desc(t.elementType) };
    if (ts.isTypeReferenceNode(t)) return { kind: 'ref', name: t.typeName.getText(sf) };
    if (ts.isUnionTypeNode(t)) return { kind: 'union', of: t.types.map(desc) };
    if (ts.isLiteralTypeNode(t)) {
      if (t.literal.kind === ts.SyntaxKind.NullKeyword) return { kind: 'null' };
      return { kind: 'literal', value: t.literal.text };
    }
    return { kind: t.getText(sf) }; // string, number, boolean, unknown
  };
  for (const st of sf.statements) {
    if (ts.isInterfaceDeclaration(st)) out[st.name.text] = members(st.members);
    else if (ts.isTypeAliasDeclaration(st)) out[st.name.text] = desc(st.type);
  }
  return out;
}

/** Asserts that the TS descriptor d declares what the schema s says, at path where. */
function check(s, d, where) {
  if (s.$ref) {
    const name = s.$ref.replace('#/components/schemas/', '');
    assert.deepEqual(d, { kind: 'ref', name: NAMES[name] ?? name }, `${where}: $ref ${name}`);
    return;
  }
  if (s.nullable) {
    assert.equal(d.kind, 'union', `${where}: nullable, so T | null`);
    assert.ok(d.of.some((x) => x.kind === 'null'), `${where}: nullable, so T | null`);
    const rest = d.of.filter((x) => x.kind !== 'null');
    check({ ...s, nullable: false }, rest.length === 1 ? rest[0] : { kind: 'union', of: rest }, where);
    return;
  }
  if (s.enum) {
    const got = d.kind === 'union' ? d.of.map((x) => x.value) : [d.value];
    assert.deepEqual([...got].sort(), [...s.enum].sort(), `${where}: enum`);
    return;
  }
  switch (s.type) {
    case 'string':
      assert.equal(d.kind, 'string', `${where}: string`);
      return;
    case 'integer':
    case 'number':
      assert.equal(d.kind, 'number', `${where}: number`);
      return;
    case 'boolean':
      assert.equal(d.kind, 'boolean', `${where}: boolean`);
      return;
    case 'array':
      assert.equal(d.kind, 'array', `${where}: array`);
      check(s.items, d.of, `${where}[]`);
      return;
    case 'object': {
      assert.equal(d.kind, 'object', `${where}: object`);
      const props = s.properties ?? {};
      assert.deepEqual(Object.keys(d.props).sort(), Object.keys(props).sort(), `${where}: property names`);
      const required = new Set(s.required ?? []);
      for (const [name, ps] of Object.entries(props)) {
        assert.equal(d.props[name].optional, !required.has(name), `${where}.${name}: optional iff not required`);
        check(ps, d.props[name].type, `${where}.${name}`);
      }
      assert.equal(d.index, s.additionalProperties === true, `${where}: additionalProperties`);
      return;
    }
    default:
      assert.fail(`${where}: schema type ${s.type} not handled`);
  }
}

const skip = stackUnavailable();

describe('the types match the served OpenAPI document', { skip }, () => {
  const stack = new Stack();
  let doc;
  before(async () => {
    await stack.start();
    const r = await fetch(stack.baseUrl + '/openapi.yaml');
    assert.equal(r.status, 200);
    doc = parseYAML(await r.text());
  });
  after(() => stack.stop());

  test('every schema has a matching declaration in src/types.ts', () => {
    const decls = declarations();
    const schemas = doc.components.schemas;
    assert.ok(Object.keys(schemas).length >= 10);
    for (const [name, s] of Object.entries(schemas)) {
      const tsName = NAMES[name] ?? name;
      assert.ok(decls[tsName], `no declaration ${tsName} for schema ${name}`);
      check(s, decls[tsName], tsName);
    }
  });

  test('the comparison fails on a drift (the check can fail)', () => {
    const decls = declarations();
    const mailbox = structuredClone(doc.components.schemas.Mailbox);
    mailbox.properties.extra = { type: 'string' };
    assert.throws(() => check(mailbox, decls.Mailbox, 'Mailbox'), /property names/);
    const status = { type: 'string', enum: ['pending', 'ready'] };
    assert.throws(() => check(status, decls.MessageStatus, 'MessageStatus'), /enum/);
    const pag = structuredClone(doc.components.schemas.Pagination);
    pag.required = ['limit'];
    assert.throws(() => check(pag, decls.Pagination, 'Pagination'), /optional iff not required/);
  });
});
