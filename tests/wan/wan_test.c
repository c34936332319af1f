/*
 * tests/wan/wan_test.c: starting and stopping the WAN proxy for its tests
 * (wan_test.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wan_test.h"

int64_t wan_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The ready file is written whole (through a rename), so once it is
 * there it names every listener. */
static int ready_read(struct wan_proxy *p) {
        char *text = harness_read_file(p->ready, NULL);
        char *line, *save = NULL;

        if (!text)
                return -1;
        p->nports = 0;
        for (line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                unsigned port;
                if (p->nports == (int)(sizeof(p->ports) / sizeof(p->ports[0])) ||
                    sscanf(line, "127.0.0.1:%u", &port) != 1 || !port ||
                    port > 65535) {
                        free(text);
                        p->nports = 0;
                        return -1;
                }
                p->ports[p->nports++] = (uint16_t)port;
        }
        free(text);
        return p->nports ? 0 : -1;
}

static bool ready_or_exited(void *arg) {
        struct wan_proxy *p = arg;
        return !ready_read(p) ||
               harness_proc_wait(p->proc, 0, NULL) == AAGW_OK;
}

int wan_proxy_start(struct wan_proxy *p, const char *dir,
                    const char *const *args, char *errstr,
                    size_t errstr_size) {
        static int   seq;
        const char  *argv[64];
        const char  *bin = getenv("WAN_PROXY");
        char         name[64];
        size_t       a   = 0;

        memset(p, 0, sizeof(*p));
        if (!bin) {
                snprintf(errstr, errstr_size,
                         "WAN_PROXY is not set (meson sets it)");
                return -1;
        }
        snprintf(name, sizeof(name), "proxy%d.ready", ++seq);
        p->ready = harness_path_join(dir, name);
        snprintf(name, sizeof(name), "proxy%d.err", seq);
        p->err = harness_path_join(dir, name);
        argv[a++] = bin;
        argv[a++] = "--ready-file";
        argv[a++] = p->ready;
        for (; *args && a < sizeof(argv) / sizeof(argv[0]) - 1; args++)
                argv[a++] = *args;
        argv[a] = NULL;
        p->proc = harness_proc_spawn(argv, NULL, p->err, errstr, errstr_size);
        if (!p->proc)
                return -1;
        if (!harness_wait_until(ready_or_exited, p, WAN_START_TIMEOUT_MS)) {
                snprintf(errstr, errstr_size,
                         "the proxy wrote no ready file in %d ms",
                         WAN_START_TIMEOUT_MS);
                return -1;
        }
        if (p->nports)
                return 0;
        {
                int   status = 0;
                char *log    = harness_read_file(p->err, NULL);
                harness_proc_wait(p->proc, 0, &status);
                snprintf(errstr, errstr_size, "the proxy exited (%d): %s",
                         harness_exit_code(status), log ? log : "(no output)");
                free(log);
        }
        return -1;
}

int wan_proxy_stop(struct wan_proxy *p) {
        int status = 0, rc = -1;

        if (p->proc) {
                harness_proc_signal(p->proc, SIGTERM);
                if (harness_proc_wait(p->proc, WAN_STOP_TIMEOUT_MS, &status) ==
                    AAGW_OK)
                        rc = harness_exit_code(status);
                harness_proc_destroy(p->proc);
        }
        free(p->ready);
        free(p->err);
        memset(p, 0, sizeof(*p));
        return rc;
}
