// Stand-in for the terminal UI modules job.ts imports for its renderer
// (@oh-my-pi/pi-tui, ../tui, ./render-utils). The renderer is never called;
// only the names must exist, and PREVIEW_LIMITS is read at load time.

export class Text {
  constructor(text) {
    this.text = text;
  }
}

export const Ellipsis = { Unicode: '…', Ascii: '...' };

export class Hasher {
  bool() {
    return this;
  }
  u32() {
    return this;
  }
  digest() {
    return 0;
  }
}

const unused = (name) => () => {
  throw new Error(`${name} is a stand-in: the job tool's renderer is not used here`);
};

export const renderStatusLine = unused('renderStatusLine');
export const renderTreeList = unused('renderTreeList');
export const truncateToWidth = unused('truncateToWidth');
export const formatBadge = unused('formatBadge');
export const formatDuration = unused('formatDuration');
export const formatEmptyMessage = unused('formatEmptyMessage');
export const formatStatusIcon = unused('formatStatusIcon');
export const getPreviewLines = unused('getPreviewLines');
export const replaceTabs = unused('replaceTabs');
export const PREVIEW_LIMITS = { COLLAPSED_ITEMS: 3 };
