'use strict';
// ThreadJobRuntime: background tool jobs scoped to a chat thread.
//
// A tool call resolves either synchronously or by starting exactly one
// background job. Jobs are listed, inspected and cancelled within their own
// thread; terminal results are injected into the conversation at turn
// boundaries (oldest completion first, at most once per job); only the newest
// `retentionLimit` terminal jobs of a thread are kept.
//
// The runtime never reads a real clock: time comes from the injected `clock`
// function (milliseconds). Everything it asks of the outside world goes
// through injected collaborators:
//
//   toolRuntime.cancel(jobId, requestedBy)       ask the tool to stop
//   scheduler.requestTurn(threadId, reason)      wake an idle thread
//   conversation.append(threadId, message)       add a synthetic message
//   onPayloadSpilled(jobId, path)                a payload was written to a file
//
// Job tracking lives in process memory only: restart() forgets everything.

const fs = require('fs');
const os = require('os');
const path = require('path');

const ACTIVE_STATUSES = Object.freeze(['running', 'pending_cancel']);
const TERMINAL_STATUSES = Object.freeze(['completed', 'failed', 'cancelled', 'timed_out']);
const ALL_STATUSES = Object.freeze([...ACTIVE_STATUSES, ...TERMINAL_STATUSES]);
const TURN_REASON = 'background-job-terminal';

const DEFAULT_OPTIONS = Object.freeze({
  retentionLimit: 20,
  maxLines: 1000,
  maxBytes: 25600,
  spillFileName: 'job-{job_id}-terminal.json',
  spillMessage: 'Terminal payload exceeded output limits. See temp file: {path}',
  messages: Object.freeze({
    toolCallResolved: 'Tool invocation already resolved',
    jobExistsForToolCall: 'Background job already exists for tool_call_id',
    duplicateJobId: 'Duplicate job-id',
    jobNotFound: 'Job not found',
    notFoundInThread: 'Job not found in this thread: {job_id}',
    retryNotSupported: 'Manual retry is not supported for background jobs',
  }),
});

/** A rejected request: `kind` is stable, `message` is for humans. */
class JobError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'JobError';
    this.kind = kind;
  }
}

/** Fill `{name}` placeholders; unknown placeholders are left as they are. */
function fillTemplate(template, values) {
  return String(template).replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name) =>
    Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole);
}

function isTerminal(status) {
  return TERMINAL_STATUSES.includes(status);
}

/** Lines of a payload: one more than its newline characters. */
function countLines(text) {
  let lines = 1;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) lines += 1;
  return lines;
}

/** (completed_at, completion_seq), oldest first. */
function byCompletion(a, b) {
  return (a.completedAt - b.completedAt) || (a.completionSeq - b.completionSeq);
}

/** (started_at, start_seq), oldest first. */
function byStart(a, b) {
  return (a.startedAt - b.startedAt) || (a.startSeq - b.startSeq);
}

class ThreadJobRuntime {
  /**
   * @param {object} deps
   * @param {() => number} deps.clock  current time in milliseconds
   * @param {{cancel(jobId: string, requestedBy: string): void}} [deps.toolRuntime]
   * @param {{requestTurn(threadId: string, reason: string): void}} [deps.scheduler]
   * @param {{append(threadId: string, message: object): void}} [deps.conversation]
   * @param {(jobId: string, path: string) => void} [deps.onPayloadSpilled]
   * @param {string} [deps.spillRoot]  parent directory of the spill directory (default: os.tmpdir())
   * @param {object} [options]  limits, templates and message texts (see DEFAULT_OPTIONS)
   */
  constructor(deps, options = {}) {
    if (!deps || typeof deps.clock !== 'function') throw new TypeError('ThreadJobRuntime needs a clock function');
    this.clock = deps.clock;
    this.toolRuntime = deps.toolRuntime || { cancel() {} };
    this.scheduler = deps.scheduler || { requestTurn() {} };
    this.conversation = deps.conversation || { append() {} };
    this.onPayloadSpilled = deps.onPayloadSpilled || (() => {});
    this.spillRoot = deps.spillRoot || os.tmpdir();
    this.options = {
      ...DEFAULT_OPTIONS,
      ...options,
      messages: { ...DEFAULT_OPTIONS.messages, ...(options.messages || {}) },
    };
    this.spillDir = null; // created on the first spill, kept across restarts
    this.restart();
  }

  // ------------------------------------------------------------ lifecycle

  /** The process restarted: job tracking lived in memory only. */
  restart() {
    this.jobs = new Map();           // job_id -> job record
    this.jobsByThread = new Map();   // thread_id -> Set(job_id), creation order
    this.jobByToolCall = new Map();  // tool_call_id -> job_id
    this.syncToolCalls = new Map();  // tool_call_id -> thread_id (resolved inline)
    this.busyThreads = new Set();    // threads with a turn in progress
    this.spillPaths = new Map();     // spill file path -> job_id (live jobs only)
    this.startSeq = 0;
    this.completionSeq = 0;
    this.generatedIds = 0;
  }

