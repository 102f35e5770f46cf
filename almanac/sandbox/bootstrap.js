// Almanac sandbox bootstrap (package data): evaluated once per process, not per run.
//
// The host evaluates this module in a fresh QuickJS instance (our own reactor,
// reactor/almanac_qjs.c, which has no std/os modules, no files and no
// descriptors) and snapshots the instance's memory (``_snapshot.py``); every
// run then starts from a copy of that snapshot and calls the run function
// registered below.  This module installs the `almanac` and `console`
// globals and defines the run: it imports the tenant's module (the only
// module the reactor can load, /script.js), awaits its default export and
// hands the JSON result (or the error) back to the host.
//
// Everything outside the language goes through `host`, the reactor's five
// imported functions, which this module takes off the global object at once:
// a script can only reach them through the frozen functions below.
const host = globalThis.__almanacHost;
delete globalThis.__almanacHost;
const { call: hostCallRaw, log: hostLog, finish: hostFinish, check: hostCheck } = host;

const { stringify, parse } = JSON;
const PromiseCtor = Promise;
const ErrorCtor = Error;
const freeze = Object.freeze;
const toStr = String;
const imul = Math.imul;
let logCap = 0;  // set by each run

function hostCall(op, args) {
  const reply = parse(hostCallRaw(stringify([op, args])));
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

// Each line goes to the host at once, so a run that is stopped keeps its logs.
// Once past the cap nothing more is sent: the host truncates and marks it.
let logged = 0;
function logger(prefix) {
  return (...args) => {
    if (logged > logCap) return;
    const line = prefix + args.map(show).join(' ') + '\n';
    logged += line.length;
    hostLog(line);
  };
}

// fetch: a subset of the web's (SPEC section 6). The host does the request, through the
// tenant's egress allowlist, and answers with the whole (at most 1 MiB) body as text.
const lower = (text) => toStr(text).toLowerCase();
const ObjectEntries = Object.entries;
const isArray = Array.isArray;

function headerPairs(headers) {
  if (headers == null) return [];
  if (headers instanceof ResponseHeaders) return headers.entries();
  const pairs = isArray(headers) ? headers : ObjectEntries(headers);
  return pairs.map((pair) => {
    if (!isArray(pair) || pair.length !== 2) throw new TypeError('fetch: headers must be [name, value] pairs');
    return [toStr(pair[0]), toStr(pair[1])];
  });
}

class ResponseHeaders {
  #pairs;
  constructor(pairs) { this.#pairs = pairs.map(([k, v]) => [lower(k), v]); }
  get(name) {
    const found = this.#pairs.filter(([k]) => k === lower(name)).map(([, v]) => v);
    return found.length ? found.join(', ') : null;
  }
  has(name) { return this.get(name) !== null; }
  entries() { return this.#pairs.map(([k, v]) => [k, v]); }
  forEach(fn) { for (const [k, v] of this.#pairs) fn(v, k, this); }
  [Symbol.iterator]() { return this.entries()[Symbol.iterator](); }
}

class FetchResponse {
  #body;
  constructor(answer) {
    this.status = answer.status;
    this.statusText = answer.statusText;
    this.ok = answer.status >= 200 && answer.status < 300;
    this.url = answer.url;
    this.headers = new ResponseHeaders(answer.headers);
    this.#body = answer.body;
    freeze(this);
  }
  text() { return PromiseCtor.resolve(this.#body); }
  json() {
    return new PromiseCtor((resolve) => resolve(parse(this.#body)));
  }
}

function fetch(resource, init) {
  return new PromiseCtor((resolve, reject) => {
    try {
      const options = init ?? {};
      const body = options.body ?? null;
      if (body !== null && typeof body !== 'string') {
        throw new TypeError('fetch: the body must be a string (JSON.stringify an object first)');
      }
      const method = options.method == null ? null : toStr(options.method);
      const answer = hostCall('fetch', [toStr(resource), method, headerPairs(options.headers), body]);
      resolve(new FetchResponse(answer));
    } catch (e) { reject(e); }
  });
}

const almanac = freeze({
  kv: freeze({
    get: (key) => asPromise('kv.get', [key]),
    set: (key, value) => asPromise('kv.set', [key, value]),
    delete: (key) => asPromise('kv.delete', [key]),
    list: (prefix = '') => asPromise('kv.list', [prefix]),
  }),
  emit: (topic, data) => asPromise('emit', [topic, data]),
  secrets: freeze({
    get: (name) => asPromise('secrets.get', [name]),
  }),
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

for (const name of ['gc', 'navigator', 'performance']) {
  delete globalThis[name];
}
Object.defineProperty(globalThis, 'almanac', { value: almanac, enumerable: false });
Object.defineProperty(globalThis, 'console', { value: console, writable: true, configurable: true });
Object.defineProperty(globalThis, 'fetch', { value: freeze(fetch), writable: true, configurable: true });

// An error's parts are cut here, in the guest, so that its JSON always fits what the host reads
// (_wasi.MAX_ERROR_TEXT); the host then caps the stored message at 64 KiB like output and logs.
const cut = (text, most) => (text.length > most ? text.slice(0, most) : text);

function describe(error) {
  try {
    if (error instanceof ErrorCtor) {
      return { name: cut(toStr(error.name), 200), message: cut(toStr(error.message), 65536),
               stack: cut(toStr(error.stack ?? ''), 8192) };
    }
    return { name: 'Error', message: cut(`uncaught ${show(error)}`, 65536), stack: '' };
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
  const job = parse(jobJson);
  logCap = job.logBytes;
  Object.defineProperty(Math, 'random', { value: seededRandom(job.seed), writable: true, configurable: true });
  try {
    if (job.mode === 'check') {
      hostCheck();
      hostFinish(0, 'null');
    } else {
      const module = await import('/script.js');
      if (typeof module.default !== 'function') {
        throw new TypeError('the script must `export default` a function');
      }
      const value = await module.default(job.event);
      const json = stringify(value) ?? 'null';
      hostFinish(0, json);
    }
  } catch (error) {
    hostFinish(1, stringify(describe(error)));
  }
}

host.register(run);
