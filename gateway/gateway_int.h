/*
 * gateway/gateway_int.h: declarations shared by the files of gateway/ and
 * its tests.  Not for other folders.
 */
#ifndef AAGW_GATEWAY_INT_H
#define AAGW_GATEWAY_INT_H

#include <signal.h>
#include <stdbool.h>
#include <time.h>

#include "aagw_gateway.h"

/* Exit codes of every command: scripts tell "fix the command" (2) apart
 * from "the cluster or the data is broken" (1). */
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* Returned by option parsers when --help was printed: exit 0. */
#define GW_HELP_SHOWN (-1)

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

/* -------------------------------- CLI ---------------------------------- */

/* Every command takes argv with argv[0] set to "aagw <command>" and
 * returns an exit code.  Errors go to stderr as "aagw: reason". */
int gw_cmd_run(int argc, char **argv);
int gw_cmd_config(int argc, char **argv);
int gw_cmd_sandbox(int argc, char **argv);

/* Print "aagw: <message>\n" to stderr. */
void gw_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

/* --------------------------- CONFIG FROM FLAGS ------------------------- */

#include "config.h"

/* Options of `run` that are not config keys. */
struct gw_run_opts {
        const char *config_path; /* -c FILE, or NULL */
        int         duration_s;  /* --duration S, 0: until a signal */
        bool        dump_config; /* --dump-config: print and exit */
};

/*
 * Parse the options shared by `run` and `config check`: -c FILE, the
 * quick-start flags of the key table (--mode, --policy, ...), --cluster
 * ALIAS=BOOTSTRAPS and --set KEY=VALUE.  Flags override the file whatever
 * their order.  On success returns EXIT_OK with a loaded and validated
 * config in '*cfgp' (the caller destroys it); on failure the errors are
 * printed and the exit code returned.  'with_run_opts' also accepts the
 * run-only options (--duration, --dump-config).  '-h' prints 'usage'.
 */
int gw_config_from_args(int argc, char **argv, bool with_run_opts,
                        void (*usage)(FILE *out), aagw_config_t **cfgp,
                        struct gw_run_opts *ro);

/* The quick-start flag list for usage texts. */
void gw_config_flags_usage(FILE *out);

/* -------------------------------- PLAN --------------------------------- */

#define GW_MAX_FLOWS 64

/* The replication flows one process runs. */
struct gw_plan {
        struct {
                char src[65], dst[65];
        } flows[GW_MAX_FLOWS];
        size_t nflows;
};

/* Run the flows of 'plan' until a stop signal or 'duration_s' seconds
 * (0: no limit).  Returns an exit code. */
struct aagw_statedir;
int gw_engine_run(aagw_config_t *cfg, const struct gw_plan *plan,
                  struct aagw_statedir *sd, int duration_s);

/* -------------------------------- ADMIN -------------------------------- */

#include "aagw_replicator.h"

/* What the admin endpoint shows; everything borrowed and stable while the
 * endpoint runs. */
struct gw_admin_view {
        const char   *gateway_id, *site, *mode;
        time_t        started;
        aagw_flow_t **flows;
        size_t        nflows;
};

/* Start the admin HTTP endpoint on 'listen' (HOST:PORT, port 0 picks one);
 * 'token' NULL means no authentication.  NULL with the reason on error. */
struct gw_admin *gw_admin_start(const char *listen, const char *token,
                                const struct gw_admin_view *view,
                                char *errstr, size_t errstr_size);
/* "HOST:PORT" actually bound; borrowed. */
const char *gw_admin_addr(const struct gw_admin *a);
/* Stop and free; NULL is a no-op. */
void gw_admin_stop(struct gw_admin *a);

/* Split "HOST:PORT" or "[V6]:PORT": the host goes to 'host' (brackets
 * dropped); returns a pointer to the ':' before the port, or NULL if
 * 'addr' has neither shape. */
const char *gw_split_hostport(const char *addr, char *host, size_t size);

/* `aagw status`. */
int gw_cmd_status(int argc, char **argv);

/* The file in the state dir where a running gateway writes its admin
 * address, so `aagw status --state-dir DIR` finds it. */
#define GW_ADMIN_ADDR_FILE "admin.addr"

/* Derive the flows from gateway.mode / replication.flows, narrowed to
 * gateway.site when set.  -1 with the reason when nothing is left. */
int gw_plan_flows(const aagw_config_t *cfg, struct gw_plan *p, char *errstr,
                  size_t errstr_size);

/* ------------------------- OFFSETS COMMANDS (offsets issue) ------------- */

/* `aagw offsets`, `aagw failover`, `aagw drill` (cli_offsets.c). */
int gw_cmd_offsets(int argc, char **argv);
int gw_cmd_failover(int argc, char **argv);
int gw_cmd_drill(int argc, char **argv);

/* The replication policy built from 'cfg' (engine.c). */
aagw_repl_policy_t *gw_policy_new(const aagw_config_t *cfg, char *err,
                                  size_t errsize);
