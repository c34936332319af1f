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
/* Set while the engine starts (checks, topic creation, first metadata):
 * a stop signal then also makes every wait on a Kafka answer give up
 * (aagw_kafka_process_stop()), since no loop polls the flag yet. */
extern volatile sig_atomic_t gw_starting;

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

/* Print "aagw: <message>\n" to stderr (logsink.c). */
void gw_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --------------------------- CONFIG FROM FLAGS ------------------------- */

#include "config.h"

/* Options of `run` that are not config keys. */
struct gw_run_opts {
        const char *config_path; /* -c FILE, or NULL */
        int         duration_s;  /* --duration S; 0: until a signal; -1:
                                    not given */
        bool        dump_config; /* --dump-config: print and exit */
        bool        connect;     /* --connect (config check) */
};

/* What gw_config_from_args() accepts besides the shared options. */
#define GW_OPTS_RUN     0x1 /* --duration, --dump-config */
#define GW_OPTS_CONNECT 0x2 /* --connect */

/*
 * Parse the options shared by `run` and `config check`: -c FILE, the
 * quick-start flags of the key table (--mode, --policy, ...), --cluster
 * ALIAS=BOOTSTRAPS and --set KEY=VALUE.  Flags override the file whatever
 * their order.  On success returns EXIT_OK with a loaded and validated
 * config in '*cfgp' (the caller destroys it); on failure the errors are
 * printed and the exit code returned.  'opts' (GW_OPTS_*) adds the
 * options of one command.  '-h' prints 'usage'.
 */
int gw_config_from_args(int argc, char **argv, unsigned opts,
                        void (*usage)(FILE *out), aagw_config_t **cfgp,
                        struct gw_run_opts *ro);

/* Print each of 'cfg's recorded errors as "aagw: <error>" on stderr. */
void gw_config_print_errors(const aagw_config_t *cfg);

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

/* What the engine shows its hooks: borrowed, valid during the call. */
struct gw_engine_view {
        struct aagw_flow *const *flows;
        size_t                  nflows;
        struct aagw_unify *const *unify;
        size_t                  nunify;
        bool stop_requested; /* SIGINT/SIGTERM arrived */
};

/* Optional hooks into the engine's main loop (the demo drives it so). */
struct gw_engine_hooks {
        void *opaque;
        /* Called from the main loop about once a second while flows and
         * unify stages run.  Return true to stop normally (drain, store
         * positions, exit 0).  With a tick, a stop signal no longer ends
         * the loop by itself: the tick sees 'stop_requested' and decides
         * when to return true (after its own bounded wind-down). */
        bool (*tick)(void *opaque, const struct gw_engine_view *v);
};

/* Run the flows of 'plan' until a stop signal or 'duration_s' seconds
 * (0: no limit), or until 'hooks' ask to stop ('hooks' may be NULL; it is
 * borrowed for the call).  'admin': how to serve the admin endpoint, or
 * NULL for none; its sockets (gw_admin_listen()) are the engine's from
 * now on, and it sets them to -1; the rest is borrowed for the call.
 * Returns an exit code. */
struct aagw_statedir;
struct gw_admin_conf;
int gw_engine_run(aagw_config_t *cfg, const struct gw_plan *plan,
                  struct aagw_statedir *sd, int duration_s,
                  const struct gw_engine_hooks *hooks,
                  struct gw_admin_conf *admin);

/* -------------------------------- DEMO --------------------------------- */

/* The demo (gateway/demo.c): embedded east and west clusters, a generated
 * two-DC clickstream, live lines and a checked summary on 'out'. */
typedef struct gw_demo gw_demo_t;

/* Before the state dir is opened: point gateway.state_dir at a new
 * directory under $TMPDIR unless it is set.  EXIT_OK, or an exit code with
 * the reason in 'errstr'. */
int gw_demo_state_dir(aagw_config_t *cfg, char *errstr, size_t errstr_size);

/* After it is opened (locked): EXIT_OK if 'dir' holds nothing but the
 * lock, else EXIT_USAGE with the reason. */
int gw_demo_check_state_dir(const char *dir, char *errstr,
                            size_t errstr_size);

