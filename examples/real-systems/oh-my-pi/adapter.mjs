#!/usr/bin/env node
// The kit's stdio adapter (docs/adapter-protocol.md) around the job manager
// of @oh-my-pi/pi-coding-agent and its agent-facing control (the `job` tool
// up to 17.x; the `wait` tool and job control's executeCancel from 18.x),
// run unchanged: `node build.mjs` bundles them from the unpacked package
// into dist/, and this adapter drives that bundle on a virtual clock
// (clock.mjs).
//
//   node adapter.mjs [--bundle-dir DIR] [--profile oh-my-pi|oh-my-pi-18|none]
//                    [--max-running N] [--retention-ms N] [--jitter-ms N]
//
// What the adapter plays (the kit's side of the world):
// - a job's body: it returns after duration_ms (or when finish_job says), or
//   stop_ms after its abort signal fired; a failed body throws Error(text);
// - the follow-up channel (the session's onJobComplete): it accepts, or
//   refuses by throwing, as set_delivery says;
// - the session's settings: wait_ms of a job_tool call is the setting
//   async.pollWaitDuration for that call ("5s" ... "5m").
// Effects: delivered (the channel took a follow-up; its status is the
// record the manager passed along, null when it passed none),
// delivery_failed (the manager's own log line for a refused attempt, with
// its attempt number), abort_signalled (a body heard its abort signal).
//
// stdout carries responses only; logs go to stderr. Requests are answered
// one at a time in the order they arrive; a call never waits for a later
// request, so the adapter declares `concurrent: true` (docs/adapter-protocol.md).

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { VirtualClock, BODY, installVirtualRuntime } from './clock.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PROTOCOL = 1;
const SPEC = { id: 'async-jobs', version: '2.1.0' };
const WAIT_SETTING = { 5000: '5s', 10000: '10s', 30000: '30s', 60000: '1m', 300000: '5m' };
const DELIVERY_FAILED_LOG = 'Async job completion delivery failed';
const LIMIT_REACHED = /^Background job limit reached \(/;
const PROFILES = ['oh-my-pi', 'oh-my-pi-18', 'none'];

function log(...parts) {
  process.stderr.write(`[oh-my-pi-adapter] ${parts.join(' ')}\n`);
}

function usage(problem) {
  process.stderr.write(
    `adapter.mjs: ${problem}\nusage: node adapter.mjs [--bundle-dir DIR] [--profile oh-my-pi|oh-my-pi-18|none] ` +
      '[--max-running N] [--retention-ms N] [--jitter-ms N]\n',
  );
  process.exit(2);
}

function parseInteger(flag, text, minimum, maximum) {
  if (!/^[0-9]+$/.test(String(text))) usage(`${flag} needs a whole number, got ${JSON.stringify(text)}`);
  const value = Number(text);
  if (value < minimum || value > maximum) usage(`${flag} must be within ${minimum}..${maximum}, got ${value}`);
  return value;
}

function parseArgs(argv) {
  // profile null: the bundle's (oh-my-pi-18 for a build with the wait tool, else oh-my-pi)
  const options = { bundleDir: path.join(HERE, 'dist'), profile: null, parameters: {} };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${flag} needs a value`);
      return argv[++i];
    };
    if (flag === '--bundle-dir') options.bundleDir = path.resolve(value());
    else if (flag === '--profile') options.profile = value();
    else if (flag === '--max-running') options.parameters.max_running = parseInteger(flag, value(), 1, 100);
    else if (flag === '--retention-ms') options.parameters.retention_ms = parseInteger(flag, value(), 0, 86400000);
    else if (flag === '--jitter-ms') options.parameters.retry_jitter_ms = parseInteger(flag, value(), 0, 199);
    else if (flag === '--declare') declare(options.parameters, value());
    else usage(`unknown argument ${JSON.stringify(flag)}`);
  }
  if (options.profile !== null && !PROFILES.includes(options.profile)) {
    usage(`unknown profile ${JSON.stringify(options.profile)}`);
  }
  return options;
}

// --declare NAME=VALUE: a parameter this build is declared to have without
// configuring anything (a later upstream version whose behaviour differs, e.g.
// ids=counter for 18.x, which never reuses ids). VALUE is JSON, or a string.
function declare(parameters, text) {
  const at = text.indexOf('=');
  if (at <= 0) usage(`--declare needs NAME=VALUE, got ${JSON.stringify(text)}`);
  const raw = text.slice(at + 1);
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = raw;
  }
  parameters[text.slice(0, at)] = parsed;
}

class BadArguments extends Error {}

function text(args, name, optional = false) {
  const value = args[name];
  if (value === undefined && optional) return undefined;
  if (typeof value !== 'string') throw new BadArguments(`${name} must be a string`);
  return value;
}

function millis(args, name) {
  const value = args[name];
  if (value === undefined) return null;
  if (!Number.isSafeInteger(value) || value < 1) throw new BadArguments(`${name} must be a positive whole number`);
  return value;
}

function choice(args, name, choices, fallback) {
  const value = args[name] === undefined ? fallback : args[name];
  if (!choices.includes(value)) throw new BadArguments(`${name} must be one of ${choices.join(', ')}`);
  return value;
}

function ids(args, name) {
  const value = args[name];
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new BadArguments(`${name} must be a list of job ids`);
  }
  return value;
}

/** A job's body as the kit plays it: returns as planned, or stop_ms after its abort. */
class PlayedBody {
  constructor(session, plan, order) {
    this.session = session;
    this.plan = plan;
    this.order = order;
    this.returned = false;
    this.settle = null;
  }

  run({ jobId, signal }) {
    return new Promise((resolve, reject) => {
      this.settle = (outcome, bodyText) => {
        if (this.returned) return false;
        this.returned = true;
        if (outcome === 'failed') reject(new Error(bodyText));
        else resolve(bodyText);
        return true;
      };
      const { clock } = this.session;
      const { plan } = this;
      if (plan.duration_ms !== null) {
        clock.schedule(plan.duration_ms, BODY, () => this.settle(plan.outcome, plan.text), this.order);
      }
      signal.addEventListener(
        'abort',
        () => {
          this.session.emit({ effect: 'abort_signalled', job_id: jobId });
          if (plan.stop_ms !== null) {
            clock.schedule(plan.stop_ms, BODY, () => this.settle(plan.outcome, plan.text), this.order);
          }
        },
        { once: true },
      );
    });
  }
}

/** A manager record, or one of the tool's own snapshots (same field names), as the spec shows it. */
function snapshot(job) {
  return {
    job_id: job.id,
    type: job.type,
    label: job.label,
    status: job.status,
    result_text: job.resultText ?? null,
    error_text: job.errorText ?? null,
  };
}

class Session {
  constructor(clock, upstream, info, options) {
    this.upstream = upstream;
    this.info = info;
    this.options = options;
    this.clock = clock;
    this.effects = null;
    this.settings = {};
    upstream.logger.sink = (level, message, fields) => this.onLog(level, message, fields);
    this.reset(0);
  }

  emit(effect) {
    if (this.effects) this.effects.push(effect);
    else log('effect outside of a request, dropped:', JSON.stringify(effect));
  }

  onLog(level, message, fields) {
    if (level === 'warn' && message === DELIVERY_FAILED_LOG) {
      this.emit({ effect: 'delivery_failed', job_id: fields.jobId, attempt: fields.attempt });
      return;
    }
    log(`upstream ${level}: ${message} ${JSON.stringify(fields ?? {})}`);
  }

  reset(nowMs) {
    this.clock.reset(nowMs);
    this.accepting = true;
    this.bodies = new Map(); // job record -> its played body
    this.starts = 0;
    const { AsyncJobManager, JobTool, WaitTool } = this.upstream;
    const options = {
      onJobComplete: async (jobId, resultText, job) => {
        if (!this.accepting) throw new Error('the follow-up channel refuses deliveries');
        this.emit({ effect: 'delivered', job_id: jobId, status: job ? job.status : null, text: resultText });
      },
    };
    if (this.options.parameters.max_running !== undefined) options.maxRunningJobs = this.options.parameters.max_running;
    if (this.options.parameters.retention_ms !== undefined) options.retentionMs = this.options.parameters.retention_ms;
    this.manager = new AsyncJobManager(options);
    AsyncJobManager.setInstance(this.manager);
    this.settings = {};
    const settings = this.settings;
    // Later versions have no job tool (18.x: src/tools/job.ts is gone); the
    // manager's own operations still run.
    this.tool = JobTool
      ? new JobTool({ settings: { get: (key) => settings[key] }, getAgentId: () => undefined })
      : null;
    // 18.x: the tool session the wait tool and job control read (no agent
    // registry, so no peer messaging; the jobs are the unowned ones).
    this.toolSession = {
      asyncJobManager: this.manager,
      settings: { get: (key) => settings[key] },
      getAgentId: () => undefined,
    };
    this.waitTool = WaitTool ? new WaitTool(this.toolSession) : null;
  }

  hello(request) {
    if (request.protocol !== PROTOCOL) log(`the kit speaks protocol ${JSON.stringify(request.protocol)}`);
    const profile = this.options.profile === 'none' ? null : this.options.profile ?? defaultProfile(this.upstream);
    return {
      id: request.id,
      protocol: PROTOCOL,
      implementation: { name: 'oh-my-pi job manager (unchanged)', version: this.info.version },
      specs: [{ id: SPEC.id, version: SPEC.version, profile, parameters: { ...this.options.parameters } }],
      capabilities: { concurrent: true },
    };
  }

  async handle(request) {
    const { id, type } = request;
    switch (type) {
      case 'hello':
        return this.hello(request);
      case 'reset':
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'reset needs an integer now_ms');
        this.reset(request.now_ms);
        return { id, ok: true };
      case 'clock': {
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'clock needs an integer now_ms');
        this.effects = [];
        try {
          await this.clock.advanceTo(request.now_ms);
          return { id, ok: true, effects: this.effects };
        } finally {
          this.effects = null;
        }
      }
      case 'call':
        return this.call(request);
      case 'bye':
        return { id, ok: true };
      default:
        return protocolError(id, `unknown message type ${JSON.stringify(type)}`);
    }
  }

  async call({ id, operation, args }) {
    const handler = OPERATIONS[operation];
    if (!Object.hasOwn(OPERATIONS, operation)) {
      return { id, error: { kind: 'unknown_operation', message: `Unknown operation: ${operation}` }, effects: [] };
    }
    this.effects = [];
    try {
      const result = await handler(this, args && typeof args === 'object' ? args : {});
      await this.clock.advanceTo(this.clock.now()); // what the call left for now
      return { id, result, effects: this.effects };
    } catch (err) {
      await this.clock.advanceTo(this.clock.now());
      return { id, error: errorOf(err), effects: this.effects };
    } finally {
      this.effects = null;
    }
  }

  known(jobId) {
    const job = this.manager.getJob(jobId);
    if (!job) throw new KnownError('not_found', `Job not found: ${jobId}`);
    return job;
  }
}

class KnownError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function errorOf(err) {
  if (err instanceof KnownError) return { kind: err.kind, message: err.message };
  if (err instanceof BadArguments) return { kind: 'invalid_arguments', message: err.message };
  if (err && err.name === 'ToolError') return { kind: 'invalid_arguments', message: err.message };
  if (err instanceof Error && LIMIT_REACHED.test(err.message)) return { kind: 'limit_reached', message: err.message };
  log('unexpected error:', err && err.stack ? err.stack : String(err));
  return { kind: 'internal', message: String(err && err.message ? err.message : err) };
}

function protocolError(id, message) {
  return { id: id === undefined ? null : id, error: { kind: 'protocol', message } };
}

const OPERATIONS = {
  async start_job(s, a) {
    const label = text(a, 'label');
    const type = choice(a, 'type', ['bash', 'task'], 'bash');
    const preferred = text(a, 'id', true);
    const plan = {
      duration_ms: millis(a, 'duration_ms'),
      outcome: choice(a, 'outcome', ['completed', 'failed'], 'completed'),
      text: text(a, 'text', true) ?? '',
      stop_ms: millis(a, 'stop_ms'),
    };
    const body = new PlayedBody(s, plan, s.starts + 1);
    const jobId = s.manager.register(type, label, (ctx) => body.run(ctx), preferred === undefined ? {} : { id: preferred });
    s.starts += 1;
    s.bodies.set(s.manager.getJob(jobId), body);
    return { job_id: jobId, status: s.manager.getJob(jobId)?.status ?? 'running' };
  },

  async finish_job(s, a) {
    const jobId = text(a, 'job_id');
    const outcome = choice(a, 'outcome', ['completed', 'failed']);
    const bodyText = text(a, 'text');
    const job = s.known(jobId);
    const returned = s.bodies.get(job).settle(outcome, bodyText);
    await s.clock.advanceTo(s.clock.now()); // the manager reacts to the body's return
    return { job_id: jobId, status: job.status, returned };
  },

  async get_job(s, a) {
    const job = s.manager.getJob(text(a, 'job_id'));
    return { job: job ? snapshot(job) : null };
  },

  async list_jobs(s) {
    const jobs = s.manager.getAllJobs().map(snapshot);
    jobs.sort((x, y) => (x.job_id < y.job_id ? -1 : x.job_id > y.job_id ? 1 : 0));
    return { jobs };
  },

  async job_tool(s, a) {
    if (!s.tool) {
      throw new KnownError('not_implemented', `@oh-my-pi/pi-coding-agent ${s.info.version} has no src/tools/job.ts`);
    }
    const params = {};
    for (const name of ['poll', 'cancel']) {
      const value = ids(a, name);
      if (value !== undefined) params[name] = value;
    }
    if (a.list !== undefined) {
      if (typeof a.list !== 'boolean') throw new BadArguments('list must be true or false');
      params.list = a.list;
    }
    if (a.wait_ms !== undefined && !Object.hasOwn(WAIT_SETTING, a.wait_ms)) {
      throw new BadArguments(`wait_ms must be one of ${Object.keys(WAIT_SETTING).join(', ')}`);
    }
    s.settings['async.pollWaitDuration'] = a.wait_ms === undefined ? undefined : WAIT_SETTING[a.wait_ms];
    const started = s.clock.now();
    const outcome = await s.clock.runUntilSettled(s.tool.execute('call', params));
    const details = outcome.details ?? { jobs: [] };
    const content = (outcome.content ?? []).find((c) => c.type === 'text')?.text ?? '';
    // The tool answers a wait with nothing to watch by a text alone; a report
    // of jobs or cancels is rendered from its details (and is empty when
    // there is nothing to report).
    const message = details.jobs.length === 0 && !details.cancelled && content !== '' ? content : null;
    return {
      message,
      cancelled: details.cancelled ?? null,
      jobs: details.jobs.map(snapshot),
      waited_ms: s.clock.now() - started,
    };
  },

  // 18.x: the `wait` tool as the agent calls it (no arguments).
  async wait_tool(s, a) {
    if (!s.waitTool) {
      throw new KnownError('not_implemented', `@oh-my-pi/pi-coding-agent ${s.info.version} has no src/tools/wait.ts`);
    }
    if (Object.keys(a).length > 0) throw new BadArguments('wait takes no arguments');
    const started = s.clock.now();
    const outcome = await s.clock.runUntilSettled(s.waitTool.execute('call', {}));
    return { ...reportOf(outcome), waited_ms: s.clock.now() - started };
  },

  // 18.x: job control's executeCancel, what `write proc://<id>/kill` runs, with the ids given.
  async cancel_jobs(s, a) {
    if (!s.upstream.executeCancel) {
      throw new KnownError('not_implemented', `@oh-my-pi/pi-coding-agent ${s.info.version} has no src/async/job-control.ts`);
    }
    const named = ids(a, 'ids');
    if (!named || named.length === 0) throw new BadArguments('ids must name at least one job');
    const outcome = await s.clock.runUntilSettled(s.upstream.executeCancel(s.toolSession, s.manager, undefined, named));
    const details = outcome.details ?? { jobs: [] };
    return { cancelled: details.cancelled ?? [], jobs: details.jobs.map(snapshot) };
  },

  async set_delivery(s, a) {
    if (typeof a.accept !== 'boolean') throw new BadArguments('accept must be true or false');
    s.accepting = a.accept;
    return { accepting: a.accept };
  },
};

/** A wait's answer: its job snapshots, or its text alone when it reports no job. */
function reportOf(outcome) {
  const details = outcome.details ?? { jobs: [] };
  const content = (outcome.content ?? []).find((c) => c.type === 'text')?.text ?? '';
  return { message: details.jobs.length === 0 && content !== '' ? content : null, jobs: details.jobs.map(snapshot) };
}

function defaultProfile(upstream) {
  return upstream.WaitTool ? 'oh-my-pi-18' : 'oh-my-pi';
}

async function loadUpstream(bundleDir) {
  const bundle = path.join(bundleDir, 'upstream.mjs');
  const infoFile = path.join(bundleDir, 'upstream.json');
  if (!fs.existsSync(bundle) || !fs.existsSync(infoFile)) {
    process.stderr.write(
      `adapter.mjs: no bundle in ${bundleDir}: run \`node build.mjs --upstream <unpacked package>\` first (README.md)\n`,
    );
    process.exit(2);
  }
  const info = JSON.parse(fs.readFileSync(infoFile, 'utf8'));
  const upstream = await import(pathToFileURL(bundle).href);
  if (!upstream.JobTool) log(`@oh-my-pi/pi-coding-agent ${info.version} has no job tool: job_tool is not implemented`);
  return { upstream, info };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  // The upstream code reads the clock from its first line on: the virtual
  // runtime goes in before it is loaded.
  const clock = new VirtualClock(0);
  installVirtualRuntime(clock, ((options.parameters.retry_jitter_ms ?? 0) + 0.5) / 200);
  const { upstream, info } = await loadUpstream(options.bundleDir);
  const session = new Session(clock, upstream, info, options);
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  const write = (response) => process.stdout.write(`${JSON.stringify(response)}\n`);
  let queue = Promise.resolve();
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    input.close();
    process.stdin.destroy();
    process.exitCode = 0;
  };
  input.on('line', (line) => {
    if (closed || line.trim() === '') return;
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      log(`not JSON, ignored: ${line.slice(0, 200)}`);
      return;
    }
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      write(protocolError(undefined, 'a request must be a JSON object'));
      return;
    }
    // One request at a time, in arrival order.
    queue = queue.then(async () => {
      try {
        write(await session.handle(request));
      } catch (err) {
        log('failed to answer:', err && err.stack ? err.stack : String(err));
        write({ id: request.id, error: { kind: 'internal', message: String(err && err.message) }, effects: [] });
      }
      if (request.type === 'bye') finish();
    });
  });
  input.on('close', () => {
    queue.then(finish);
  });
  process.stdout.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

main();
