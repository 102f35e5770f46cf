// Almanac sandbox bootstrap (package data): evaluated once per process, not per run.
//
// The host runs this module in a fresh QuickJS instance and snapshots the
// instance's memory (``_snapshot.py``); every run then starts from a copy of
// that snapshot and calls ``__almanacRun(jobJson)``.  This module installs the
// `almanac` and `console` globals, removes QuickJS's helpers that are not part
// of the language, and defines the run: it imports the tenant's module from
// the virtual file /script.js, awaits its default export and hands the JSON
// result (or the error) back to the host.  The host drives the run's promise
// to completion (``js_std_await``), which is what runs the script's promises.
//
// Everything the script can reach outside the language goes through
// `hostCall`: one JSON line written to the bridge fd, one JSON line read back.
import * as std from 'qjs:std';

const { stringify, parse } = JSON;
const PromiseCtor = Promise;
const ErrorCtor = Error;
const freeze = Object.freeze;
const toStr = String;
const out = std.fdopen(100, 'w');
const inp = std.fdopen(101, 'r');
const logFile = std.out;
// wasi-libc finds its preopened directory on the first open; do that now, in
// the snapshot, rather than in every run (the file is empty at this point).
std.loadFile('/script.js');
let logCap = 0;  // set by each run
const imul = Math.imul;

// The run's last word (its result or error) needs no reply: one write.
function hostSend(op, args) {
  out.puts(stringify([op, args]) + '\n');
  out.flush();
}

function hostCall(op, args) {
  out.puts(stringify([op, args]) + '\n');
  out.flush();
  const reply = parse(inp.getline());
  if (reply.e !== undefined) throw new ErrorCtor(reply.e);
  return reply.v;
}

// Host calls are synchronous underneath; scripts see Promises so the API can
// become truly asynchronous later without changing scripts.
function asPromise(op, args) {
  return new PromiseCtor((resolve, reject) => {
    try { resolve(hostCall(op, args)); } catch (e) { reject(e); }
  });
}

function show(value) {
  if (typeof value === 'string') return value;
  if (value instanceof ErrorCtor) return toStr(value.stack ? `${value}\n${value.stack}` : value);
  try {
    const text = stringify(value);
    return text === undefined ? toStr(value) : text;
  } catch (_) {
    return toStr(value);
  }
}

// stdout is fully buffered (the host says fd 1 is not a tty), so logging costs
// a host call per buffer, not per line; it is flushed when the run ends.  Once
// past the cap nothing more is written: the host truncates and marks it.
let logged = 0;
function logger(prefix) {
  return (...args) => {
    if (logged > logCap) return;
    const line = prefix + args.map(show).join(' ') + '\n';
    logged += line.length;
    logFile.puts(line);
  };
}

const almanac = freeze({
  kv: freeze({
    get: (key) => asPromise('kv.get', [key]),
    set: (key, value) => asPromise('kv.set', [key, value]),
    delete: (key) => asPromise('kv.delete', [key]),
    list: (prefix = '') => asPromise('kv.list', [prefix]),
  }),
  emit: (topic, data) => asPromise('emit', [topic, data]),
  schedule: freeze({
    at: (when, payload, options) =>
      asPromise('schedule.at', [when, payload, options == null ? null : options.key ?? null]),
  }),
});

const console = freeze({
  log: logger(''),
  info: logger('[info] '),
  warn: logger('[warn] '),
  error: logger('[error] '),
  debug: logger('[debug] '),
});

for (const name of ['print', 'scriptArgs', 'gc', 'execArgv', 'argv0', 'setTimeout', 'clearTimeout', 'setInterval',
                    'clearInterval', 'navigator', 'performance', 'bjson', 'std', 'os']) {
  delete globalThis[name];
}
Object.defineProperty(globalThis, 'almanac', { value: almanac, enumerable: false });
Object.defineProperty(globalThis, 'console', { value: console, writable: true, configurable: true });

function describe(error) {
  try {
    if (error instanceof ErrorCtor) {
      return { name: toStr(error.name), message: toStr(error.message), stack: toStr(error.stack ?? '') };
    }
    return { name: 'Error', message: `uncaught ${show(error)}`, stack: '' };
  } catch (_) {
    return { name: 'Error', message: 'uncaught exception', stack: '' };
  }
}

// Every run starts from the same snapshot, so QuickJS's own Math.random state
// would repeat run after run: each run seeds its own generator (xoshiro128**)
// with four words of host randomness.
function seededRandom(seed) {
  let [a, b, c, d] = seed;
  if ((a | b | c | d) === 0) a = 1;
  const next = () => {
    const t = b << 9;
    let r = imul(b, 5);
    r = imul((r << 7) | (r >>> 25), 9);
    c ^= a; d ^= b; b ^= c; a ^= d; c ^= t;
    d = (d << 11) | (d >>> 21);
    return r >>> 0;
  };
  return function random() { return ((next() >>> 5) * 67108864 + (next() >>> 6)) / 9007199254740992; };
}

async function run(jobJson) {
  delete globalThis.__almanacRun;
  const job = parse(jobJson);
  logCap = job.logBytes;
  Object.defineProperty(Math, 'random', { value: seededRandom(job.seed), writable: true, configurable: true });
  try {
    if (job.mode === 'check') {
      std.evalScript(std.loadFile('/script.js'), { compile_only: true, compile_module: true });
      logFile.flush();
      hostSend('result', ['null']);
    } else {
      const module = await import('/script.js');
      if (typeof module.default !== 'function') {
        throw new TypeError('the script must `export default` a function');
      }
      const value = await module.default(job.event);
      const json = stringify(value) ?? 'null';
      logFile.flush();
      hostSend('result', [json]);
    }
  } catch (error) {
    logFile.flush();
    hostSend('error', [describe(error)]);
  }
}

Object.defineProperty(globalThis, '__almanacRun', { value: run, configurable: true });
