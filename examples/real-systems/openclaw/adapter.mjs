#!/usr/bin/env node
// The kit's stdio adapter (docs/adapter-protocol.md) around OpenClaw's
// process registry, src/agents/bash-process-registry.ts, run unchanged: it
// imports the published module, dist/bash-process-registry-<hash>.mjs, from
// where `npm pack openclaw@latest` was unpacked, on a virtual clock
// (clock.mjs).
//
//   node adapter.mjs --package-dir DIR [--ttl-ms N] [--profile openclaw|none]
//
// DIR is the unpacked package (the folder holding package.json and dist/);
// OPENCLAW_PACKAGE_DIR works too. --ttl-ms sets OPENCLAW_BASH_JOB_TTL_MS
// before the module is loaded (the registry reads it once, at load).
//
// What the adapter plays (the runtime's code around the registry, which
// spawns real processes and cannot run on a virtual clock), each written
// after the published code it stands for:
// - the exec runtime (bash-tools.exec-runtime): the session record it
//   registers with addSession under an id isProcessSessionIdTaken says is
//   free, markBackgrounded when the call is sent to the background or
//   yields, appendOutput for what the process writes, markExited when the
//   process ends, then its exit notice (maybeNotifyOnExit: queued once for a
//   backgrounded session with notifyOnExit, its removal handed to
//   recordNotifyOnExitRemoval);
// - the process tool's poll, kill, remove and list (bash-tools.process):
//   the same registry calls in the same order, prepareSessionPoll in the
//   poll's scope, its acknowledgement (and acknowledgeNotifyOnExit for a
//   poll that reports the end) run when the scope commits;
// - the process supervisor: kill and remove record termination_requested;
//   the process ends when the kit says (end_process).
//
// stdout carries responses only; logs go to stderr. Requests are answered
// one at a time, in order; the adapter declares `concurrent: false`.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { VirtualClock, installVirtualClock } from './clock.mjs';

const PROTOCOL = 1;
const SPEC = { id: 'process-sessions', version: '1.0.0' };
const SCOPES = ['s1', 's2'];
const OUTCOMES = {
  completed: { status: 'completed', exitCode: 0, exitSignal: null, exitReason: 'exit' },
  failed: { status: 'failed', exitCode: 1, exitSignal: null, exitReason: 'exit' },
  killed: { status: 'failed', exitCode: null, exitSignal: 'SIGKILL', exitReason: 'signal' },
  timed_out: { status: 'failed', exitCode: null, exitSignal: 'SIGKILL', exitReason: 'overall-timeout' },
};
// The exec tool's default output limits (bash-tools.exec-runtime).
const MAX_OUTPUT_CHARS = 200000;
const PENDING_MAX_OUTPUT_CHARS = 30000;
// The tool's error texts (bash-tools.process), and the adapter's own for
// what the exec runtime never lets happen.
const TEXT = {
  no_session: (id) => `No session found for ${id}`,
  no_active_session: (id) => `No active session found for ${id}`,
  not_backgrounded: (id) => `Session ${id} is not backgrounded.`,
  id_taken: (id) => `Session id ${id} is taken`,
  not_running: (id) => `Session ${id} has exited`,
};
const REGISTRY_API = 'openclaw.bashProcessRegistryTestApi';

function log(...parts) {
  process.stderr.write(`[openclaw-adapter] ${parts.join(' ')}\n`);
}

function usage(problem) {
  process.stderr.write(
    `adapter.mjs: ${problem}\nusage: node adapter.mjs --package-dir DIR [--ttl-ms N] [--profile openclaw|none]\n` +
      '  DIR: the folder `npm pack openclaw@latest` unpacked (package/), or set OPENCLAW_PACKAGE_DIR\n',
  );
  process.exit(2);
}

