// A virtual clock for the registry: setTimeout, setInterval, Date.now read
// it, and timers fire only when the adapter moves it, each at its own
// instant (ties in the order they were set). The registry's only timer is
// its sweeper, which forgets finished sessions whose cleanup time is over.

class TimerHandle {
  constructor(atMs, seq, callback, intervalMs) {
    this.atMs = atMs;
    this.seq = seq;
    this.callback = callback;
    this.intervalMs = intervalMs;
  }

  // The Node timer API upstream code calls on a handle.
  unref() {
    return this;
  }

  ref() {
    return this;
  }

  hasRef() {
    return false;
  }

  [Symbol.toPrimitive]() {
    return this.seq;
  }
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

  schedule(delayMs, callback, intervalMs = null) {
    const delay = Number.isFinite(Number(delayMs)) ? Math.max(0, Math.floor(Number(delayMs))) : 0;
    const timer = new TimerHandle(this.nowMs + delay, this.seq++, callback, intervalMs);
    this.timers.add(timer);
    return timer;
  }

  cancel(timer) {
    if (timer instanceof TimerHandle) this.timers.delete(timer);
  }

  #next(limitMs) {
    let next = null;
    for (const t of this.timers) {
      if (t.atMs <= limitMs && (next === null || t.atMs < next.atMs || (t.atMs === next.atMs && t.seq < next.seq))) next = t;
    }
    return next;
  }

  /** Move to targetMs, firing every timer due on the way at its own instant. */
  advanceTo(targetMs) {
    for (let timer = this.#next(targetMs); timer !== null; timer = this.#next(targetMs)) {
      this.nowMs = Math.max(this.nowMs, timer.atMs);
      this.timers.delete(timer);
      if (timer.intervalMs !== null) {
        timer.atMs += Math.max(1, timer.intervalMs);
        timer.seq = this.seq++;
        this.timers.add(timer);
      }
      timer.callback();
    }
    this.nowMs = Math.max(this.nowMs, targetMs);
  }
}

/** Make the process's timers and Date.now read `clock`. */
export function installVirtualClock(clock) {
  globalThis.setTimeout = (callback, delayMs, ...args) => clock.schedule(delayMs, () => callback(...args));
  globalThis.setInterval = (callback, delayMs, ...args) =>
    clock.schedule(delayMs, () => callback(...args), Math.max(1, Number(delayMs) || 0));
  globalThis.clearTimeout = (timer) => clock.cancel(timer);
  globalThis.clearInterval = (timer) => clock.cancel(timer);
  Date.now = () => clock.now();
}
