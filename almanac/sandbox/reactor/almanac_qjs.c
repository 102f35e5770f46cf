/* Almanac's QuickJS-NG reactor: the language, and nothing else.
 *
 * Built by `make sandbox-wasm` (see reactor/build.py) from the QuickJS-NG C
 * sources of the pinned `quickjs-ng` sdist, with zig's wasm32-wasi target.
 * Unlike the stock reactor it links no quickjs-libc: there is no `qjs:std`,
 * `qjs:os` or `qjs:bjson`, no file, no descriptor, no timer.  The only way
 * out of the interpreter is five imported host functions (module "almanac"),
 * reachable from JavaScript only through the object `almanac_init` hands the
 * bootstrap, which keeps it in its closure and removes it from the globals.
 *
 * Exports: almanac_init (evaluate the bootstrap: done once, then the memory
 * is snapshotted), almanac_buffer/almanac_buffer_size (where a run's job and
 * script go) or almanac_alloc (when they do not fit), almanac_run (one run,
 * from the snapshot).
 */
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "quickjs.h"

#define IMPORT(name) __attribute__((import_module("almanac"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

/* A capability call: the request (JSON text) in; the reply's length out (-1: no reply). */
IMPORT("call") int32_t host_call(const char *request, uint32_t length);
/* Copy the reply of the last call into the guest. */
IMPORT("reply") void host_reply(char *buffer, uint32_t length);
IMPORT("log") void host_log(const char *text, uint32_t length);
/* How the run ended: kind 0 a result (JSON), 1 an error (JSON), 2 an uncaught exception (text). */
IMPORT("finish") void host_finish(int32_t kind, const char *text, uint32_t length);
/* The run's promise is pending and nothing is left to run: it can only wait for its deadline. */
IMPORT("idle") void host_idle(void);

static JSRuntime *rt;
static JSContext *ctx;
static JSValue run_fn;             /* the bootstrap's run(jobJson), handed over by register() */
static const char *source;         /* this run's script, NUL-terminated */
static size_t source_length;
/* Where the host writes a run's job and script when they fit: no allocation, no call. */
#define RUN_BUFFER_SIZE (64 * 1024)
static char run_buffer[RUN_BUFFER_SIZE];
/* Heap left free at the top when the snapshot is taken, so a run does not grow memory. */
#define HEAP_RESERVE (512 * 1024)

static JSValue text_arg(JSContext *c, JSValueConst value, size_t *length, const char **text) {
    *text = JS_ToCStringLen(c, length, value);
    return *text ? JS_UNDEFINED : JS_EXCEPTION;
}

static JSValue js_call(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    size_t length;
    const char *request;
    if (JS_IsException(text_arg(c, argv[0], &length, &request)))
        return JS_EXCEPTION;
    int32_t reply_length = host_call(request, (uint32_t)length);
    JS_FreeCString(c, request);
    if (reply_length < 0)
        return JS_ThrowInternalError(c, "the host refused the call");
    char *buffer = js_malloc(c, (size_t)reply_length + 1);
    if (!buffer)
        return JS_EXCEPTION;
    host_reply(buffer, (uint32_t)reply_length);
    JSValue reply = JS_NewStringLen(c, buffer, (size_t)reply_length);
    js_free(c, buffer);
    return reply;
}

static JSValue js_log(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    size_t length;
    const char *text;
    if (JS_IsException(text_arg(c, argv[0], &length, &text)))
        return JS_EXCEPTION;
    host_log(text, (uint32_t)length);
    JS_FreeCString(c, text);
    return JS_UNDEFINED;
}

static JSValue js_finish(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    int32_t kind;
    size_t length;
    const char *text;
    if (JS_ToInt32(c, &kind, argv[0]) || JS_IsException(text_arg(c, argv[1], &length, &text)))
        return JS_EXCEPTION;
    host_finish(kind ? 1 : 0, text, (uint32_t)length);
    JS_FreeCString(c, text);
    return JS_UNDEFINED;
}

/* Parse this run's script as a module without evaluating it (syntax checks). */
static JSValue js_check(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    JSValue module = JS_Eval(c, source ? source : "", source ? source_length : 0, "/script.js",
                             JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(module))
        return JS_EXCEPTION;
    JS_FreeValue(c, module);
    return JS_UNDEFINED;
}

static JSValue js_register(JSContext *c, JSValueConst this_val, int argc, JSValueConst *argv) {
    if (!JS_IsFunction(c, argv[0]) || !JS_IsUndefined(run_fn))
        return JS_ThrowTypeError(c, "register takes one function, once");
    run_fn = JS_DupValue(c, argv[0]);
    return JS_UNDEFINED;
}

