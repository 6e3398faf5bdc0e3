/**
 * The host's rules for what a plugin hands it, ported from `wasmloop_contract::validate` and
 * `wasmloop_contract::manifest` so that the test harness refuses what the host refuses. The
 * shared table `guest-sdk/contract/tests/parity.json` holds the port to the host's answers.
 *
 * Each check returns `null` when the value passes, else the host's sentence.
 */

import { render, requirements } from './selector.js';

export const MAX_NAMESPACE = 63;
export const MAX_NAME = 253;
export const MAX_KIND = 63;
export const MAX_UID = 128;
export const MAX_EVENT_REASON = 128;
export const MAX_LABEL = 63;
export const MAX_SELECTOR_REQUIREMENTS = 32;
export const MAX_SELECTOR_VALUES = 64;
export const MAX_GRANT_NAMESPACES = 64;
export const MAX_FINALIZER = 316;

// Rust's `char::is_whitespace` (Unicode White_Space). JavaScript's `String.prototype.trim` also
// takes U+FEFF, which Rust does not.
const RUST_WHITESPACE = new Set([
  '\t', '\n', '\v', '\f', '\r', ' ', '\u0085', '\u00a0', '\u1680',
  ...Array.from({ length: 11 }, (_, i) => String.fromCharCode(0x2000 + i)),
  '\u2028', '\u2029', '\u202f', '\u205f', '\u3000',
]);

export function isRustWhitespace(ch) {
  return RUST_WHITESPACE.has(ch);
}

/** `text` trimmed as Rust's `str::trim` trims it. */
export function rustTrim(text) {
  const chars = Array.from(text);
  let start = 0;
  let end = chars.length;
  while (start < end && RUST_WHITESPACE.has(chars[start])) start += 1;
  while (end > start && RUST_WHITESPACE.has(chars[end - 1])) end -= 1;
  return chars.slice(start, end).join('');
}

const utf8 = (s) => new TextEncoder().encode(s).length;
const alnum = (c) => /^[A-Za-z0-9]$/.test(c);
const quote = (v) => JSON.stringify(v);

function dnsLabelChars(s) {
  return /^[a-z0-9-]+$/.test(s) && s[0] !== '-' && s[s.length - 1] !== '-';
}

export function isDns1123Label(s) {
  return s.length <= 63 && dnsLabelChars(s);
}

export function isDns1123Subdomain(s) {
  return s.length <= 253 && s.split('.').every(dnsLabelChars);
}

export function isDns1035Label(s) {
  return isDns1123Label(s) && /^[a-z]/.test(s);
}

export function namespace(ns) {
  if (typeof ns === 'string' && isDns1123Label(ns)) return null;
  return `namespace ${quote(ns)} is not a valid namespace (1-${MAX_NAMESPACE} characters of a-z, 0-9 and '-', starting and ending alphanumeric)`;
}

export function name(value) {
  const ok = typeof value === 'string' && value.length > 0 && value.length <= MAX_NAME && /^[A-Za-z0-9._:-]+$/.test(value) && value !== '.' && value !== '..';
  if (ok) return null;
  return `name ${quote(value)} is not a valid object name (1-${MAX_NAME} characters of a-z, A-Z, 0-9, '-', '.', '_' and ':', not "." or "..")`;
}

export function kind(value) {
  if (typeof value === 'string' && value.length <= MAX_KIND && /^[A-Za-z][A-Za-z0-9]*$/.test(value)) return null;
  return `kind ${quote(value)} is not a valid kind (1-${MAX_KIND} letters and digits, starting with a letter)`;
}

export function groupVersion(group, version) {
  if (group && !isDns1123Subdomain(group)) {
    return `group ${quote(group)} is not a valid API group (a DNS-1123 subdomain such as apps or example.com)`;
  }
  if (!isDns1035Label(version)) return `version ${quote(version)} is not a valid API version (such as v1 or v1beta2)`;
  return null;
}

