// Almanac sandbox bootstrap: the entry module of every run (package data).
//
// It reads the job (JSON in scriptArgs[0]), installs the `almanac` and `console` globals,
// removes QuickJS's helpers that are not part of the language, then imports
// the tenant's module from the virtual file /script.js, awaits its default
// export and hands the JSON result (or the error) back to the host.  QuickJS
// evaluates an entry module with top-level await by running the job queue
// until this module settles, which is what drives the script's promises.
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
const job = parse(scriptArgs[0]);
const logCap = job.logBytes;

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

try {
  if (job.mode === 'check') {
    std.evalScript(std.loadFile('/script.js'), { compile_only: true, compile_module: true });
    logFile.flush();
    hostCall('result', ['null']);
  } else {
    const module = await import('/script.js');
    if (typeof module.default !== 'function') {
      throw new TypeError('the script must `export default` a function');
    }
    const value = await module.default(job.event);
    const json = stringify(value) ?? 'null';
    logFile.flush();
    hostCall('result', [json]);
  }
} catch (error) {
  logFile.flush();
  hostCall('error', [describe(error)]);
}
