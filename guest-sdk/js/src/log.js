// Log lines go to the host's log, inside the span of the current reconcile.
import { host } from './host.js';

export const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

export function log(level, message) {
  if (!LEVELS.includes(level)) throw new RangeError(`log level ${JSON.stringify(level)}: use one of ${LEVELS}`);
  host().log(level, String(message));
}

export const trace = (m) => log('trace', m);
export const debug = (m) => log('debug', m);
export const info = (m) => log('info', m);
export const warn = (m) => log('warn', m);
export const error = (m) => log('error', m);
