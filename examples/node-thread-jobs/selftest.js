#!/usr/bin/env node
'use strict';
// A small end-to-end check of adapter.js over its JSON-lines protocol.
// Spawns the adapter, runs a handshake and calls covering the main rules,
// and exits non-zero on the first mismatch.
//
//   node examples/node-thread-jobs/selftest.js

const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const assert = require('assert');

const ADAPTER = path.join(__dirname, 'adapter.js');

class Client {
  constructor(args) {
    this.child = spawn(process.execPath, [ADAPTER, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.stderr = '';
    this.child.stderr.on('data', (chunk) => { this.stderr += chunk; });
    this.nextId = 1;
    this.waiting = new Map();
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      const response = JSON.parse(line); // anything but JSON on stdout is a failure
      const resolve = this.waiting.get(response.id);
      if (!resolve) throw new Error(`response to an unknown id: ${line}`);
      this.waiting.delete(response.id);
      resolve(response);
    });
  }

  request(message) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${JSON.stringify(message)}\n${this.stderr}`)), 5000);
      this.waiting.set(id, (response) => {
        clearTimeout(timer);
        resolve(response);
      });
      this.child.stdin.write(`${JSON.stringify({ id, ...message })}\n`);
    });
  }

  call(operation, args = {}) {
    return this.request({ type: 'call', operation, args });
  }
}

let checks = 0;

/** `actual` contains `expected`: objects by the keys given, arrays element by element and of equal length. */
function matches(actual, expected, where = '') {
  if (expected !== null && typeof expected === 'object') {
    if (Array.isArray(expected)) {
      assert.ok(Array.isArray(actual), `${where}: expected a list, got ${JSON.stringify(actual)}`);
      assert.strictEqual(actual.length, expected.length, `${where}: list length (${JSON.stringify(actual)})`);
      expected.forEach((e, i) => matches(actual[i], e, `${where}[${i}]`));
    } else {
      assert.ok(actual !== null && typeof actual === 'object', `${where}: expected an object, got ${JSON.stringify(actual)}`);
      for (const key of Object.keys(expected)) matches(actual[key], expected[key], `${where}.${key}`);
    }
  } else {
    assert.strictEqual(actual, expected, `${where}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

async function expectCall(client, label, operation, args, expected) {
  const response = await client.call(operation, args);
  try {
    matches(response, expected, label);
  } catch (err) {
    err.message = `${label}: ${operation} ${JSON.stringify(args).slice(0, 200)}\n  got ${JSON.stringify(response).slice(0, 600)}\n  ${err.message}`;
    throw err;
  }
  checks += 1;
  return response;
}

const ALL = ['running', 'pending_cancel', 'completed', 'failed', 'cancelled', 'timed_out'];

async function mainSession() {
  const c = new Client(['--retention-limit', '3']);
  const hello = await c.request({ type: 'hello', protocol: 1, spec: { id: 'thread-jobs', version: '2.0.0' } });
  matches(hello, {
    protocol: 1,
    specs: [{ id: 'thread-jobs', version: '2.0.0', profile: null, parameters: { retention_limit: 3 } }],
    capabilities: { concurrent: false },
  }, 'hello');
  assert.deepStrictEqual(Object.keys(hello.specs[0].parameters), ['retention_limit'], 'hello declares only explicit parameters');
  matches(await c.request({ type: 'reset', now_ms: 0 }), { ok: true }, 'reset');
  checks += 1;

  // Sync vs background: a tool call resolves exactly one way.
  await expectCall(c, 'sync', 'complete_sync', { thread_id: 't1', tool_call_id: 'c1', tool_name: 'search', result: 'done' },
    { result: { mode: 'synchronous', result: 'done' }, effects: [] });
  await expectCall(c, 'start after sync', 'start_job', { thread_id: 't1', tool_call_id: 'c1', tool_name: 'search', job_id: 'j0' },
    { error: { kind: 'tool_call_resolved', message: 'Tool invocation already resolved' }, effects: [] });
  await c.request({ type: 'clock', now_ms: 3 });
  const gen = await expectCall(c, 'background', 'start_job', { thread_id: 't1', tool_call_id: 'c2', tool_name: 'build' },
    { result: { mode: 'background', status: 'running' }, effects: [] });
  const genId = gen.result.job_id;
  await expectCall(c, 'sync after background', 'complete_sync', { thread_id: 't1', tool_call_id: 'c2', tool_name: 'build', result: 'x' },
    { error: { kind: 'tool_call_resolved' } });

  // Duplicates.
  await expectCall(c, 'explicit id', 'start_job', { thread_id: 't1', tool_call_id: 'c3', tool_name: 'build', job_id: 'j1' },
    { result: { mode: 'background', job_id: 'j1', status: 'running' } });
  await expectCall(c, 'duplicate id', 'start_job', { thread_id: 't2', tool_call_id: 'c4', tool_name: 'build', job_id: 'j1' },
    { error: { kind: 'duplicate_job_id', message: 'Duplicate job-id' }, effects: [] });
  await expectCall(c, 'second job for tool call', 'start_job', { thread_id: 't1', tool_call_id: 'c3', tool_name: 'build', job_id: 'j9' },
    { error: { kind: 'job_exists_for_tool_call', message: 'Background job already exists for tool_call_id' } });

  // Thread scope.
  await expectCall(c, 'cross-thread inspect', 'inspect_job', { thread_id: 't2', job_id: 'j1' },
    { error: { kind: 'not_found_in_thread', message: 'Job not found in this thread: j1' }, effects: [] });
  await expectCall(c, 'cross-thread cancel', 'cancel_job', { thread_id: 't2', job_id: 'j1', requested_by: 'user' },
    { error: { kind: 'not_found_in_thread' }, effects: [] });
  await expectCall(c, 'unknown job', 'observe_progress', { job_id: 'nope', note: 'x' },
    { error: { kind: 'job_not_found', message: 'Job not found' } });
  await expectCall(c, 'inspect', 'inspect_job', { thread_id: 't1', job_id: genId }, {
    result: { job: { job_id: genId, thread_id: 't1', tool_call_id: 'c2', tool_name: 'build', status: 'running', started_at: 3,
      completed_at: null, cancel_requested_at: null, terminal_payload: null, terminal_payload_file: null,
      terminal_message_emitted: false, terminal_message_emitted_at: null } },
  });

  // Cancel is best effort.
  await c.request({ type: 'clock', now_ms: 4 });
  await expectCall(c, 'cancel', 'cancel_job', { thread_id: 't1', job_id: 'j1', requested_by: 'agent' },
    { result: { job_id: 'j1', status: 'pending_cancel' }, effects: [{ effect: 'cancellation_requested', job_id: 'j1', requested_by: 'agent' }] });
  await expectCall(c, 'cancel again', 'cancel_job', { thread_id: 't1', job_id: 'j1', requested_by: 'user' },
    { result: { job_id: 'j1', status: 'pending_cancel' }, effects: [] });
  await expectCall(c, 'default list', 'list_jobs', { thread_id: 't1' }, {
    result: { jobs: [
      { job_id: genId, tool_call_id: 'c2', tool_name: 'build', status: 'running' },
      { job_id: 'j1', tool_call_id: 'c3', tool_name: 'build', status: 'pending_cancel' },
    ] },
  });

  // Spill at max_bytes + 1 on an idle thread: the file, then the turn request.
  await c.request({ type: 'clock', now_ms: 6 });
  const big = 'é' + 'x'.repeat(25600 - 1); // 25601 UTF-8 bytes, 25600 characters
  const spilled = await expectCall(c, 'spill', 'observe_outcome', { job_id: 'j1', outcome: 'completed', payload: big }, {
    result: { job_id: 'j1', status: 'completed' },
    effects: [{ effect: 'payload_spilled', job_id: 'j1' }, { effect: 'turn_requested', thread_id: 't1', reason: 'background-job-terminal' }],
  });
  const file = spilled.effects[0].path;
  assert.ok(file.endsWith(`${path.sep}job-j1-terminal.json`), `spill file name: ${file}`);
  assert.strictEqual(fs.readFileSync(file, 'utf8'), big, 'the spill file holds the payload');
  await expectCall(c, 'inspect spilled', 'inspect_job', { thread_id: 't1', job_id: 'j1' },
    { result: { job: { status: 'completed', completed_at: 6, cancel_requested_at: 4, terminal_payload: null, terminal_payload_file: file } } });
  await expectCall(c, 'at the limit', 'observe_outcome', { job_id: genId, outcome: 'failed', payload: 'x'.repeat(25600) },
    { result: { job_id: genId, status: 'failed' }, effects: [{ effect: 'turn_requested', thread_id: 't1' }] });
  const injected = await expectCall(c, 'boundary', 'turn_boundary', { thread_id: 't1' }, {
    result: { injected: ['j1', genId] },
    effects: [{ effect: 'message_injected', thread_id: 't1', job_id: 'j1', role: 'assistant' },
      { effect: 'message_injected', thread_id: 't1', job_id: genId, role: 'assistant' }],
  });
  assert.ok(injected.effects[0].text.includes(`Terminal payload exceeded output limits. See temp file: ${file}`), 'spill message');
  assert.ok(injected.effects[1].text.includes('x'.repeat(25600)), 'inline payload in the message');
  await expectCall(c, 'no second injection', 'turn_boundary', { thread_id: 't1' }, { result: { injected: [] }, effects: [] });
  await expectCall(c, 'repeated outcome', 'observe_outcome', { job_id: 'j1', outcome: 'failed', payload: 'again' },
    { result: { job_id: 'j1', status: 'completed' }, effects: [] });

  // Injection order with equal completion times: the marking order.
  await expectCall(c, 'busy', 'begin_turn', { thread_id: 't2' }, { result: {}, effects: [] });
  for (const id of ['ta', 'tb', 'tc']) {
    await expectCall(c, `start ${id}`, 'start_job', { thread_id: 't2', tool_call_id: `call-${id}`, tool_name: 'search', job_id: id },
      { result: { job_id: id } });
  }
  await c.request({ type: 'clock', now_ms: 10 });
  await expectCall(c, 'tb done', 'observe_outcome', { job_id: 'tb', outcome: 'completed', payload: 'b' }, { effects: [] });
  await expectCall(c, 'tc done', 'observe_outcome', { job_id: 'tc', outcome: 'timed_out', payload: 'c' }, { effects: [] });
  await expectCall(c, 'ta done', 'observe_outcome', { job_id: 'ta', outcome: 'failed', payload: 'a' }, { effects: [] });
  await expectCall(c, 'tie order', 'turn_boundary', { thread_id: 't2' }, { result: { injected: ['tb', 'tc', 'ta'] } });
  await expectCall(c, 'start order list', 'list_jobs', { thread_id: 't2', statuses: ALL },
    { result: { jobs: [{ job_id: 'ta' }, { job_id: 'tb' }, { job_id: 'tc' }] } });

  // Retention at limit + 1 (limit 3): the oldest completion is forgotten, with its tool call.
  await c.request({ type: 'clock', now_ms: 11 });
  await expectCall(c, 'start td', 'start_job', { thread_id: 't2', tool_call_id: 'call-td', tool_name: 'search', job_id: 'td' }, { result: { job_id: 'td' } });
  await expectCall(c, 'td done', 'observe_outcome', { job_id: 'td', outcome: 'cancelled', payload: 'd' },
    { result: { job_id: 'td', status: 'cancelled' }, effects: [{ effect: 'turn_requested', thread_id: 't2' }] });
  await expectCall(c, 'evicted', 'inspect_job', { thread_id: 't2', job_id: 'tb' },
    { error: { kind: 'not_found_in_thread', message: 'Job not found in this thread: tb' } });
  await expectCall(c, 'kept', 'list_jobs', { thread_id: 't2', statuses: ALL },
    { result: { jobs: [{ job_id: 'ta' }, { job_id: 'tc' }, { job_id: 'td' }] } });
  await expectCall(c, 'evicted tool call is free', 'complete_sync', { thread_id: 't2', tool_call_id: 'call-tb', tool_name: 'search', result: 'r' },
    { result: { mode: 'synchronous', result: 'r' } });
  await expectCall(c, 'evicted id is free', 'start_job', { thread_id: 't2', tool_call_id: 'call-tb2', tool_name: 'search', job_id: 'tb' },
    { result: { job_id: 'tb', status: 'running' } });

  // Retry, unknown operation, unknown message type.
  await expectCall(c, 'retry', 'retry_job', { thread_id: 't2', job_id: 'ta' },
    { error: { kind: 'retry_not_supported', message: 'Manual retry is not supported for background jobs' }, effects: [] });
  await expectCall(c, 'unknown operation', 'frobnicate', {}, { error: { kind: 'unknown_operation' } });
  matches(await c.request({ type: 'dance' }), { error: { kind: 'protocol' } }, 'unknown type');
  checks += 1;

  // Restart forgets everything.
  await expectCall(c, 'restart', 'restart', {}, { result: {}, effects: [] });
  await expectCall(c, 'forgotten', 'inspect_job', { thread_id: 't2', job_id: 'ta' }, { error: { kind: 'not_found_in_thread' } });
  await expectCall(c, 'empty', 'list_jobs', { thread_id: 't1', statuses: ALL }, { result: { jobs: [] } });
  await expectCall(c, 'tool call reusable', 'start_job', { thread_id: 't1', tool_call_id: 'c1', tool_name: 'build', job_id: 'j1' },
    { result: { job_id: 'j1' } });

  matches(await c.request({ type: 'bye' }), { ok: true }, 'bye');
  c.child.stdin.end();
  assert.strictEqual(await c.exited, 0, 'exit status after bye');
  assert.ok(!fs.existsSync(file), 'spill files are removed on exit');
  checks += 1;
}

async function profileSession() {
  const c = new Client(['--profile', 'runtime-code']);
  const hello = await c.request({ type: 'hello', protocol: 1, spec: { id: 'thread-jobs', version: '2.0.0' } });
  matches(hello, { specs: [{ id: 'thread-jobs', profile: 'runtime-code', parameters: {} }] }, 'profile hello');
  await c.request({ type: 'reset', now_ms: 100 });
  await expectCall(c, 'start', 'start_job', { thread_id: 't1', tool_call_id: 'c1', tool_name: 'build', job_id: 'j1' }, { result: { job_id: 'j1' } });
  await expectCall(c, 'profile message', 'inspect_job', { thread_id: 't2', job_id: 'j1' },
    { error: { kind: 'not_found_in_thread', message: 'Job not found in this thread' } });
  await expectCall(c, 'profile inline', 'observe_outcome', { job_id: 'j1', outcome: 'completed', payload: 'y'.repeat(51200) },
    { effects: [{ effect: 'turn_requested' }] });
  await expectCall(c, 'start 2', 'start_job', { thread_id: 't1', tool_call_id: 'c2', tool_name: 'build', job_id: 'j2' }, { result: { job_id: 'j2' } });
  const lines = Array.from({ length: 1001 }, () => 'l').join('\n'); // 1001 lines
  const r = await expectCall(c, 'profile spill by lines', 'observe_outcome', { job_id: 'j2', outcome: 'completed', payload: lines },
    { effects: [{ effect: 'payload_spilled', job_id: 'j2' }, { effect: 'turn_requested' }] });
  assert.ok(r.effects[0].path.endsWith(`${path.sep}build-j2.log`), `profile spill name: ${r.effects[0].path}`);
  c.child.stdin.end(); // stdin closes without bye: exit 0
  assert.strictEqual(await c.exited, 0, 'exit status on stdin close');
  checks += 1;
}

(async () => {
  try {
    await mainSession();
    await profileSession();
  } catch (err) {
    process.stderr.write(`selftest FAILED after ${checks} checks:\n${err instanceof assert.AssertionError ? err.message : (err.stack || err)}\n`);
    process.exit(1);
  }
  process.stdout.write(`selftest ok: ${checks} checks passed\n`);
  process.exit(0);
})();
