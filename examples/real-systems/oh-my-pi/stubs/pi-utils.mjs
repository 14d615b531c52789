// Stand-in for @oh-my-pi/pi-utils: the two names job-manager.ts and job.ts
// import from it. The logger forwards to a sink the adapter installs (the
// manager reports a refused delivery only through logger.warn); prompt
// renders the tool's description, which nothing here reads.

export const logger = {
  sink: null,
  debug(message, fields) {
    this.sink?.('debug', message, fields);
  },
  info(message, fields) {
    this.sink?.('info', message, fields);
  },
  warn(message, fields) {
    this.sink?.('warn', message, fields);
  },
  error(message, fields) {
    this.sink?.('error', message, fields);
  },
};

export const prompt = {
  render(template) {
    return String(template ?? '');
  },
};