function parseArgs(argv) {
  const options = { packageDir: process.env.OPENCLAW_PACKAGE_DIR, profile: 'openclaw', ttlMs: undefined };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${flag} needs a value`);
      return argv[++i];
    };
    if (flag === '--package-dir') options.packageDir = value();
    else if (flag === '--profile') options.profile = value();
    else if (flag === '--ttl-ms') {
      const text = value();
      if (!/^[0-9]{1,9}$/.test(text) || Number(text) < 1) usage(`--ttl-ms needs a whole number of ms >= 1, got ${JSON.stringify(text)}`);
      options.ttlMs = Number(text);
    } else usage(`unknown argument ${JSON.stringify(flag)}`);
  }
  if (!options.packageDir) usage('no package: give --package-dir DIR or set OPENCLAW_PACKAGE_DIR');
  if (!['openclaw', 'none'].includes(options.profile)) usage(`unknown profile ${JSON.stringify(options.profile)}`);
  options.packageDir = path.resolve(options.packageDir);
  return options;
}

const EXPORTS_ADD_SESSION = /\bexport\s*\{[^}]*\baddSession\b|\bexport\s+function\s+addSession\b/;

/** The published registry module: the dist file exporting addSession by name. */
function findRegistry(packageDir) {
  const dist = path.join(packageDir, 'dist');
  const manifest = path.join(packageDir, 'package.json');
  if (!fs.existsSync(manifest) || !fs.existsSync(dist)) {
    usage(`${packageDir} is not an unpacked openclaw package (no package.json and dist/ there)`);
  }
  const info = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  const named = fs
    .readdirSync(dist)
    .filter((name) => /^bash-process-registry-[A-Za-z0-9_-]+\.mjs$/.test(name))
    .filter((name) => EXPORTS_ADD_SESSION.test(fs.readFileSync(path.join(dist, name), 'utf8')))
    .sort();
  if (named.length === 0) usage(`${info.name}@${info.version}: no dist/bash-process-registry-*.mjs exports addSession`);
  return { file: path.join(dist, named[0]), info };
}

class BadArguments extends Error {}

class KnownError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function text(args, name) {
  const value = args[name];
  if (typeof value !== 'string') throw new BadArguments(`${name} must be a string`);
  return value;
}

function flag(args, name) {
  const value = args[name];
  if (typeof value !== 'boolean') throw new BadArguments(`${name} must be true or false`);
  return value;
}

function choice(args, name, choices) {
  const value = args[name];
  if (!choices.includes(value)) throw new BadArguments(`${name} must be one of ${choices.join(', ')}`);
  return value;
}

function millis(args, name) {
  const value = args[name];
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || value < 1) throw new BadArguments(`${name} must be a positive whole number`);
  return value;
}

/** A registry record as the spec shows it. */
function record(s) {
  return {
    session_id: s.id,
    status: s.terminalStatus ?? 'running',
    backgrounded: Boolean(s.backgrounded),
    exit_code: s.exitCode ?? null,
    exit_reason: s.exitReason ?? null,
    started_at: s.startedAt,
    ended_at: s.endedAt ?? null,
    expires_at: s.expiresAt ?? null,
  };
}

class Session {
  constructor(clock, registry, info, options) {
    this.clock = clock;
    this.registry = registry;
    this.info = info;
    this.options = options;
    this.effects = null;
    this.reset(0);
  }

  emit(effect) {
    if (this.effects) this.effects.push(effect);
    else log('effect outside of a request, dropped:', JSON.stringify(effect));
  }

  reset(nowMs) {
    // The registry's own test hook (exposed when VITEST is set at load):
    // empties its maps and stops its sweeper.
    globalThis[Symbol.for(REGISTRY_API)].resetProcessRegistryForTests();
    this.clock.reset(nowMs);
    this.live = new Map(); // id -> the exec runtime's session object, until the process ends
    this.scopes = new Map(); // scope -> acknowledgements its commit runs
  }

  /** The exec runtime's handle on a process that has not ended. */
  liveSession(id) {
    const s = this.live.get(id);
    if (s) return s;
    if (this.registry.getFinishedSession(id)) throw new KnownError('not_running', TEXT.not_running(id));
    throw new KnownError('not_found', TEXT.no_session(id));
  }

  hello(request) {
    if (request.protocol !== PROTOCOL) log(`the kit speaks protocol ${JSON.stringify(request.protocol)}`);
    const parameters = this.options.ttlMs === undefined ? {} : { default_ttl_ms: this.options.ttlMs };
    return {
      id: request.id,
      protocol: PROTOCOL,
      implementation: { name: 'openclaw process registry (unchanged)', version: this.info.version },
      specs: [{ id: SPEC.id, version: SPEC.version, profile: this.options.profile === 'none' ? null : 'openclaw', parameters }],
      capabilities: { concurrent: false },
    };
  }

  handle(request) {
    const { id, type } = request;
    switch (type) {
      case 'hello':
        return this.hello(request);
      case 'reset':
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'reset needs an integer now_ms');
        this.reset(request.now_ms);
        return { id, ok: true };
      case 'clock':
        if (!Number.isSafeInteger(request.now_ms)) return protocolError(id, 'clock needs an integer now_ms');
        return this.withEffects(() => this.clock.advanceTo(request.now_ms), (effects) => ({ id, ok: true, effects }));
      case 'call':
        return this.call(request);
      case 'bye':
        return { id, ok: true };
      default:
        return protocolError(id, `unknown message type ${JSON.stringify(type)}`);
    }
  }

  withEffects(run, answer) {
    this.effects = [];
    try {
      const result = run();
      return answer(this.effects, result);
    } finally {
      this.effects = null;
    }
  }

  call({ id, operation, args }) {
    if (!Object.hasOwn(OPERATIONS, operation)) {
      return { id, error: { kind: 'unknown_operation', message: `Unknown operation: ${operation}` }, effects: [] };
    }
    const given = args && typeof args === 'object' && !Array.isArray(args) ? args : {};
    this.effects = [];
    try {
      const result = OPERATIONS[operation](this, given);
      return { id, result, effects: this.effects };
    } catch (err) {
      return { id, error: errorOf(err), effects: this.effects };
    } finally {
      this.effects = null;
    }
  }
}

const OPERATIONS = {
  start_exec(s, a) {
    const { registry: r } = s;
    const id = text(a, 'session_id');
    const background = flag(a, 'background');
    const notifyOnExit = flag(a, 'notify_on_exit');
    const cleanupMs = millis(a, 'cleanup_ms');
    if (r.isProcessSessionIdTaken(id)) throw new KnownError('id_taken', TEXT.id_taken(id));
    const session = {
      id,
      command: 'true',
      scopeKey: undefined,
      sessionKey: 'agent:main',
      cleanupMs: r.resolveProcessCleanupMs(cleanupMs),
      notifyOnExit,
      notifyOnExitEmptySuccess: true,
      exitNotified: false,
      startedAt: Date.now(),
      maxOutputChars: MAX_OUTPUT_CHARS,
      pendingMaxOutputChars: PENDING_MAX_OUTPUT_CHARS,
      totalOutputChars: 0,
      pendingOutput: [],
      pendingStdoutChars: 0,
      pendingStderrChars: 0,
      pendingOutputDropped: false,
      aggregated: '',
      tail: '',
      exited: false,
      truncated: false,
      backgrounded: false,
    };
    r.addSession(session);
    s.live.set(id, session);
    if (background) r.markBackgrounded(session);
    return { session_id: id, status: 'running', backgrounded: session.backgrounded };
  },

  yield_exec(s, a) {
    const id = text(a, 'session_id');
    const session = s.registry.getSession(id);
    if (!session) {
      if (s.registry.getFinishedSession(id)) throw new KnownError('not_running', TEXT.not_running(id));
      throw new KnownError('not_found', TEXT.no_session(id));
    }
    s.registry.markBackgrounded(session);
    return { session_id: id, backgrounded: session.backgrounded };
  },

  write_output(s, a) {
    const id = text(a, 'session_id');
    const output = text(a, 'text');
    s.registry.appendOutput(s.liveSession(id), 'stdout', output);
    return { session_id: id };
  },

  end_process(s, a) {
    const id = text(a, 'session_id');
    const outcome = OUTCOMES[choice(a, 'outcome', Object.keys(OUTCOMES))];
    const session = s.liveSession(id);
    s.registry.markExited(session, outcome.exitCode, outcome.exitSignal, outcome.status, outcome.exitReason, false);
    s.live.delete(id);
    notifyOnExit(s, session, outcome.status);
    return { session_id: id, status: outcome.status };
  },

  poll(s, a) {
    const { registry: r } = s;
    const id = text(a, 'session_id');
    const scope = choice(a, 'scope', SCOPES);
    const running = r.getSession(id);
    const finished = r.getFinishedSession(id);
    let delivery;
    let acknowledge;
    let shown;
    if (!running) {
      if (!finished) throw new KnownError('not_found', TEXT.no_session(id));
      shown = finished;
      delivery = r.prepareSessionPoll(finished, scope);
      acknowledge = () => {
        delivery.acknowledge();
        r.acknowledgeNotifyOnExit(finished);
      };
    } else {
      if (!running.backgrounded) throw new KnownError('not_backgrounded', TEXT.not_backgrounded(id));
      shown = running;
      delivery = r.prepareSessionPoll(running, scope);
      acknowledge = () => delivery.acknowledge();
    }
    if (!s.scopes.has(scope)) s.scopes.set(scope, []);
    s.scopes.get(scope).push(acknowledge);
    const view = record(shown);
    return { session_id: id, status: view.status, output: delivery.output, exit_code: view.exit_code };
  },

  commit_scope(s, a) {
    const scope = choice(a, 'scope', SCOPES);
    const acks = s.scopes.get(scope) ?? [];
    s.scopes.delete(scope);
    for (const acknowledge of acks) acknowledge();
    return { scope, acknowledged: acks.length };
  },

  kill(s, a) {
    const id = text(a, 'session_id');
    const session = s.registry.getSession(id);
    if (!session) throw new KnownError('not_found', TEXT.no_active_session(id));
    if (!session.backgrounded) throw new KnownError('not_backgrounded', TEXT.not_backgrounded(id));
    s.emit({ effect: 'termination_requested', session_id: id });
    return { session_id: id };
  },

  remove(s, a) {
    const id = text(a, 'session_id');
    const session = s.registry.getSession(id);
    if (session) {
      if (!session.backgrounded) throw new KnownError('not_backgrounded', TEXT.not_backgrounded(id));
      s.emit({ effect: 'termination_requested', session_id: id });
      session.backgrounded = false;
      s.registry.deleteSession(id);
      return { session_id: id, was_running: true };
    }
    if (!s.registry.getFinishedSession(id)) throw new KnownError('not_found', TEXT.no_session(id));
    s.registry.deleteSession(id);
    return { session_id: id, was_running: false };
  },

  get_session(s, a) {
    const id = text(a, 'session_id');
    const session = s.registry.getSession(id) ?? s.registry.getFinishedSession(id);
    if (!session) throw new KnownError('not_found', TEXT.no_session(id));
    return { session: record(session) };
  },

  list_sessions(s) {
    const { registry: r } = s;
    const sessions = [...r.listRunningSessions(), ...r.listFinishedSessions()].toSorted(r.compareProcessSessionStartOrder);
    return { sessions: sessions.map((x) => ({ session_id: x.id, status: x.terminalStatus ?? 'running' })) };
  },

  is_taken(s, a) {
    const id = text(a, 'session_id');
    return { session_id: id, taken: s.registry.isProcessSessionIdTaken(id) };
  },
};

/** The exec runtime's exit notice: once, for a backgrounded session that asked. */
function notifyOnExit(s, session, status) {
  if (!session.backgrounded || !session.notifyOnExit || session.exitNotified || session.terminalPollObserved) return;
  session.exitNotified = true;
  s.emit({ effect: 'exit_notice', session_id: session.id, status });
  let queued = true;
  s.registry.recordNotifyOnExitRemoval(session, () => {
    if (!queued) return;
    queued = false;
    s.emit({ effect: 'exit_notice_withdrawn', session_id: session.id });
  });
}

function protocolError(id, message) {
  return { id: id === undefined ? null : id, error: { kind: 'protocol', message } };
}

function errorOf(err) {
  if (err instanceof KnownError) return { kind: err.kind, message: err.message };
  if (err instanceof BadArguments) return { kind: 'invalid_arguments', message: err.message };
  log('unexpected error:', err && err.stack ? err.stack : String(err));
  return { kind: 'internal', message: String(err && err.message ? err.message : err) };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { file, info } = findRegistry(options.packageDir);
  // The registry reads its environment and the clock at load: both go first.
  process.env.VITEST = '1';
  if (options.ttlMs === undefined) delete process.env.OPENCLAW_BASH_JOB_TTL_MS;
  else process.env.OPENCLAW_BASH_JOB_TTL_MS = String(options.ttlMs);
  delete process.env.PI_BASH_JOB_TTL_MS;
  const clock = new VirtualClock(0);
  installVirtualClock(clock);
  register('./hooks.mjs', import.meta.url);
  const registry = await import(pathToFileURL(file).href);
  if (!globalThis[Symbol.for(REGISTRY_API)]) usage(`${info.name}@${info.version}: the registry exposes no test reset hook`);
  log(`${info.name}@${info.version}: ${path.relative(options.packageDir, file)}`);
  const session = new Session(clock, registry, info, options);
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  const write = (response) => process.stdout.write(`${JSON.stringify(response)}\n`);
  input.on('line', (line) => {
    if (line.trim() === '') return;
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
    try {
      write(session.handle(request));
    } catch (err) {
      log('failed to answer:', err && err.stack ? err.stack : String(err));
      write({ id: request.id, error: { kind: 'internal', message: String(err && err.message) }, effects: [] });
    }
    if (request.type === 'bye') input.close();
  });
  process.stdout.on('error', (err) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

main();
