/*
 * tests/wan/wan_test.h: what the WAN proxy's tests share: the clock,
 * starting and stopping the proxy (tests/wan/wan_proxy.c) as a child
 * process.
 *
 * The proxy comes from WAN_PROXY (meson sets it to the build's
 * tests/wan/wan-proxy).
 */
#ifndef AAGW_WAN_TEST_H
#define AAGW_WAN_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* Generous for sanitizer builds on a loaded 2-core machine; a healthy
 * run needs a fraction of each. */
#define WAN_START_TIMEOUT_MS 10000
#define WAN_STOP_TIMEOUT_MS 5000

/** @returns nanoseconds on the monotonic clock (the proxy's clock). */
int64_t wan_now_ns(void);

/** A proxy started by wan_proxy_start(). */
struct wan_proxy {
        harness_proc_t *proc;
        char           *ready, *err; /* its ready file and stderr log */
        uint16_t        ports[16];   /* listeners, in the pairs' order */
        int             nports;
};

/**
 * @brief Start the proxy with @p args (NULL-terminated: options, then
 * LISTEN=UPSTREAM pairs) and wait until its ready file names every
 * listener.  Files go to @p dir.
 * @returns 0, or -1 with the reason (and the proxy's stderr) in
 * @p errstr; @p p then holds what needs wan_proxy_stop().
 */
int wan_proxy_start(struct wan_proxy *p, const char *dir,
                    const char *const *args, char *errstr,
                    size_t errstr_size);

/**
 * @brief SIGTERM the proxy and wait up to WAN_STOP_TIMEOUT_MS.
 * @returns its exit code (harness_exit_code()), or -1 if it had to be
 * killed; frees what @p p holds (safe on a zeroed or stopped one).
 */
int wan_proxy_stop(struct wan_proxy *p);

#endif /* AAGW_WAN_TEST_H */
