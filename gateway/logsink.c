/* gateway/logsink.c: the program's log sink (stderr), and the one-line
 * "aagw: reason" messages of the commands.  librdkafka's lines reach the
 * sink through aagw_kafka_log_cb() (replicator/). */
#include "gateway_int.h"

#include <stdarg.h>
#include <stdio.h>

static void stderr_sink(aagw_log_level_t level, const char *line,
                        void *opaque) {
        (void)level;
        (void)opaque;
        /* One fputs per line: stdio locks the stream, so lines from
         * different threads never interleave. */
        flockfile(stderr);
        fputs(line, stderr);
        fputc('\n', stderr);
        funlockfile(stderr);
}

void gw_log_init(aagw_log_level_t level) {
        aagw_log_level = level;
        aagw_log_set_sink(stderr_sink, NULL);
}

/* In the library, not in main.c: every command file calls it, and a test
 * that links the library without the program's main() must link too. */
void gw_errorf(const char *fmt, ...) {
        va_list ap;

        flockfile(stderr);
        fputs("aagw: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        funlockfile(stderr);
}
