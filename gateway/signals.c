/* gateway/signals.c: stop requests from SIGINT/SIGTERM.
 *
 * The handlers only set a flag; every loop in the program polls it through
 * gw_wait_stop(), so shutdown runs on ordinary threads where it may log,
 * flush and write state. */
#include "gateway_int.h"

#include "aagw_replicator.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile sig_atomic_t gw_stop_signal;
volatile sig_atomic_t gw_starting;

static void on_stop(int sig) {
        gw_stop_signal = sig;
        /* A lock-free atomic store: safe in a handler. */
        if (gw_starting)
                aagw_kafka_process_stop(true);
}

void gw_signals_install(void) {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_stop;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &sa, NULL);
}

bool gw_wait_stop(int ms) {
        while (ms > 0 && !gw_stop_signal) {
                int             step = ms < 50 ? ms : 50;
                struct timespec ts   = {0, (long)step * 1000000L};
                while (nanosleep(&ts, &ts) == -1 && errno == EINTR &&
                       !gw_stop_signal)
                        ;
                ms -= step;
        }
        return gw_stop_signal != 0;
}