export function apiVersion(value) {
  if (typeof value !== 'string') return `apiVersion ${quote(value)} is not a string`;
  const at = value.indexOf('/');
  const [group, version] = at < 0 ? ['', value] : [value.slice(0, at), value.slice(at + 1)];
  if (at >= 0 && !group) return `apiVersion ${quote(value)} has an empty group`;
  const error = groupVersion(group, version);
  return error === null ? null : `apiVersion ${quote(value)} is invalid: ${error}`;
}

export function uid(value) {
  if (typeof value === 'string' && value.length > 0 && value.length <= MAX_UID && /^[A-Za-z0-9-]+$/.test(value)) return null;
  return `uid ${quote(value)} is not a valid UID (1-${MAX_UID} letters, digits and '-')`;
}

export function eventWord(field, value) {
  if (!value) return `an event needs a ${field}`;
  if (utf8(value) > MAX_EVENT_REASON) {
    return `the event ${field} is ${utf8(value)} bytes, over the limit of ${MAX_EVENT_REASON}; use a short CamelCase word`;
  }
  if (!/^[A-Za-z0-9_]+$/.test(value)) return `the event ${field} ${quote(value)} must be a CamelCase word of letters and digits`;
  return null;
}

export function isLabelValue(value) {
  return value === '' || (value.length <= MAX_LABEL && /^[A-Za-z0-9_.-]+$/.test(value) && alnum(value[0]) && alnum(value[value.length - 1]));
}

export function isLabelKey(key) {
  const at = key.indexOf('/');
  if (at < 0) return key !== '' && isLabelValue(key);
  const rest = key.slice(at + 1);
  return isDns1123Subdomain(key.slice(0, at)) && rest !== '' && isLabelValue(rest);
}

/**
 * A label selector the host sends to the API server (a watch's), checked whole: it parses, its
 * keys and values are labels, each set holds 1 to 64 values, and 32 requirements at most.
 */
export function selectorForServer(text) {
  let parsed;
  try {
    parsed = requirements(text);
  } catch (e) {
    return e.message;
  }
  const shown = render(parsed);
  if (parsed.length > MAX_SELECTOR_REQUIREMENTS) {
    return `label selector ${shown} has ${parsed.length} requirements, over the limit of ${MAX_SELECTOR_REQUIREMENTS}`;
  }
  for (const [op, key, values] of parsed) {
    if ((op === 'in' || op === 'notin') && !(values.length > 0 && values.length <= MAX_SELECTOR_VALUES)) {
      return `label selector ${shown}: the set of ${quote(key)} holds ${values.length} values; give 1 to ${MAX_SELECTOR_VALUES}`;
    }
    if (!isLabelKey(key)) return `label selector ${shown}: ${quote(key)} is not a label key`;
    const bad = values.find((v) => !isLabelValue(v));
    if (bad !== undefined) return `label selector ${shown}: ${quote(bad)} is not a label value`;
  }
  return null;
}

/** A finalizer must be a qualified name (`domain/name`), as the API server demands. */
export function finalizer(value) {
  const at = value.indexOf('/');
  const ok = at >= 0 && value.slice(0, at).includes('.') && value.slice(at + 1) !== '' && value.length <= MAX_FINALIZER && /^[A-Za-z0-9./_-]+$/.test(value);
  return ok ? null : `finalizer ${quote(value)} must look like \`example.com/name\``;
}

export function grantNamespaces(kindName, namespaces) {
  if (!(namespaces.length > 0 && namespaces.length <= MAX_GRANT_NAMESPACES)) {
    return `the write grant on ${kindName} lists ${namespaces.length} namespaces; list 1 to ${MAX_GRANT_NAMESPACES}, or use scope any`;
  }
  for (const ns of namespaces) {
    const error = namespace(ns);
    if (error !== null) return `the write grant on ${kindName}: ${error}`;
  }
  return null;
}
