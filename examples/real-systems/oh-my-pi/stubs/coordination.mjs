// Stand-ins for what the 18.x `wait` tool (src/tools/wait.ts) and job
// control (src/async/job-control.ts) import beside the job manager: peer
// messaging (IRC), services, settings, structured-output rendering, the
// agent core's abort reason, the schema builder and terminal UI helpers.
// None takes part in the job lifecycle: the adapter's session has no agent
// registry (so no peer messaging is reached), launch services are off, and
// no job carries structured output. A stand-in that is reached anyway
// throws, so a later version that starts using one is noticed.

function unreachable(name) {
  return () => {
    throw new Error(`stand-in ${name} was called: the adapter does not play this part of oh-my-pi`);
  };
}

// @oh-my-pi/omptype: the tool's argument schema (wait takes none).
export function type(schema) {
  return { schema, infer: undefined };
}

// @oh-my-pi/pi-agent-core
export const TOOL_INTERRUPT_ABORT_REASON = Symbol('tool interrupt');

// ../irc/bus, ../irc/messaging: peer messages (no registry: never reached)
export const IrcBus = { global: unreachable('IrcBus.global') };
export const drainPendingInbox = unreachable('drainPendingInbox');
export const messageResult = unreachable('messageResult');

// ../launch/services: no service runs
export function hasLiveOwnedService() {
  return false;
}
export const listServices = unreachable('listServices');
export const waitForOwnedServiceCompletion = unreachable('waitForOwnedServiceCompletion');

// ./settings: launch services are off
export const cfgLaunchEnabled = { get: () => false };

// ../session/async-job-delivery: structured output (no job carries any)
export const renderStructuredJson = unreachable('renderStructuredJson');
export function structuredStatusLabel(status) {
  return String(status);
}

// ../session/messages
export const USER_INTERRUPT_LABEL = 'Interrupted by user';

// @oh-my-pi/pi-tui/... helpers: text rendering only
export class ToolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ToolError';
  }
}
export function parseConfiguredThinkingLevel(value) {
  return value;
}
export function formatDuration(ms) {
  return `${ms}ms`;
}
export function isWaitingPollDetails() {
  return false; // only marks a result the TUI may hide ("useless")
}
export function formatArtifactErrorNotice(error) {
  return String(error);
}
