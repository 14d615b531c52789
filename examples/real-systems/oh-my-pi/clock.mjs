// A virtual clock for code written against Bun/Node timers: setTimeout,
// setInterval, Date.now and Bun.sleep are replaced by timers that fire only
// when the adapter moves the clock, each at its own instant. Between two
// timers every promise reaction queued so far runs (as in Node, where
// microtasks run after each timer callback).
//
// Timers due at the same instant fire by phase, then in order:
//   BODY      the job bodies the adapter plays (all due at one instant return
//             together, in start order: one macrotask)
//   SLEEP     Bun.sleep, which the manager's delivery loop alone uses
//   TIMER     every other setTimeout/setInterval (evictions, the job tool's
//             wait) in the order they were set
// In real time, two timers due in the same millisecond are a coincidence;
// this order is the kit's convention for its virtual clock (bodies, then
// deliveries, then evictions).

const realSetImmediate = globalThis.setImmediate;

/** Let every promise reaction queued so far (and those they queue) run. */
export function flushMicrotasks() {
  return new Promise((resolve) => realSetImmediate(resolve));
}

export const BODY = 0;
export const SLEEP = 1;
export const TIMER = 2;

class TimerHandle {
  constructor(clock, atMs, phase, order, seq, callback, intervalMs) {
    this.clock = clock;
    this.atMs = atMs;
    this.phase = phase;
    this.order = order;
    this.seq = seq;
    this.callback = callback;
    this.intervalMs = intervalMs;
    this.cancelled = false;
  }

  // The Node timer API the upstream code calls on a handle.
  unref() {
    return this;
  }

  ref() {
    return this;
  }

  hasRef() {
    return false;
  }

  refresh() {
    return this;
  }

  [Symbol.toPrimitive]() {
    return this.seq;
  }
}

function before(a, b) {
  if (a.atMs !== b.atMs) return a.atMs < b.atMs;
  if (a.phase !== b.phase) return a.phase < b.phase;
  if (a.order !== b.order) return a.order < b.order;
  return a.seq < b.seq;
}

export class VirtualClock {
  constructor(nowMs = 0) {
    this.reset(nowMs);
  }

  /** Forget every timer; the clock reads nowMs. */
  reset(nowMs) {
    this.nowMs = nowMs;
    this.timers = new Set();
    this.seq = 0;
  }

  now() {
    return this.nowMs;
  }

  schedule(delayMs, phase, callback, order = 0, intervalMs = null) {
    const delay = Number.isFinite(Number(delayMs)) ? Math.max(0, Math.floor(Number(delayMs))) : 0;
    const timer = new TimerHandle(this, this.nowMs + delay, phase, order, this.seq++, callback, intervalMs);
    this.timers.add(timer);
    return timer;
  }

  cancel(timer) {
    if (timer instanceof TimerHandle && timer.clock === this) {
      timer.cancelled = true;
      this.timers.delete(timer);
    }
  }

  /** Fire what is due next (no later than limitMs); false when nothing is. */
  async fireNext(limitMs) {
    let next = null;
    for (const timer of this.timers) if (next === null || before(timer, next)) next = timer;
    if (next === null || next.atMs > limitMs) return false;
    const batch = next.phase === BODY ? this.#bodiesAt(next.atMs) : [next];
    this.nowMs = next.atMs;
    for (const timer of batch) {
      this.timers.delete(timer);
      if (timer.intervalMs !== null) {
        timer.atMs += Math.max(1, timer.intervalMs);
        timer.seq = this.seq++;
        this.timers.add(timer);
      }
    }
    for (const timer of batch) timer.callback();
    await flushMicrotasks();
    return true;
  }

  #bodiesAt(atMs) {
    const due = [...this.timers].filter((t) => t.phase === BODY && t.atMs === atMs);
    return due.sort((a, b) => (before(a, b) ? -1 : 1));
  }

  /** Move to targetMs, firing every timer due on the way at its own instant. */
  async advanceTo(targetMs) {
    await flushMicrotasks();
    while (await this.fireNext(targetMs));
    this.nowMs = Math.max(this.nowMs, targetMs);
  }

  /** Run the clock forward until `promise` settles, then finish that instant. */
  async runUntilSettled(promise) {
    let settled = false;
    const done = () => {
      settled = true;
    };
    promise.then(done, done);
    await flushMicrotasks();
    while (!settled) {
      if (!(await this.fireNext(Number.POSITIVE_INFINITY))) {
        throw new Error('the call waits on something no timer will ever settle');
      }
    }
    await this.advanceTo(this.nowMs);
    return promise;
  }
}

/**
 * Make the process's timers, Date.now and Bun.sleep read `clock`.
 * `randomValue` is what Math.random returns (the manager draws its retry
 * jitter from it).
 */
export function installVirtualRuntime(clock, randomValue) {
  globalThis.setTimeout = (callback, delayMs, ...args) => clock.schedule(delayMs, TIMER, () => callback(...args));
  globalThis.setInterval = (callback, delayMs, ...args) =>
    clock.schedule(delayMs, TIMER, () => callback(...args), 0, Math.max(1, Number(delayMs) || 0));
  globalThis.clearTimeout = (timer) => clock.cancel(timer);
  globalThis.clearInterval = (timer) => clock.cancel(timer);
  Date.now = () => clock.now();
  Math.random = () => randomValue;
  globalThis.Bun = {
    sleep: (ms) => new Promise((resolve) => clock.schedule(ms instanceof Date ? ms.getTime() - clock.now() : ms, SLEEP, resolve)),
  };
  if (typeof Promise.withResolvers !== 'function') {
    // Bun has it; Node has it from 22 on.
    Promise.withResolvers = function withResolvers() {
      let resolve;
      let reject;
      const promise = new this((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    };
  }
}
