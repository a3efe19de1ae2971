// A small YAML reader for the subset edge/openapi.yaml uses: block mappings
// and sequences by indentation, flow sequences and mappings ([a, b],
// {$ref: '…'}), plain, single- and double-quoted scalars, block scalars
// (| and >) and comments. Enough to compare the served document with the
// client's types; not a general YAML parser (no anchors, tags, documents).

export function parseYAML(text) {
  const lines = text.split(/\r?\n/).map((raw) => ({ raw, indent: raw.search(/\S/) }));
  let i = 0;

  const skipBlank = () => {
    while (i < lines.length && (lines[i].indent < 0 || lines[i].raw.trimStart().startsWith('#'))) i++;
  };

  function block(indent) {
    skipBlank();
    if (i >= lines.length || lines[i].indent < indent) return null;
    const ind = lines[i].indent;
    return lines[i].raw.slice(ind).startsWith('- ') || lines[i].raw.trim() === '-' ? seq(ind) : map(ind);
  }

  function seq(ind) {
    const out = [];
    for (;;) {
      skipBlank();
      if (i >= lines.length || lines[i].indent !== ind || !lines[i].raw.slice(ind).startsWith('-')) return out;
      const rest = lines[i].raw.slice(ind + 1).trimStart();
      if (rest === '') {
        i++;
        out.push(block(ind + 1));
      } else if (/^[^'"\[{][^:]*:(\s|$)/.test(rest) || /^'[^']*':(\s|$)/.test(rest)) {
        // "- key: value": a mapping whose first line shares the dash's line.
        const col = lines[i].raw.length - rest.length;
        lines[i] = { raw: ' '.repeat(col) + rest, indent: col };
        out.push(map(col));
      } else {
        i++;
        out.push(scalar(stripComment(rest)));
      }
    }
  }

  function map(ind) {
    const out = {};
    for (;;) {
      skipBlank();
      if (i >= lines.length || lines[i].indent !== ind) return out;
      const line = lines[i].raw.slice(ind);
      const m = /^('(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^:#]+?):(?:\s+(.*))?$/.exec(line);
      if (!m) throw new Error(`yaml: line ${i + 1}: ${line}`);
      const key = m[1].startsWith("'") || m[1].startsWith('"') ? scalar(m[1]) : m[1];
      const rest = stripComment(m[2] ?? '');
      i++;
      if (rest === '') {
        skipBlank();
        // A sequence may sit at the key's own indentation.
        if (i < lines.length && lines[i].indent === ind && lines[i].raw.slice(ind).startsWith('- ')) out[key] = seq(ind);
        else out[key] = block(ind + 1);
      } else if (rest === '|' || rest === '>' || rest === '|-' || rest === '>-') {
        const parts = [];
        while (i < lines.length && (lines[i].indent < 0 || lines[i].indent > ind)) parts.push(lines[i++].raw);
        out[key] = parts.join('\n');
      } else {
        out[key] = scalar(rest);
      }
    }
  }
  return block(0);
}

function stripComment(s) {
  let q = '';
  for (let k = 0; k < s.length; k++) {
    const c = s[k];
    if (q) {
      if (c === q) q = '';
    } else if (c === "'" || c === '"') q = c;
    else if (c === '#' && (k === 0 || s[k - 1] === ' ')) return s.slice(0, k).trimEnd();
  }
  return s.trim();
}

function scalar(s) {
  const v = s.trim();
  if (v.startsWith('[') || v.startsWith('{')) {
    const p = { s: v, k: 0 };
    return flow(p);
  }
  return plain(v);
}

function plain(v) {
  if (v.startsWith("'")) return v.slice(1, -1).replace(/''/g, "'");
  if (v.startsWith('"')) return JSON.parse(v);
  if (v === 'true') return true;
  if (v === 'false') return false;
  if (v === 'null' || v === '~') return null;
  if (/^-?\d+(\.\d+)?$/.test(v)) return Number(v);
  return v;
}

function flow(p) {
  const ws = () => { while (p.s[p.k] === ' ') p.k++; };
  ws();
  const c = p.s[p.k];
  if (c === '[' || c === '{') {
    const close = c === '[' ? ']' : '}';
    p.k++;
    const arr = [];
    const obj = {};
    for (;;) {
      ws();
      if (p.s[p.k] === close) { p.k++; break; }
      if (c === '[') arr.push(flow(p));
      else {
        const key = token(p, ':');
        p.k++; // ':'
        obj[key] = flow(p);
      }
      ws();
      if (p.s[p.k] === ',') p.k++;
    }
    return c === '[' ? arr : obj;
  }
  return token(p, ',]}');
}

function token(p, stops) {
  const ws = () => { while (p.s[p.k] === ' ') p.k++; };
  ws();
  const start = p.k;
  const q = p.s[p.k];
  if (q === "'" || q === '"') {
    p.k++;
    while (p.k < p.s.length) {
      if (p.s[p.k] === q && !(q === "'" && p.s[p.k + 1] === "'")) break;
      p.k += q === "'" && p.s[p.k] === "'" ? 2 : p.s[p.k] === '\\' && q === '"' ? 2 : 1;
    }
    p.k++;
    return plain(p.s.slice(start, p.k));
  }
  while (p.k < p.s.length && !stops.includes(p.s[p.k])) p.k++;
  return plain(p.s.slice(start, p.k).trim());
}
