#!/usr/bin/env node
'use strict';
// Adapter between the conformance kit and ThreadJobRuntime: the kit's
// JSON-lines protocol (docs/adapter-protocol.md) on stdin/stdout.
//
//   node adapter.js [--retention-limit N] [--max-bytes N] [--max-lines N]
//                   [--profile allium-spec|runtime-code] [--keep-spill-files]
//                   [--record-trace FILE]
//
// --record-trace writes every operation the runtime answers, every clock move
// and every reset as a trace (docs/traces.md) that `conformance check-trace`
// checks later, without running anything.
//
// stdout carries responses only, one JSON object per line; logs go to stderr.
// Requests are answered one at a time, in order (capabilities.concurrent is
// false: the runtime is single-threaded).

const fs = require('fs');
const readline = require('readline');
const { ThreadJobRuntime, JobError } = require('./runtime');

const IMPLEMENTATION = { name: 'node-thread-jobs', version: '0.1.0' };
const SPEC = { id: 'thread-jobs', version: '2.0.0' };
const PROTOCOL = 1;

// Spec parameters (spec/thread-jobs.yaml) and where they go in the runtime.
const PARAMETERS = {
  retention_limit: { type: 'integer', default: 20, minimum: 1, maximum: 100000, option: 'retentionLimit' },
  max_lines: { type: 'integer', default: 1000, minimum: 1, maximum: 1000000, option: 'maxLines' },
  max_bytes: { type: 'integer', default: 25600, minimum: 1, maximum: 100000000, option: 'maxBytes' },
  spill_file_name: { type: 'string', default: 'job-{job_id}-terminal.json', option: 'spillFileName' },
  spill_message: { type: 'string', default: 'Terminal payload exceeded output limits. See temp file: {path}', option: 'spillMessage' },
  msg_tool_call_resolved: { type: 'string', default: 'Tool invocation already resolved', message: 'toolCallResolved' },
  msg_job_exists_for_tool_call: { type: 'string', default: 'Background job already exists for tool_call_id', message: 'jobExistsForToolCall' },
  msg_duplicate_job_id: { type: 'string', default: 'Duplicate job-id', message: 'duplicateJobId' },
  msg_job_not_found: { type: 'string', default: 'Job not found', message: 'jobNotFound' },
  msg_not_found_in_thread: { type: 'string', default: 'Job not found in this thread: {job_id}', message: 'notFoundInThread' },
  msg_retry_not_supported: { type: 'string', default: 'Manual retry is not supported for background jobs', message: 'retryNotSupported' },
};

const PROFILES = {
  'allium-spec': {},
  'runtime-code': {
    max_bytes: 51200,
    spill_file_name: '{tool_name}-{job_id}.log',
    msg_not_found_in_thread: 'Job not found in this thread',
  },
};

const FLAGS = {
  '--retention-limit': 'retention_limit',
  '--max-bytes': 'max_bytes',
  '--max-lines': 'max_lines',
};

function log(...parts) {
  process.stderr.write(`[node-thread-jobs] ${parts.join(' ')}\n`);
}

function usage(problem) {
  process.stderr.write(`adapter.js: ${problem}\n` +
    'usage: node adapter.js [--retention-limit N] [--max-bytes N] [--max-lines N] ' +
    '[--profile allium-spec|runtime-code] [--keep-spill-files]\n');
  process.exit(2);
}

function parseInteger(name, text) {
  const spec = PARAMETERS[name];
  if (!/^[0-9]+$/.test(String(text))) usage(`${name} must be an integer, got ${JSON.stringify(text)}`);
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < spec.minimum || value > spec.maximum) {
    usage(`${name} must be within ${spec.minimum}..${spec.maximum}, got ${text}`);
  }
  return value;
}

