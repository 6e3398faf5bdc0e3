/**
 * Kubernetes label selectors (`app=web,tier!=cache,env in (a,b),!legacy`), parsed and matched
 * as the host's cache does: a line-for-line port of `wasmloop_contract::selector`, held to it
 * by the shared table `guest-sdk/contract/tests/parity.json`. The parse is lenient, as the
 * host's cache filter is; what the host sends to the API server is checked further by
 * `rules.selectorForServer`.
 *
 * @example
 * matches('app=web,tier notin (db)', { app: 'web', tier: 'cache' }) // true
 */

import { isRustWhitespace, rustTrim } from './rules.js';

function splitTopLevel(text) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === '(') depth += 1;
    else if (ch === ')') depth -= 1;
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

const validKey = (key) => /^[A-Za-z0-9_./-]+$/.test(key);

function parseSet(rest) {
  const set = rustTrim(rest);
  if (!(set.startsWith('(') && set.endsWith(')') && set.length >= 2)) return null;
  return set.slice(1, -1).split(',').map(rustTrim).filter((v) => v !== '');
}

function splitAtWhitespace(text) {
  const chars = Array.from(text);
  const at = chars.findIndex(isRustWhitespace);
  return at < 0 ? [text] : [chars.slice(0, at).join(''), chars.slice(at + 1).join('')];
}

function requirement(raw) {
  const part = rustTrim(raw);
  if (part.startsWith('!')) {
    const key = rustTrim(part.slice(1));
    if (validKey(key)) return ['!', key, []];
    throw new Error(`bad key in ${JSON.stringify(part)}`);
  }
  for (const op of ['!=', '==', '=']) {
    const at = part.indexOf(op);
    if (at >= 0) {
      const key = rustTrim(part.slice(0, at));
      const value = rustTrim(part.slice(at + op.length));
      if (!validKey(key)) throw new Error(`bad key in ${JSON.stringify(part)}`);
      return [op === '!=' ? '!=' : '=', key, [value]];
    }
  }
  const words = splitAtWhitespace(part);
  const key = words[0];
  if (!validKey(key)) throw new Error(`bad key in ${JSON.stringify(part)}`);
  if (words.length === 1) return ['exists', key, []];
  let rest = rustTrim(words[1]);
  let op;
  if (rest.startsWith('notin')) [op, rest] = ['notin', rest.slice(5)];
  else if (rest.startsWith('in')) [op, rest] = ['in', rest.slice(2)];
  else throw new Error(`unknown operator in ${JSON.stringify(part)}`);
  const values = parseSet(rest);
  if (values === null) throw new Error(`expected a (value,...) set in ${JSON.stringify(part)}`);
  return [op, key, values];
}

/** The requirements of `text`, as `[operator, key, values]`; throws naming the selector. */
export function requirements(text) {
  if (rustTrim(text) === '') return [];
  try {
    return splitTopLevel(text).map(requirement);
  } catch (e) {
    throw new Error(
      `invalid label selector ${JSON.stringify(text)}: ${e.message}; use the Kubernetes form \`key=value,key!=value,key in (a,b),!key\``,
    );
  }
}

function holds([op, key, values], labels) {
  const found = labels !== null && typeof labels === 'object' && Object.hasOwn(labels, key) ? labels[key] : undefined;
  // As the host reads JSON labels: a value that is not a string is no label.
  const value = typeof found === 'string' ? found : undefined;
  switch (op) {
    case '=':
      return value === values[0];
    case '!=':
      return value !== values[0];
    case 'in':
      return value !== undefined && values.includes(value);
    case 'notin':
      return !(value !== undefined && values.includes(value));
    case 'exists':
      return value !== undefined;
    default:
      return value === undefined;
  }
}

/** A predicate over a labels object; throws when `text` does not parse. */
export function parse(text) {
  const parsed = requirements(text);
  return (labels) => parsed.every((r) => holds(r, labels));
}

export function matches(text, labels) {
  return parse(text)(labels);
}

/** The selector's string form, as the host shows it. */
export function render(parsed) {
  return parsed
    .map(([op, key, values]) => {
      if (op === '=' || op === '!=') return `${key}${op}${values[0]}`;
      if (op === 'in' || op === 'notin') return `${key} ${op} (${values.join(',')})`;
      return op === 'exists' ? key : `!${key}`;
    })
    .join(',');
}
