/* gateway/logsink.c: the program's log sink (stderr).  librdkafka's lines
 * reach it through aagw_kafka_log_cb() (replicator/). */
#include "gateway_int.h"

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