/* Start the clusters, create the demo's topics and put the bootstraps and
 * the demo's unify settings into 'cfg' (keys the user set are kept).
 * 'duration_s' seconds of traffic, 0: until a stop signal.  NULL with the
 * reason on error. */
gw_demo_t *gw_demo_new(aagw_config_t *cfg, int duration_s, FILE *out,
                       char *errstr, size_t errstr_size);

/* The engine hooks that drive the demo; valid while 'd' lives. */
void gw_demo_hooks(gw_demo_t *d, struct gw_engine_hooks *h);

/* After gw_engine_run() returned 'engine_rc': the exit code (1 if an
 * invariant failed or the checks never ran). */
int gw_demo_finish(gw_demo_t *d, int engine_rc);

/* Stop the generator and the clusters; after the engine.  NULL: no-op. */
void gw_demo_destroy(gw_demo_t *d);

/* -------------------------------- ADMIN -------------------------------- */

#include "aagw_replicator.h"

/* What the admin endpoint shows; everything borrowed and stable while the
 * endpoint runs. */
struct gw_admin_view {
        const char   *gateway_id, *site, *mode;
        time_t        started;
        aagw_flow_t **flows;
        size_t        nflows;
        struct aagw_unify **unify;
        size_t        nunify;
        /* Pauses asked for through the endpoint, per flow (written by the
         * endpoint's thread only), and the file in the state dir that
         * keeps them across restarts (NULL: not kept). */
        bool         *paused;
        const char   *pause_file;
        /* Scale-out: this process's member name and the owner groups of
         * the site as their coordinators describe them (NULL: one
         * process serves the site). */
        const char     *member;
        aagw_members_t *members;
};

/* Bind and listen on 'listen' (HOST:PORT, port 0 picks one) for the
 * admin endpoint: done first thing after the state dir lock, so a port in
 * use refuses the start before any flow runs.  The socket, or -1 with the
 * reason in 'errstr'. */
int gw_admin_listen(const char *listen, char *errstr, size_t errstr_size);

/* The admin endpoint's TLS material (admin.tls.*), read at start: PEM
 * text, NUL-terminated; a member is NULL when its key is unset, all of
 * them when TLS is off. */
struct gw_admin_tls {
        char *cert, *key, *key_password, *client_ca;
};

/* Read and check the files the admin.tls.* keys of 'cfg' name (admin_tls.c):
 * each is PEM, the key decrypts with admin.tls.key_password (and that is
 * set only for an encrypted key), the key matches the certificate.  With
 * no admin.tls.cert: 0 and 't' empty.  -1 with "KEY: FILE: why" in
 * 'errstr'.  Call gw_admin_tls_deinit() either way. */
int gw_admin_tls_init(struct gw_admin_tls *t, const aagw_config_t *cfg,
                      char *errstr, size_t errstr_size);
/* Free what 't' holds, wiping the key and its password first. */
void gw_admin_tls_deinit(struct gw_admin_tls *t);

/* How the admin endpoint serves. */
struct gw_admin_conf {
        int         fd;        /* from gw_admin_listen() */
        int         health_fd; /* plain /healthz and /metrics, or -1 */
        const char *token;     /* bearer token; NULL: none */
        /* NULL, or no cert in it: plain HTTP.  Borrowed: must stay valid
         * until gw_admin_stop(). */
        const struct gw_admin_tls *tls;
};

/* Serve the admin HTTP endpoint on the sockets of 'conf' (from
 * gw_admin_listen(), owned by the endpoint from now on, closed on failure
 * too).  NULL with the reason on error. */
struct gw_admin *gw_admin_start(const struct gw_admin_conf *conf,
                                const struct gw_admin_view *view,
                                char *errstr, size_t errstr_size);
/* "HOST:PORT" actually bound; borrowed. */
const char *gw_admin_addr(const struct gw_admin *a);
/* The same for the health listener; NULL without one. */
const char *gw_admin_health_addr(const struct gw_admin *a);
/* true if the endpoint speaks HTTPS. */
bool gw_admin_is_tls(const struct gw_admin *a);

/* The flows paused through the admin endpoint are kept in this file of
 * the state dir, one flow name ("east->west") a line, so a restart keeps
 * them paused. */
#define GW_PAUSE_FILE "paused-flows"

