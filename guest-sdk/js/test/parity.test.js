// The SDK's port of the host's rules gives the host's answers: one table,
// guest-sdk/contract/tests/parity.json, which the Rust crate's tests/parity.rs reads too.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import * as rules from '../src/rules.js';
import * as selector from '../src/selector.js';

const table = JSON.parse(readFileSync(new URL('../../contract/tests/parity.json', import.meta.url)));

test('selectors parse, pass the server check and match as the host s do', () => {
  for (const c of table.selectors) {
    let parsed = null;
    try {
      parsed = selector.parse(c.text);
    } catch {
      parsed = null;
    }
    assert.equal(parsed !== null, c.parses, `${JSON.stringify(c.text)} parses`);
    if (parsed === null) continue;
    assert.equal(rules.selectorForServer(c.text) === null, c.server, `${JSON.stringify(c.text)} for the server`);
    assert.equal(parsed(table.labels), c.matches, `${JSON.stringify(c.text)} matches`);
  }
});

test('names and words are checked as the host checks them', () => {
  const checks = {
    names: rules.name,
    namespaces: rules.namespace,
    kinds: rules.kind,
    api_versions: rules.apiVersion,
    uids: rules.uid,
    event_words: (v) => rules.eventWord('reason', v),
    finalizers: rules.finalizer,
  };
  for (const [field, check] of Object.entries(checks)) {
    for (const [value, ok] of table[field]) {
      assert.equal(check(value) === null, ok, `${field}: ${JSON.stringify(value)}: ${check(value)}`);
    }
  }
});
