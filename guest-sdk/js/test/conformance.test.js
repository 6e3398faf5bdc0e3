// The conformance suite, guest-sdk/rules/conformance.json, answered through the rules component
// as the harness asks it: every case gets the host's own sentence (the Rust crate's
// tests/conformance.rs and the Python SDK answer the same file).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as rules from '../src/contract-rules.js';
import { rules as component } from '../rules/rules.js';

const suite = JSON.parse(readFileSync(new URL('../../rules/conformance.json', import.meta.url)));
const orNull = (answer) => answer ?? null;

test('every value gets the host s answer', () => {
  for (const c of suite.values) assert.equal(rules.checkValue(c.rule, c.value), c.answer, `${c.rule} ${JSON.stringify(c.value)}`);
});

test('every selector gets the host s answers', () => {
  for (const c of suite.selectors) {
    assert.equal(rules.checkSelector(c.selector), c.server, `${JSON.stringify(c.selector)} for the server`);
    if (c.refused === null) {
      assert.equal(rules.selectorMatches(c.selector, c.labels), c.matches, `${JSON.stringify(c.selector)} matches`);
    } else {
      assert.throws(() => rules.selectorMatches(c.selector, c.labels), { message: c.refused }, JSON.stringify(c.selector));
    }
  }
});

test('every manifest gets the host s answer', () => {
  for (const c of suite.manifests) assert.equal(orNull(component.checkManifest(JSON.stringify(c.manifest))), c.answer, c.case);
});

test('every action gets the host s answer', () => {
  for (const c of suite.actions) assert.equal(orNull(component.checkAction(JSON.stringify(c.action), c.deleted)), c.answer, c.case);
});

test('every response gets the host s answer', () => {
  for (const c of suite.responses) assert.equal(rules.checkResponse(c.actions, c.failed, c.phase, c['prune-allowed']), c.answer, c.case);
});