  /** Remove the spill directory and its files (on shutdown). */
  dispose() {
    if (this.spillDir) {
      try {
        fs.rmSync(this.spillDir, { recursive: true, force: true });
      } catch (_) {
        // best effort
      }
      this.spillDir = null;
    }
  }

  // ------------------------------------------------------------ tool calls

  /** A tool invocation completed inline: no job is created. */
  completeSync({ threadId, toolCallId, toolName, result }) {
    if (this.syncToolCalls.has(toolCallId) || this.jobByToolCall.has(toolCallId)) {
      throw new JobError('tool_call_resolved', this.options.messages.toolCallResolved);
    }
    this.syncToolCalls.set(toolCallId, threadId);
    void toolName;
    return { mode: 'synchronous', result };
  }

  /** A tool invocation started a background job. */
  startJob({ threadId, toolCallId, toolName, jobId }) {
    const msgs = this.options.messages;
    if (this.syncToolCalls.has(toolCallId)) throw new JobError('tool_call_resolved', msgs.toolCallResolved);
    if (this.jobByToolCall.has(toolCallId)) throw new JobError('job_exists_for_tool_call', msgs.jobExistsForToolCall);
    const hasId = jobId !== undefined && jobId !== null;
    if (hasId && this.jobs.has(jobId)) throw new JobError('duplicate_job_id', msgs.duplicateJobId);
    const id = hasId ? jobId : this._generateJobId();

    this.startSeq += 1;
    const job = {
      jobId: id,
      threadId,
      toolCallId,
      toolName,
      status: 'running',
      startedAt: this.clock(),
      completedAt: null,
      cancelRequestedAt: null,
      terminalPayload: null,
      terminalPayloadFile: null,
      terminalMessageEmitted: false,
      terminalMessageEmittedAt: null,
      startSeq: this.startSeq,
      completionSeq: 0,
    };
    this.jobs.set(id, job);
    this.jobByToolCall.set(toolCallId, id);
    if (!this.jobsByThread.has(threadId)) this.jobsByThread.set(threadId, new Set());
    this.jobsByThread.get(threadId).add(id);
    return { mode: 'background', job_id: id, status: 'running' };
  }

  _generateJobId() {
    let id;
    do {
      this.generatedIds += 1;
      id = `job-${this.generatedIds}`;
    } while (this.jobs.has(id));
    return id;
  }

  // ------------------------------------------------------------ tool runtime reports

  /** The tool runtime reports a terminal outcome. A second report changes nothing. */
  observeOutcome({ jobId, outcome, payload }) {
    const job = this._getJob(jobId);
    if (!isTerminal(outcome)) throw new JobError('invalid_args', `not a terminal outcome: ${outcome}`);
    if (!isTerminal(job.status)) {
      job.status = outcome;
      this.completionSeq += 1;
      job.completedAt = this.clock();
      job.completionSeq = this.completionSeq;
      const text = String(payload);
      if (this._fitsInline(text)) {
        job.terminalPayload = text;
      } else {
        job.terminalPayloadFile = this._spill(job, text);
      }
      if (!this.busyThreads.has(job.threadId)) {
        this.scheduler.requestTurn(job.threadId, TURN_REASON);
      }
      this._enforceRetention(job.threadId);
    }
    return { job_id: job.jobId, status: job.status };
  }

  /** A progress note of a running job: nothing visible changes. */
  observeProgress({ jobId }) {
    const job = this._getJob(jobId);
    return { job_id: job.jobId, status: job.status };
  }

  /** A retryable internal LLM HTTP error while the job runs: nothing visible changes. */
  observeLlmError({ jobId }) {
    const job = this._getJob(jobId);
    return { job_id: job.jobId, status: job.status };
  }

  // ------------------------------------------------------------ turns

  beginTurn({ threadId }) {
    this.busyThreads.add(threadId);
    return {};
  }

  /** The thread reached a turn boundary: inject each pending terminal job once. */
  turnBoundary({ threadId }) {
    this.busyThreads.delete(threadId);
    const pending = this._threadJobs(threadId)
      .filter((job) => isTerminal(job.status) && !job.terminalMessageEmitted)
      .sort(byCompletion);
    const injected = [];
    for (const job of pending) {
      if (job.terminalMessageEmitted) continue; // at most once, whatever happens meanwhile
      job.terminalMessageEmitted = true;
      job.terminalMessageEmittedAt = this.clock();
      this.conversation.append(job.threadId, {
        jobId: job.jobId,
        role: 'assistant',
        text: this._terminalMessageText(job),
      });
      injected.push(job.jobId);
    }
    return { injected };
  }

  // ------------------------------------------------------------ thread-scoped queries

  listJobs({ threadId, statuses }) {
    const wanted = statuses === undefined || statuses === null ? ACTIVE_STATUSES : statuses;
    return {
      jobs: this._threadJobs(threadId)
        .filter((job) => wanted.includes(job.status))
        .sort(byStart)
        .map((job) => ({
          job_id: job.jobId,
          tool_call_id: job.toolCallId,
          tool_name: job.toolName,
          status: job.status,
        })),
    };
  }

