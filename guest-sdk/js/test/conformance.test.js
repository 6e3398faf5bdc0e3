// The conformance suite, guest-sdk/rules/conformance.json, answered through the rules component
// as the harness asks it: every case gets the host's own sentence (the Rust crate's
// tests/conformance.rs and the Python SDK answer the same file).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as contractRules from '../src/contract-rules.js';
import { cacheRules, rules } from '../rules/rules.js';

const component = { ...rules, ...cacheRules };

const suite = JSON.parse(readFileSync(new URL('../../rules/conformance.json', import.meta.url)));
const orNull = (answer) => answer ?? null;

test('every value gets the host s answer', () => {
  for (const c of suite.values) assert.equal(contractRules.checkValue(c.rule, c.value), c.answer, `${c.rule} ${JSON.stringify(c.value)}`);
});

test('every selector gets the host s answers', () => {
  for (const c of suite.selectors) {
    assert.equal(contractRules.checkSelector(c.selector), c.server, `${JSON.stringify(c.selector)} for the server`);
    if (c.refused === null) {
      assert.equal(contractRules.selectorMatches(c.selector, c.labels), c.matches, `${JSON.stringify(c.selector)} matches`);
    } else {
      assert.throws(() => contractRules.selectorMatches(c.selector, c.labels), { message: c.refused }, JSON.stringify(c.selector));
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
  for (const c of suite.responses) assert.equal(contractRules.checkResponse(c.actions, c.failed, c.phase, c['prune-allowed']), c.answer, c.case);
});

test('every cache holds what the host s cache holds', () => {
  for (const c of suite.caches) {
    let answer;
    try {
      answer = component.holds(JSON.stringify(c.manifest), JSON.stringify(c.object));
    } catch (e) {
      answer = e.payload;
    }
    assert.equal(answer, c.holds, c.case);
  }
});

test('every index files an object under the host s keys', () => {
  for (const c of suite.indexes) {
    let answer;
    try {
      answer = component.indexKeys(JSON.stringify(c.manifest), c.index, JSON.stringify(c.object));
    } catch (e) {
      answer = e.payload;
    }
    assert.deepEqual(answer, c.keys, c.case);
  }
});
