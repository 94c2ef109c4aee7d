'use strict';
// What every Node.js driver of the compatibility matrix shares: the command line of the driver
// contract (tests/compat/README.md), the records it writes, its output, bounded waits and the
// exit protocol (0 on success, 1 with the first error as the last line of stderr, 3 and
// `unsupported` for a command the client cannot do).

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];
const TIMEOUT_MS = 60000; // the bound of every wait
const WATCHDOG_MS = 180000; // the bound of a whole step, a last resort
const UNSUPPORTED = 3;

class Unsupported extends Error {
  constructor(what) {
    super(what);
    this.name = 'Unsupported';
  }
}

class TimeoutError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/** Record i of a `produce ... CODEC ...` step: {key, value, headers: [[name, value], ...]}. */
function record(codec, i) {
  const key = `${codec}-${String(i).padStart(6, '0')}`;
  return { key, value: `${key}:${'abcdefghij'.repeat(20)}`, headers: [['idx', String(i)], ['codec', codec]] };
}

function emit(obj) {
  // On Linux, process.stdout writes to a pipe or a file are synchronous.
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function text(b) {
  if (b === null || b === undefined) return null;
  return Buffer.isBuffer(b) ? b.toString('utf8') : String(b);
}

/** A KafkaJS-style header object ({name: value | [values]}) as [[name, value], ...]. Both
 * clients build it from the record's headers in order; JavaScript keeps that order for names
 * that are not array indices (idx, codec). */
function headerList(headers) {
  const out = [];
  for (const [name, v] of Object.entries(headers || {})) {
    if (Array.isArray(v)) for (const x of v) out.push([name, text(x)]);
    else out.push([name, text(v)]);
  }
  return out;
}

function emitRecord(partition, offset, key, value, headers) {
  emit({ p: partition, o: Number(offset), k: text(key), v: text(value), h: headerList(headers) });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves or rejects as promise does, or rejects with a TimeoutError after ms. */
function withTimeout(promise, what, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what}: no answer after ${ms / 1000} s`)), ms);
  });
  return Promise.race([Promise.resolve(promise), timeout]).finally(() => clearTimeout(timer));
}

/** Calls check() until it returns true (an exception counts as false, and is quoted in the
 * TimeoutError if it was the last thing seen), at most ms. */
async function waitUntil(check, what, ms = TIMEOUT_MS, pauseMs = 100) {
  const deadline = Date.now() + ms;
  let lastError = null;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) {
      const last = lastError ? ` (last error: ${oneLine(lastError)})` : '';
      throw new TimeoutError(`${what} after ${ms / 1000} s${last}`);
    }
    try {
      if (await withTimeout(check(), what, left)) return;
      lastError = null;
    } catch (e) {
      if (e instanceof TimeoutError) throw e;
      lastError = e;
    }
    await sleep(pauseMs);
  }
}

/** One line for an error: its name and message, then what caused it, if the client says. */
function oneLine(e) {
  const parts = [];
  const seen = new Set();
  let cur = e;
  while (cur && !seen.has(cur) && parts.length < 4) {
    seen.add(cur);
    if (cur instanceof Error || (typeof cur === 'object' && cur.message !== undefined)) {
      let s = `${cur.name || 'Error'}: ${cur.message}`;
      if (cur.type && !String(cur.message).includes(cur.type)) s += ` [${cur.type}]`;
      if (cur.code !== undefined && cur.code !== null) s += ` (code ${cur.code})`;
      parts.push(s);
      const inner = cur.cause || cur.originalError ||
        (Array.isArray(cur.errors) && cur.errors.length ? cur.errors[0] : null) ||
        (Array.isArray(cur.topicErrors) && cur.topicErrors.length ? cur.topicErrors[0] : null);
      cur = inner;
    } else {
      parts.push(String(cur));
      break;
    }
  }
  return parts.join(' <- ').replace(/\s*\n\s*/g, ' ');
}

/** A log writer for the clients' loggers: one JSON object a line on stderr (stdout is the
 * driver's report). */
function logToStderr(level, message, extra) {
  let line;
  try {
    line = JSON.stringify({ level, message, ...(extra || {}) });
  } catch (_) {
    line = `${level} ${message}`;
  }
  process.stderr.write(line + '\n');
}

// Clients to disconnect when a step fails (so that a consumer does not stay in its group).
const closers = [];

/** Registers an async function to call (bounded) before the driver exits on a failure. */
function onFailure(fn) {
  closers.push(fn);
}

let exiting = false;

function exitWith(code, lastLine) {
  const finish = () => {
    if (lastLine !== undefined) {
      process.stderr.write(lastLine + '\n', () => process.exit(code));
    } else {
      process.exit(code);
    }
  };
  process.stdout.write('', finish);
}

async function fail(e) {
  if (exiting) return;
  exiting = true;
  if (e && e.stack) process.stderr.write(`${e.stack}\n`);
  try {
    await withTimeout(Promise.allSettled(closers.map((c) => c())), 'closing the clients', 10000);
  } catch (_) {
    // The error to report is e.
  }
  exitWith(1, oneLine(e));
}

/** Parses `--bootstrap HOST:PORT COMMAND ARGS...`, runs commands[COMMAND](bootstrap, ...ARGS)
 * and prints what it returns (an object) as one JSON line; then exits (0, 1 or 3). */
function main(commands) {
  process.on('unhandledRejection', (e) => fail(e));
  process.on('uncaughtException', (e) => fail(e));
  const argv = process.argv.slice(2);
  let bootstrap = null;
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--bootstrap' && i + 1 < argv.length) bootstrap = argv[++i];
    else if (argv[i].startsWith('--bootstrap=')) bootstrap = argv[i].slice('--bootstrap='.length);
    else rest.push(argv[i]);
  }
  if (!bootstrap || rest.length === 0) {
    exitWith(2, 'usage: node DRIVER.js --bootstrap HOST:PORT COMMAND ARGS...');
    return;
  }
  const [command, ...args] = rest;
  const fn = Object.hasOwn(commands, command) ? commands[command] : null;
  if (!fn) {
    exitWith(UNSUPPORTED, 'unsupported');
    return;
  }
  if (args.length !== fn.length - 1) {
    exitWith(2, `usage: ${command} takes ${fn.length - 1} argument(s), got ${args.length}`);
    return;
  }
  setTimeout(() => fail(new TimeoutError(`${command} did not finish in ${WATCHDOG_MS / 1000} s`)),
    WATCHDOG_MS).unref();
  Promise.resolve()
    .then(() => fn(bootstrap, ...args))
    .then((out) => {
      if (exiting) return;
      exiting = true;
      if (out !== undefined && out !== null) emit(out);
      exitWith(0);
    }, (e) => {
      if (e instanceof Unsupported) {
        if (exiting) return;
        exiting = true;
        if (e.message) process.stderr.write(`${e.message}\n`);
        exitWith(UNSUPPORTED, 'unsupported');
        return;
      }
      fail(e);
    });
}

function positiveInt(s, what) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${what} must be a non-negative integer, got ${s}`);
  return n;
}

module.exports = {
  CODECS, TIMEOUT_MS, Unsupported, TimeoutError, record, emit, emitRecord, headerList, text, sleep,
  withTimeout, waitUntil, oneLine, logToStderr, onFailure, main, positiveInt,
};