/* Set paused[i] for each of the 'n' flow names ("east->west") that 'path'
 * lists (a missing file pauses none).  Names of flows not running now
 * are logged and dropped at the next save.  0, or -1 with the reason in
 * 'errstr'. */
int gw_pauses_load(const char *path, const char *const *names, size_t n,
                   bool *paused, char *errstr, size_t errstr_size);

/* Write the names of the flows with paused[i] set to 'path' (through a
 * temporary file, renamed and synced: never half-written); none: the file
 * is removed.  0, or -1 with the reason in 'errstr'. */
int gw_pauses_save(const char *path, aagw_flow_t *const *flows, size_t n,
                   const bool *paused, char *errstr, size_t errstr_size);
/* Stop and free; NULL is a no-op. */
void gw_admin_stop(struct gw_admin *a);

/* Split "HOST:PORT" or "[V6]:PORT": the host goes to 'host' (brackets
 * dropped); returns a pointer to the ':' before the port, or NULL if
 * 'addr' has neither shape. */
const char *gw_split_hostport(const char *addr, char *host, size_t size);

/* true for "localhost" and literal loopback addresses (127.0.0.0/8, ::1,
 * ::ffff:127.x.y.z); a host name that merely starts with "127." is not. */
bool gw_host_is_loopback(const char *host);

/* `aagw status`. */
int gw_cmd_status(int argc, char **argv);

/* `aagw audit` (cli_audit.c). */
int gw_cmd_audit(int argc, char **argv);

/* The file in the state dir where a running gateway writes its admin
 * address, so `aagw status --state-dir DIR` finds it. */
#define GW_ADMIN_ADDR_FILE "admin.addr"

/* -------------------------------- UNIFY -------------------------------- */

/* Derive the flows from gateway.mode / replication.flows, narrowed to
 * gateway.site when set.  -1 with the reason when nothing is left. */
int gw_plan_flows(const aagw_config_t *cfg, struct gw_plan *p, char *errstr,
                  size_t errstr_size);

/* `aagw config check --connect` (connect_check.c): log in to every
 * cluster of 'cfg' and check the operations aagw needs there, one line
 * per cluster and check on 'out'.  EXIT_OK when all pass, EXIT_RUNTIME
 * (the failures named on stderr) when one fails. */
int gw_connect_check(const aagw_config_t *cfg, FILE *out);

/* Whether any topic is unified: unify.mode, or a per-topic mode. */
bool gw_unify_wanted(const aagw_config_t *cfg);

/* How logical topic 'name' is unified: its mode (unify.topics.NAME.mode
 * over unify.mode; never GW_UNIFY_INHERIT), and unless GW_UNIFY_OFF its
 * output topic in 'out' (unify.topics.NAME.output, or NAME and
 * unify.suffix; empty when that would not fit in 'size'). */
enum gw_unify_mode gw_unify_topic(const aagw_config_t *cfg, const char *name,
                                  char *out, size_t size);

/* ------------------------------- OFFSETS COMMANDS ----------------------- */

/* `aagw offsets`, `aagw failover`, `aagw drill` (cli_offsets.c). */
int gw_cmd_offsets(int argc, char **argv);
int gw_cmd_failover(int argc, char **argv);
int gw_cmd_drill(int argc, char **argv);

/* The replication policy built from 'cfg' (engine.c). */
aagw_repl_policy_t *gw_policy_new(const aagw_config_t *cfg, char *err,
                                  size_t errsize);

/* 0 if replication.separator suits every cluster alias (as the policy
 * will check at start), else -1 with the reason in 'err'. */
int gw_separator_check(const aagw_config_t *cfg, char *err, size_t errsize);

/* The same for flow 'src'->'dst': its replication.per_flow topic lists
 * replace the global ones where set.  Caller destroys it. */
aagw_repl_policy_t *gw_policy_new_flow(const aagw_config_t *cfg,
                                       const char *src, const char *dst,
                                       char *err, size_t errsize);

/* Whether flow 'src'->'dst' has a topic list of its own
 * (replication.per_flow), so it needs a policy of its own. */
bool gw_flow_has_own_topics(const aagw_config_t *cfg, const char *src,
                            const char *dst);

#endif /* AAGW_GATEWAY_INT_H */