function parseArgs(argv) {
  const explicit = {};
  let profile = null;
  let keepSpillFiles = false;
  let recordTrace = null;
  for (let i = 0; i < argv.length; i += 1) {
    let arg = argv[i];
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq !== -1) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const takeValue = () => {
      if (value !== undefined) return value;
      i += 1;
      if (i >= argv.length) usage(`${arg} needs a value`);
      return argv[i];
    };
    if (arg in FLAGS) {
      explicit[FLAGS[arg]] = parseInteger(FLAGS[arg], takeValue());
    } else if (arg === '--profile') {
      profile = takeValue();
      if (!(profile in PROFILES)) usage(`unknown profile ${JSON.stringify(profile)} (known: ${Object.keys(PROFILES).join(', ')})`);
    } else if (arg === '--keep-spill-files') {
      keepSpillFiles = true;
    } else if (arg === '--record-trace') {
      recordTrace = takeValue();
    } else if (arg === '-h' || arg === '--help') {
      process.stdout.write('usage: node adapter.js [--retention-limit N] [--max-bytes N] [--max-lines N] ' +
        '[--profile allium-spec|runtime-code] [--keep-spill-files] [--record-trace FILE]\n');
      process.exit(0);
    } else {
      usage(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  return { explicit, profile, keepSpillFiles, recordTrace };
}

/** Parameter values in force: defaults, then the profile, then explicit flags. */
function effectiveParameters(profile, explicit) {
  const values = {};
  for (const [name, spec] of Object.entries(PARAMETERS)) values[name] = spec.default;
  Object.assign(values, profile ? PROFILES[profile] : {}, explicit);
  return values;
}

function runtimeOptions(values) {
  const options = { messages: {} };
  for (const [name, spec] of Object.entries(PARAMETERS)) {
    if (spec.option) options[spec.option] = values[name];
    if (spec.message) options.messages[spec.message] = values[name];
  }
  return options;
}

// ------------------------------------------------------------------ arguments of calls

class ArgsError extends Error {}

function requireString(args, name) {
  const value = args[name];
  if (typeof value !== 'string') throw new ArgsError(`argument ${name} must be a string`);
  return value;
}

function optionalString(args, name) {
  const value = args[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ArgsError(`argument ${name} must be a string`);
  return value;
}

function optionalStatuses(args) {
  const value = args.statuses;
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((s) => typeof s !== 'string')) {
    throw new ArgsError('argument statuses must be a list of strings');
  }
  return value;
}

// Operation name -> (runtime, args) => result.
const OPERATIONS = {
  complete_sync: (rt, a) => rt.completeSync({
    threadId: requireString(a, 'thread_id'),
    toolCallId: requireString(a, 'tool_call_id'),
    toolName: requireString(a, 'tool_name'),
    result: requireString(a, 'result'),
  }),
  start_job: (rt, a) => rt.startJob({
    threadId: requireString(a, 'thread_id'),
    toolCallId: requireString(a, 'tool_call_id'),
    toolName: requireString(a, 'tool_name'),
    jobId: optionalString(a, 'job_id'),
  }),
  observe_outcome: (rt, a) => rt.observeOutcome({
    jobId: requireString(a, 'job_id'),
    outcome: requireString(a, 'outcome'),
    payload: requireString(a, 'payload'),
  }),
  observe_progress: (rt, a) => rt.observeProgress({ jobId: requireString(a, 'job_id'), note: a.note }),
  observe_llm_error: (rt, a) => rt.observeLlmError({ jobId: requireString(a, 'job_id') }),
  begin_turn: (rt, a) => rt.beginTurn({ threadId: requireString(a, 'thread_id') }),
  turn_boundary: (rt, a) => rt.turnBoundary({ threadId: requireString(a, 'thread_id') }),
  list_jobs: (rt, a) => rt.listJobs({ threadId: requireString(a, 'thread_id'), statuses: optionalStatuses(a) }),
  inspect_job: (rt, a) => rt.inspectJob({ threadId: requireString(a, 'thread_id'), jobId: requireString(a, 'job_id') }),
  cancel_job: (rt, a) => {
    const requestedBy = requireString(a, 'requested_by');
    if (requestedBy !== 'user' && requestedBy !== 'agent') throw new ArgsError('requested_by must be user or agent');
    return rt.cancelJob({ threadId: requireString(a, 'thread_id'), jobId: requireString(a, 'job_id'), requestedBy });
  },
  retry_job: (rt, a) => rt.retryJob({ threadId: a.thread_id, jobId: a.job_id }),
  restart: (rt) => {
    rt.restart();
    return {};
  },
};

// ------------------------------------------------------------------ recording a trace

/** Writes what the runtime did as trace lines (docs/traces.md, format 1). */
class TraceRecorder {
  constructor(path, header) {
    this.fd = fs.openSync(path, 'w');
    this.write({ trace: 1, ...header });
  }

  write(line) {
    fs.writeSync(this.fd, `${JSON.stringify(line)}\n`);
  }

  reset() {
    this.write({ reset: true });
  }

  clock(nowMs) {
    this.write({ clock_ms: nowMs, effects: [] });
  }

  call(operation, args, response, nowMs) {
    const line = { call: operation, args: args || {} };
    if ('error' in response) line.error = response.error;
    else line.result = response.result;
    line.effects = response.effects || [];
    line.at_ms = nowMs;
    // The content of spilled payload files, read while they exist, so the
    // spec's file checks work offline.
    const files = {};
    for (const effect of line.effects) {
      if (effect.effect !== 'payload_spilled' || typeof effect.path !== 'string') continue;
      try {
        if (fs.statSync(effect.path).size <= 1024 * 1024) files[effect.path] = fs.readFileSync(effect.path, 'utf8');
      } catch (err) {
        log(`trace: cannot read ${effect.path}: ${err.message}`);
      }
    }
    if (Object.keys(files).length) line.files = files;
    this.write(line);
  }

  close() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

// ------------------------------------------------------------------ the session

class Session {
  constructor({ explicit, profile, keepSpillFiles, recordTrace }) {
    this.explicit = explicit;
    this.profile = profile;
    this.keepSpillFiles = keepSpillFiles;
    this.trace = recordTrace ? new TraceRecorder(recordTrace, {
      spec: SPEC, profile, parameters: { ...explicit }, implementation: IMPLEMENTATION, clock: 'virtual',
      source: 'examples/node-thread-jobs/adapter.js --record-trace',
    }) : null;
    this.nowMs = 0;
    this.effects = null; // effects of the request being answered
    this.runtime = new ThreadJobRuntime({
      clock: () => this.nowMs,
      toolRuntime: {
        cancel: (jobId, requestedBy) => this.emit({ effect: 'cancellation_requested', job_id: jobId, requested_by: requestedBy }),
      },
      scheduler: {
        requestTurn: (threadId, reason) => this.emit({ effect: 'turn_requested', thread_id: threadId, reason }),
      },
      conversation: {
        append: (threadId, message) => this.emit({
          effect: 'message_injected', thread_id: threadId, job_id: message.jobId, role: message.role, text: message.text,
        }),
      },
      onPayloadSpilled: (jobId, path) => this.emit({ effect: 'payload_spilled', job_id: jobId, path }),
    }, runtimeOptions(effectiveParameters(profile, explicit)));
  }

  emit(effect) {
    if (this.effects) this.effects.push(effect);
    else log('effect outside of a request, dropped:', JSON.stringify(effect));
  }

  /** Answer one request; returns the response object. */
  handle(request) {
    const { id, type } = request;
    switch (type) {
      case 'hello':
        return this.hello(request);
      case 'reset':
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'reset needs an integer now_ms');
        this.runtime.restart();
        this.nowMs = request.now_ms;
        if (this.trace) this.trace.reset();
        return { id, ok: true };
      case 'clock':
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'clock needs an integer now_ms');
        if (request.now_ms < this.nowMs) log(`clock moved back from ${this.nowMs} to ${request.now_ms}`);
        this.nowMs = request.now_ms;
        if (this.trace) this.trace.clock(this.nowMs);
        return { id, ok: true, effects: [] }; // nothing here happens because time passes
      case 'call': {
        const response = this.call(request);
        if (this.trace) this.trace.call(request.operation, request.args, response, this.nowMs);
        return response;
      }
      case 'bye':
        return { id, ok: true };
      default:
        return protocolError(id, `unknown message type ${JSON.stringify(type)}`);
    }
  }

  hello(request) {
    if (request.protocol !== PROTOCOL) log(`the kit speaks protocol ${JSON.stringify(request.protocol)}; this adapter speaks ${PROTOCOL}`);
    if (request.spec && request.spec.id !== SPEC.id) log(`the kit asks for spec ${JSON.stringify(request.spec.id)}; this adapter implements ${SPEC.id}`);
    return {
      id: request.id,
      protocol: PROTOCOL,
      implementation: IMPLEMENTATION,
      specs: [{ id: SPEC.id, version: SPEC.version, profile: this.profile, parameters: { ...this.explicit } }],
      capabilities: { concurrent: false },
    };
  }

  call({ id, operation, args }) {
    const op = Object.prototype.hasOwnProperty.call(OPERATIONS, operation) ? OPERATIONS[operation] : null;
    if (!op) {
      return { id, error: { kind: 'unknown_operation', message: `Unknown operation: ${operation}` }, effects: [] };
    }
    this.effects = [];
    try {
      const result = op(this.runtime, args && typeof args === 'object' ? args : {});
      return { id, result, effects: this.effects };
    } catch (err) {
      if (err instanceof JobError) return { id, error: { kind: err.kind, message: err.message }, effects: this.effects };
      if (err instanceof ArgsError) return { id, error: { kind: 'invalid_args', message: err.message }, effects: this.effects };
      log(`internal error in ${operation}:`, err && err.stack ? err.stack : String(err));
      return { id, error: { kind: 'internal', message: String(err && err.message ? err.message : err) }, effects: this.effects };
    } finally {
      this.effects = null;
    }
  }

  close() {
    if (this.trace) this.trace.close();
    if (!this.keepSpillFiles) this.runtime.dispose();
  }
}

function protocolError(id, message) {
  return { id: id === undefined ? null : id, error: { kind: 'protocol', message } };
}

function main() {
  const session = new Session(parseArgs(process.argv.slice(2)));
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  let closed = false;

  const write = (response) => {
    process.stdout.write(`${JSON.stringify(response)}\n`);
  };

  const finish = () => {
    if (closed) return;
    closed = true;
    session.close();
    input.close();
    process.stdin.destroy();
    process.exitCode = 0; // exit once stdout has drained
  };

  input.on('line', (line) => {
    if (closed || line.trim() === '') return;
    let request;
    try {
      request = JSON.parse(line);
    } catch (err) {
      log(`not JSON, ignored: ${line.slice(0, 200)}`);
      return;
    }
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      write(protocolError(undefined, 'a request must be a JSON object'));
      return;
    }
    write(session.handle(request));
    if (request.type === 'bye') finish();
  });
  input.on('close', finish);
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
      log(`${signal}: exiting`);
      session.close();
      process.exit(0);
    });
  }
  process.stdout.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

if (require.main === module) main();

module.exports = { Session, parseArgs, effectiveParameters, PARAMETERS, PROFILES };
