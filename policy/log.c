/* policy/log.c: the log line format.
 *
 * Formatting lives here so every module logs in one shape; writing the line
 * is the sink's job, installed by the program, which keeps policy/ free of
 * I/O and lets tests capture lines. */
#include "aagw_base.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

aagw_log_level_t aagw_log_level = AAGW_LOG_INFO;

static aagw_log_sink_t *log_sink;
static void            *log_opaque;

void aagw_log_set_sink(aagw_log_sink_t *sink, void *opaque) {
        log_sink   = sink;
        log_opaque = opaque;
}

int aagw_log_level_parse(const char *name) {
        static const char *names[] = {"debug", "info", "warn", "error", "off"};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcasecmp(name, names[i]))
                        return (int)i;
        if (!strcasecmp(name, "warning"))
                return AAGW_LOG_WARN;
        return -1;
}

char aagw_log_level_letter(aagw_log_level_t level) {
        static const char letters[] = "DIWE-";
        if ((unsigned)level > AAGW_LOG_OFF)
                return '?';
        return letters[level];
}

void aagw_log0(aagw_log_level_t level, const char *fac, const char *fmt, ...) {
        char            line[2048];
        struct timespec ts;
        struct tm       tm;
        size_t          n;
        va_list         ap;

        if (!log_sink)
                return;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %d %c [%s] ",
                              ts.tv_nsec / 1000000, (int)getpid(),
                              aagw_log_level_letter(level), fac);
        if (n < sizeof(line)) {
                va_start(ap, fmt);
                vsnprintf(line + n, sizeof(line) - n, fmt, ap);
                va_end(ap);
        }
        /* One event, one line: fold embedded newlines from library errors. */
        for (char *p = line; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        log_sink(level, line, log_opaque);
}

/* The properties librdkafka 2.8.0 itself flags as sensitive (_RK_SENSITIVE
 * in its rdkafka_conf.c), which its own config dump redacts.  Not all of
 * them say password, secret or token: an inline private key (ssl.key.pem)
 * does not, nor does a SASL user name.  sasl.oauthbearer.client.secret is
 * not flagged there, but its name gives it away. */
static const char *const rdkafka_sensitive[] = {
    "ssl.key.location", "ssl.key.password",      "ssl.key.pem",
    "ssl_key",          "ssl.ca.pem",            "ssl.keystore.password",
    "sasl.username",    "sasl.password",         "sasl.oauthbearer.config",
    NULL};

/* A key is secret if it mentions a password, a secret or a token anywhere
 * (matching the substring errs on the safe side: it catches
 * "sasl.oauthbearer.client.secret" and "admin.token" without a list), or
 * if its last dotted components are one of librdkafka's sensitive
 * properties: "ssl.key.pem" itself, and so
 * "clusters.east.properties.consumer.ssl.key.pem". */
bool aagw_key_is_secret(const char *key) {
        static const char *words[] = {"password", "secret", "token"};
        char               low[256];
        size_t             i, n = strlen(key);

        for (i = 0; key[i] && i < sizeof(low) - 1; i++)
                low[i] = (char)tolower((unsigned char)key[i]);
        low[i] = '\0';
        for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (strstr(low, words[i]))
                        return true;
        for (i = 0; rdkafka_sensitive[i]; i++) {
                size_t sl = strlen(rdkafka_sensitive[i]);
                if (n >= sl &&
                    !strcasecmp(key + n - sl, rdkafka_sensitive[i]) &&
                    (n == sl || key[n - sl - 1] == '.'))
                        return true;
        }
        return false;
}