  inspectJob({ threadId, jobId }) {
    return { job: publicRecord(this._getJobInThread(threadId, jobId)) };
  }

  /** Best effort: only a running job moves to pending_cancel. */
  cancelJob({ threadId, jobId, requestedBy }) {
    const job = this._getJobInThread(threadId, jobId);
    if (job.status === 'running') {
      job.status = 'pending_cancel';
      job.cancelRequestedAt = this.clock();
      this.toolRuntime.cancel(job.jobId, requestedBy);
    }
    return { job_id: job.jobId, status: job.status };
  }

  retryJob() {
    throw new JobError('retry_not_supported', this.options.messages.retryNotSupported);
  }

  // ------------------------------------------------------------ internals

  _getJob(jobId) {
    const job = this.jobs.get(jobId);
    if (!job) throw new JobError('job_not_found', this.options.messages.jobNotFound);
    return job;
  }

  _getJobInThread(threadId, jobId) {
    const job = this.jobs.get(jobId);
    if (!job || job.threadId !== threadId) {
      throw new JobError('not_found_in_thread', fillTemplate(this.options.messages.notFoundInThread, { job_id: jobId }));
    }
    return job;
  }

  _threadJobs(threadId) {
    const ids = this.jobsByThread.get(threadId);
    return ids ? [...ids].map((id) => this.jobs.get(id)) : [];
  }

  _fitsInline(text) {
    return countLines(text) <= this.options.maxLines && Buffer.byteLength(text, 'utf8') <= this.options.maxBytes;
  }

  /** Write an oversized payload to a file in the spill directory; returns its path. */
  _spill(job, text) {
    if (!this.spillDir) this.spillDir = fs.mkdtempSync(path.join(this.spillRoot, 'node-thread-jobs-'));
    const name = fillTemplate(this.options.spillFileName, { job_id: job.jobId, tool_name: job.toolName });
    const inside = (dir, file) => {
      const rel = path.relative(dir, file);
      return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel);
    };
    let file = path.join(this.spillDir, name);
    if (!inside(this.spillDir, file)) {
      throw new JobError('invalid_spill_file_name', `spill file name escapes the spill directory: ${name}`);
    }
    if (this.spillPaths.has(file)) {
      // Another live job's payload has this file name (the template does not
      // make it unique): keep the name, in a directory of its own.
      file = path.join(fs.mkdtempSync(path.join(this.spillDir, 'spill-')), name);
    }
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, 'utf8');
    this.spillPaths.set(file, job.jobId);
    this.onPayloadSpilled(job.jobId, file);
    return file;
  }

  _terminalMessageText(job) {
    const body = job.terminalPayload !== null
      ? job.terminalPayload
      : fillTemplate(this.options.spillMessage, { path: job.terminalPayloadFile });
    return `Background job ${job.jobId} (${job.toolName}) finished: ${job.status}\n${body}`;
  }

  /** Keep the newest `retentionLimit` terminal jobs of the thread; forget the rest. */
  _enforceRetention(threadId) {
    const terminal = this._threadJobs(threadId).filter((job) => isTerminal(job.status)).sort(byCompletion);
    const excess = terminal.length - this.options.retentionLimit;
    for (let i = 0; i < excess; i += 1) this._forget(terminal[i]);
  }

  _forget(job) {
    this.jobs.delete(job.jobId);
    const ids = this.jobsByThread.get(job.threadId);
    if (ids) {
      ids.delete(job.jobId);
      if (ids.size === 0) this.jobsByThread.delete(job.threadId);
    }
    if (this.jobByToolCall.get(job.toolCallId) === job.jobId) this.jobByToolCall.delete(job.toolCallId);
    if (job.terminalPayloadFile !== null && this.spillPaths.get(job.terminalPayloadFile) === job.jobId) {
      this.spillPaths.delete(job.terminalPayloadFile);
    }
  }
}

/** The 12 public fields of a job, in the spec's order. */
function publicRecord(job) {
  return {
    job_id: job.jobId,
    thread_id: job.threadId,
    tool_call_id: job.toolCallId,
    tool_name: job.toolName,
    status: job.status,
    started_at: job.startedAt,
    completed_at: job.completedAt,
    cancel_requested_at: job.cancelRequestedAt,
    terminal_payload: job.terminalPayload,
    terminal_payload_file: job.terminalPayloadFile,
    terminal_message_emitted: job.terminalMessageEmitted,
    terminal_message_emitted_at: job.terminalMessageEmittedAt,
  };
}

module.exports = {
  ThreadJobRuntime,
  JobError,
  DEFAULT_OPTIONS,
  ACTIVE_STATUSES,
  TERMINAL_STATUSES,
  ALL_STATUSES,
  TURN_REASON,
  fillTemplate,
  countLines,
};
