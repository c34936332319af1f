/* gateway/logsink.c: the program's log sink (stderr) and the bridge from
 * librdkafka's log callback. */
#include "gateway_int.h"

#include <stdio.h>
#include <syslog.h>

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

void gw_rdkafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                       const char *buf) {
        aagw_log_level_t l;

        (void)fac;
        if (level <= LOG_ERR)
                l = AAGW_LOG_ERROR;
        else if (level <= LOG_WARNING)
                l = AAGW_LOG_WARN;
        else if (level <= LOG_INFO)
                l = AAGW_LOG_INFO;
        else
                l = AAGW_LOG_DEBUG;
        aagw_log(l, "KAFKA", "%s: %s", rd_kafka_name(rk), buf);
}
