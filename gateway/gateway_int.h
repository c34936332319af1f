/*
 * gateway/gateway_int.h: declarations shared by the files of gateway/ and
 * its tests.  Not for other folders.
 */
#ifndef AAGW_GATEWAY_INT_H
#define AAGW_GATEWAY_INT_H

#include <signal.h>
#include <stdbool.h>

#include "aagw_gateway.h"

/* Exit codes of every command: scripts tell "fix the command" (2) apart
 * from "the cluster or the data is broken" (1). */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* ------------------------------- SIGNALS ------------------------------- */

/* Set by SIGINT/SIGTERM handlers; never written anywhere else.  Handlers do
 * nothing but set it. */
extern volatile sig_atomic_t gw_stop_signal;

/* Install SIGINT/SIGTERM handlers that set gw_stop_signal, ignore SIGPIPE. */
void gw_signals_install(void);

/* Sleep up to 'ms' milliseconds, returning early (true) once a stop signal
 * arrived. */
bool gw_wait_stop(int ms);

/* ------------------------------- LOGGING ------------------------------- */

/* Route aagw_log() lines to stderr at 'level'. */
void gw_log_init(aagw_log_level_t level);

/* librdkafka log_cb that forwards into aagw_log() under facility KAFKA. */
void gw_rdkafka_log_cb(const rd_kafka_t *rk, int level, const char *fac,
                       const char *buf);

/* -------------------------------- CLI ---------------------------------- */

/* Every command takes argv with argv[0] set to "aagw <command>" and
 * returns an exit code.  Errors go to stderr as "aagw: reason". */
int gw_cmd_run(int argc, char **argv);
int gw_cmd_config(int argc, char **argv);
int gw_cmd_sandbox(int argc, char **argv);

/* Print "aagw: <message>\n" to stderr. */
void gw_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