/* The only module there is: this run's script. */
static JSModuleDef *load_module(JSContext *c, const char *name, void *opaque) {
    if (!source || strcmp(name, "/script.js") != 0) {
        JS_ThrowReferenceError(c, "could not load module '%s'", name);
        return NULL;
    }
    JSValue module = JS_Eval(c, source, source_length, "/script.js",
                             JS_EVAL_TYPE_MODULE | JS_EVAL_FLAG_COMPILE_ONLY);
    if (JS_IsException(module))
        return NULL;
    JSModuleDef *def = JS_VALUE_GET_PTR(module);
    JS_FreeValue(c, module);
    return def;
}

static const JSCFunctionListEntry host_functions[] = {
    JS_CFUNC_DEF("call", 1, js_call),
    JS_CFUNC_DEF("log", 1, js_log),
    JS_CFUNC_DEF("finish", 2, js_finish),
    JS_CFUNC_DEF("check", 0, js_check),
    JS_CFUNC_DEF("register", 1, js_register),
};

/* Report an exception no JavaScript caught (out of memory while reporting, ...). */
static void report_uncaught(void) {
    JSValue exception = JS_GetException(ctx);
    size_t length = 0;
    const char *text = JS_ToCStringLen(ctx, &length, exception);
    if (text) {
        host_finish(2, text, (uint32_t)length);
        JS_FreeCString(ctx, text);
    } else {
        JS_FreeValue(ctx, JS_GetException(ctx));
        host_finish(2, "", 0);
    }
    JS_FreeValue(ctx, exception);
}

/* Run jobs until none is left; 0, or -1 after reporting an uncaught exception. */
static int drain_jobs(void) {
    for (;;) {
        JSContext *job_ctx;
        int ran = JS_ExecutePendingJob(rt, &job_ctx);
        if (ran == 0)
            return 0;
        if (ran < 0) {
            report_uncaught();
            return -1;
        }
    }
}

EXPORT("almanac_alloc") void *almanac_alloc(uint32_t size) {
    return malloc(size);
}

/* The run buffer's address (its size is RUN_BUFFER_SIZE, reported by almanac_buffer_size). */
EXPORT("almanac_buffer") char *almanac_buffer(void) {
    return run_buffer;
}

EXPORT("almanac_buffer_size") uint32_t almanac_buffer_size(void) {
    return RUN_BUFFER_SIZE;
}

/* Create the interpreter and evaluate the bootstrap (NUL-terminated) as a module.
 * 0 when the bootstrap registered its run function; the memory is then snapshotted. */
EXPORT("almanac_init") int32_t almanac_init(const char *bootstrap, uint32_t length, uint32_t max_stack) {
    rt = JS_NewRuntime();
    if (!rt)
        return 1;
    JS_SetMaxStackSize(rt, max_stack);
    ctx = JS_NewContext(rt);
    if (!ctx)
        return 2;
    run_fn = JS_UNDEFINED;
    JS_SetModuleLoaderFunc(rt, NULL, load_module, NULL);
    JSValue global = JS_GetGlobalObject(ctx);
    JSValue host = JS_NewObject(ctx);
    JS_SetPropertyFunctionList(ctx, host, host_functions, sizeof(host_functions) / sizeof(host_functions[0]));
    JS_SetPropertyStr(ctx, global, "__almanacHost", host);
    JS_FreeValue(ctx, global);
    JSValue promise = JS_Eval(ctx, bootstrap, length, "<bootstrap>", JS_EVAL_TYPE_MODULE);
    if (JS_IsException(promise)) {
        report_uncaught();
        return 3;
    }
    if (drain_jobs())
        return 4;
    int state = JS_PromiseState(ctx, promise);
    JS_FreeValue(ctx, promise);
    if (state != JS_PROMISE_FULFILLED)
        return 5;
    JS_RunGC(rt);
    free(malloc(HEAP_RESERVE));  /* the freed block stays as the heap's free top */
    return JS_IsFunction(ctx, run_fn) ? 0 : 6;
}

/* One run: call the bootstrap's run(job) and drive its promise until it settles. */
EXPORT("almanac_run") void almanac_run(const char *job, uint32_t job_length, const char *script,
                                       uint32_t script_length, uint32_t memory_limit) {
    JS_SetMemoryLimit(rt, memory_limit);
    source = script;
    source_length = script_length;
    JSValue arg = JS_NewStringLen(ctx, job, job_length);
    if (JS_IsException(arg)) {
        report_uncaught();
        return;
    }
    JSValue promise = JS_Call(ctx, run_fn, JS_UNDEFINED, 1, (JSValueConst *)&arg);
    JS_FreeValue(ctx, arg);
    if (JS_IsException(promise)) {
        report_uncaught();
        return;
    }
    /* Jobs run until the run's promise settles (the result is then reported): work a
     * script leaves queued behind its result is not run, as with js_std_await. */
    while (JS_PromiseState(ctx, promise) == JS_PROMISE_PENDING) {
        JSContext *job_ctx;
        int ran = JS_ExecutePendingJob(rt, &job_ctx);
        if (ran < 0) {
            report_uncaught();
            return;
        }
        if (ran == 0) {
            host_idle();
            return;
        }
    }
}
