/*
 * tests/unit/test_audit.c: `aagw audit` end to end: a real store filled
 * through the batch API the way the unify stage fills it, then the real
 * `aagw` binary (AAGW_BIN) queried in table and JSON modes.
 *
 * Times are real (the binary's clock is the wall clock): the entries sit
 * in the last few minutes, inside both the window and the default --since.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "aagw_dedup.h"
#include "harness.h"

static char    tmpdir[] = "/tmp/aagw-audit-XXXXXX";
static char    maindir[600]; /* the store most tests query (90m window) */
static int64_t t0;           /* time of the first entry, whole seconds */

/* --------------------------------------------------------------- helpers */

struct result {
        int  status; /* exit code, or 128+signal */
        char out[65536];
        char err[65536];
};
static struct result r;

/* Run aagw with the NULL-terminated arguments, stdin empty (the
 * harness's runner: stdout and stderr captured, a deadline). */
static void run(struct result *res, ...) {
        const char      *argv[64];
        int              argc = 0;
        va_list          ap;
        harness_output_t o;
        char             err[256];

        argv[argc++] = harness_aagw_bin();
        assert_non_null(argv[0]);
        va_start(ap, res);
        while (argc < 63 && (argv[argc] = va_arg(ap, const char *)))
                argc++;
        va_end(ap);
        argv[argc] = NULL;
        if (harness_run(argv, NULL, 0, 60000, &o, err, sizeof(err)) !=
            AAGW_OK)
                fail_msg("aagw: %s", err);
        res->status = harness_exit_code(o.status);
        snprintf(res->out, sizeof(res->out), "%s", o.out);
        snprintf(res->err, sizeof(res->err), "%s", o.err);
        harness_output_deinit(&o);
}

static int64_t wall_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The ISO form the tables use, for whole-second times plus 'ms'. */
static const char *iso(int64_t t) {
        static char buf[8][40];
        static int  i;
        char       *b = buf[i++ % 8];
        time_t      s = (time_t)(t / 1000);
        struct tm   tm;
        gmtime_r(&s, &tm);
        size_t n = strftime(b, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(b + n, 40 - n, ".%03dZ", (int)(t % 1000));
        return b;
}

/* The JSON objects of 'text', one per line. */
struct lines {
        json_object *o[64];
        size_t       n;
};

static void parse_lines(const char *text, struct lines *l) {
        char *copy = strdup(text), *save = NULL;
        l->n = 0;
        for (char *s = strtok_r(copy, "\n", &save); s;
             s       = strtok_r(NULL, "\n", &save)) {
                json_object *o = json_tokener_parse(s);
                if (!o)
                        fail_msg("not JSON: %s", s);
                assert_true(l->n < 64);
                l->o[l->n++] = o;
        }
        free(copy);
}

static void free_lines(struct lines *l) {
        for (size_t i = 0; i < l->n; i++)
                json_object_put(l->o[i]);
        l->n = 0;
}

static const char *jstr(json_object *o, const char *k) {
        json_object *v;
        if (!json_object_object_get_ex(o, k, &v))
                fail_msg("no \"%s\" in %s", k, json_object_to_json_string(o));
        return json_object_get_string(v);
}

static int64_t jint(json_object *o, const char *k) {
        json_object *v;
        if (!json_object_object_get_ex(o, k, &v))
                fail_msg("no \"%s\" in %s", k, json_object_to_json_string(o));
        return json_object_get_int64(v);
}

static bool jhas(json_object *o, const char *k) {
        return json_object_object_get_ex(o, k, NULL);
}

/* ------------------------------------------------------------- the data */

struct ent {
        int64_t              dt; /* ms after t0 */
        aagw_audit_verdict_t v;
        const char          *site, *origin, *topic;
        int32_t              part;
        int64_t              off;
        uint64_t             hlc;
        const char          *id;
        size_t               id_len; /* 0: strlen */
        const char          *ekey;
};

#define BAD_ID "bad\x01\xff"

/* What the unify stages at east and west recorded: dedup of click-1 and
 * click-2 (a duplicate from each site, one replayed), an id that is not
 * UTF-8, last-write-wins versions of user-7, one rejected record. */
static const struct ent ents[] = {
    {0, AAGW_AUDIT_ACCEPTED, "east", "west", "west.clicks", 3, 100, 11,
     "click-1", 0, NULL},
    {500, AAGW_AUDIT_ACCEPTED, "east", "east", "clicks", 0, 5, 12, "click-2", 0,
     NULL},
    {1000, AAGW_AUDIT_DROPPED, "east", "east", "clicks", 1, 7, 13, "click-1", 0,
     NULL},
    {2000, AAGW_AUDIT_DROPPED, "east", "west", "west.clicks", 3, 101, 11,
     "click-1", 0, NULL},
    {2500, AAGW_AUDIT_DROPPED, "west", "east", "east.clicks", 0, 5, 12,
     "click-2", 0, NULL},
    {3000, AAGW_AUDIT_ACCEPTED, "east", "east", "clicks", 2, 9, 14, BAD_ID, 5,
     NULL},
    /* lww (indexed part ends here: the store is flushed after these) */
    {4000, AAGW_AUDIT_ACCEPTED, "east", "east", "profiles", 1, 40, 1000, "v1",
     0, "user-7"},
    {5000, AAGW_AUDIT_SUPERSEDED, "east", "west", "west.profiles", 1, 41, 900,
     "v0", 0, "user-7"},
    {6000, AAGW_AUDIT_IDENTICAL, "east", "east", "east.profiles", 1, 40, 1000,
     "v1", 0, "user-7"},
    {7000, AAGW_AUDIT_ACCEPTED, "east", "west", "west.profiles", 1, 42, 2000,
     "v2", 0, "user-7"},
    {8000, AAGW_AUDIT_REJECTED, "east", "west", "west.clicks", 2, 50, 0, "junk",
     0, NULL},
};
#define NENTS (sizeof(ents) / sizeof(ents[0]))

static struct aagw_audit to_audit(const struct ent *e) {
        struct aagw_audit a;
        memset(&a, 0, sizeof(a));
        a.time_ms   = t0 + e->dt;
        a.verdict   = e->v;
        a.site      = e->site;
        a.origin    = e->origin;
        a.topic     = e->topic;
        a.partition = e->part;
        a.offset    = e->off;
        a.hlc       = e->hlc;
        a.id        = e->id;
        a.id_len    = e->id_len ? e->id_len : strlen(e->id);
        a.ekey      = e->ekey;
        a.ekey_len  = e->ekey ? strlen(e->ekey) : 0;
        return a;
}

static struct aagw_seen mk_seen(const struct ent *e) {
        struct aagw_seen s;
        memset(&s, 0, sizeof(s));
        s.time_ms = t0 + e->dt;
        s.hlc     = e->hlc;
        snprintf(s.site, sizeof(s.site), "%s", e->site);
        snprintf(s.origin, sizeof(s.origin), "%s", e->origin);
        snprintf(s.topic, sizeof(s.topic), "%s", e->topic);
        s.partition = e->part;
        s.offset    = e->off;
        return s;
}

/* Commit ents[lo..hi) as the unify stage would: an accepted dedup entry
 * comes with its seen id, an accepted lww entry with the new winner. */
static void commit_ents(aagw_store_t *st, size_t lo, size_t hi) {
        aagw_store_batch_t *b = aagw_store_batch_new(st);
        char                err[512];

        assert_non_null(b);
        for (size_t i = lo; i < hi; i++) {
                const struct ent *e = &ents[i];
                struct aagw_audit a = to_audit(e);
                uint8_t           k[16];
                assert_int_equal(aagw_store_batch_audit(b, &a), AAGW_OK);
                if (e->v != AAGW_AUDIT_ACCEPTED)
                        continue;
                if (!e->ekey) {
                        struct aagw_seen s = mk_seen(e);
                        aagw_scoped_key(e->site, a.id, a.id_len, k);
                        assert_int_equal(aagw_store_batch_seen(b, k, &s),
                                         AAGW_OK);
                } else {
                        struct aagw_lww l;
                        memset(&l, 0, sizeof(l));
                        l.time_ms = a.time_ms;
                        l.v.hlc   = e->hlc;
                        snprintf(l.v.origin, sizeof(l.v.origin), "%s",
                                 e->origin);
                        l.v.id_len = a.id_len;
                        memcpy(l.v.id, a.id, a.id_len);
                        char scope[128];
                        snprintf(scope, sizeof(scope), "%s/profiles",
                                 e->site);
                        aagw_scoped_key(scope, e->ekey, strlen(e->ekey), k);
                        assert_int_equal(aagw_store_batch_lww(b, k, &l),
                                         AAGW_OK);
                }
        }
        if (aagw_store_batch_commit(b, err, sizeof(err)))
                fail_msg("commit: %s", err);
        aagw_store_batch_destroy(b);
}

static int group_setup(void **state) {
        struct aagw_store_opts o = {.cache_mb = 8, .window_ms = 90 * 60000};
        char                   err[512];
        aagw_statedir_t       *sd;
        aagw_store_t          *st;
        (void)state;

        if (!mkdtemp(tmpdir))
                return -1;
        t0 = (wall_ms() - 120000) / 1000 * 1000;
        snprintf(maindir, sizeof(maindir), "%s/main", tmpdir);
        if (!(sd = aagw_statedir_open(maindir, err, sizeof(err))) ||
            !(st = aagw_store_open(sd, &o, err, sizeof(err)))) {
                fprintf(stderr, "store: %s\n", err);
                return -1;
        }
        /* Half indexed (SST files), half still in the journal. */
        commit_ents(st, 0, 6);
        if (aagw_store_flush(st, err, sizeof(err)))
                return -1;
        commit_ents(st, 6, NENTS);
        aagw_store_close(st);
        aagw_statedir_close(sd);
        return 0;
}

static int group_teardown(void **state) {
        char cmd[256];
        (void)state;
        if (getenv("AAGW_TEST_KEEP")) { /* for looking at the output */
                fprintf(stderr, "kept %s\n", tmpdir);
                return 0;
        }
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

/* ----------------------------------------------------------------- tests */

/* audit id: the first-seen line from the seen store, then the entries:
 * the first accepted is "first seen", the later ones dropped, where and
 * when, in an aligned table. */
static void test_id_table(void **state) {
        char want[4096];
        (void)state;

        run(&r, "audit", "id", "click-1", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        snprintf(want, sizeof(want),
                 "id:          click-1\n"
                 "first seen:  %s at east (origin west, west.clicks [3] "
                 "offset 100)\n"
                 "window:      90m\n"
                 "\n"
                 "TIME                      EVENT       SITE  ORIGIN  TOPIC"
                 "        PARTITION  OFFSET\n"
                 "%s  first seen  east  west    west.clicks          3     "
                 "100\n"
                 "%s  dropped     east  east    clicks               1       "
                 "7\n"
                 "%s  dropped     east  west    west.clicks          3     "
                 "101\n",
                 iso(t0), iso(t0), iso(t0 + 1000), iso(t0 + 2000));
        assert_string_equal(r.out, want);
}

static void test_id_json(void **state) {
        struct lines l;
        (void)state;

        run(&r, "audit", "id", "click-2", "--json", "--state-dir", maindir,
            NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 3);
        assert_string_equal(jstr(l.o[0], "type"), "first_seen");
        assert_string_equal(jstr(l.o[0], "id"), "click-2");
        assert_int_equal(jint(l.o[0], "time_ms"), t0 + 500);
        assert_string_equal(jstr(l.o[0], "time"), iso(t0 + 500));
        assert_string_equal(jstr(l.o[0], "site"), "east");
        assert_string_equal(jstr(l.o[0], "origin"), "east");
        assert_string_equal(jstr(l.o[0], "topic"), "clicks");
        assert_int_equal(jint(l.o[0], "partition"), 0);
        assert_int_equal(jint(l.o[0], "offset"), 5);
        assert_int_equal(jint(l.o[0], "hlc"), 12);

        assert_string_equal(jstr(l.o[1], "type"), "audit");
        assert_string_equal(jstr(l.o[1], "event"), "first_seen");
        assert_string_equal(jstr(l.o[1], "verdict"), "accepted");
        assert_int_equal(jint(l.o[1], "time_ms"), t0 + 500);

        /* The duplicate dropped at west, where it came from. */
        assert_string_equal(jstr(l.o[2], "event"), "dropped");
        assert_string_equal(jstr(l.o[2], "verdict"), "dropped");
        assert_string_equal(jstr(l.o[2], "site"), "west");
        assert_string_equal(jstr(l.o[2], "origin"), "east");
        assert_string_equal(jstr(l.o[2], "topic"), "east.clicks");
        assert_int_equal(jint(l.o[2], "partition"), 0);
        assert_int_equal(jint(l.o[2], "offset"), 5);
        assert_int_equal(jint(l.o[2], "time_ms"), t0 + 2500);
        assert_string_equal(jstr(l.o[2], "time"), iso(t0 + 2500));
        assert_string_equal(jstr(l.o[2], "id"), "click-2");
        assert_false(jhas(l.o[2], "key"));
        assert_false(jhas(l.o[2], "id_hex"));
        free_lines(&l);
}

/* audit key: the current winner first, then every version in the window,
 * oldest first. */
static void test_key(void **state) {
        struct lines l;
        char         want[4096];
        (void)state;

        run(&r, "audit", "key", "user-7", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        snprintf(want, sizeof(want),
                 "key:     user-7\n"
                 "winner:  profiles at east: id v2, origin west, hlc 2000, "
                 "won at %s\n"
                 "window:  90m\n"
                 "\n"
                 "TIME                      VERDICT     SITE  ORIGIN  TOPIC"
                 "          PARTITION  OFFSET   HLC  ID\n"
                 "%s  accepted    east  east    profiles               1"
                 "      40  1000  v1\n"
                 "%s  superseded  east  west    west.profiles          1"
                 "      41   900  v0\n"
                 "%s  identical   east  east    east.profiles          1"
                 "      40  1000  v1\n"
                 "%s  accepted    east  west    west.profiles          1"
                 "      42  2000  v2\n",
                 iso(t0 + 7000), iso(t0 + 4000), iso(t0 + 5000), iso(t0 + 6000),
                 iso(t0 + 7000));
        assert_string_equal(r.out, want);

        run(&r, "audit", "key", "user-7", "--json", "--state-dir", maindir,
            NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 5);
        assert_string_equal(jstr(l.o[0], "type"), "winner");
        assert_string_equal(jstr(l.o[0], "key"), "user-7");
        assert_string_equal(jstr(l.o[0], "id"), "v2");
        assert_string_equal(jstr(l.o[0], "site"), "east");
        assert_string_equal(jstr(l.o[0], "topic"), "profiles");
        assert_string_equal(jstr(l.o[0], "origin"), "west");
        assert_int_equal(jint(l.o[0], "hlc"), 2000);
        assert_int_equal(jint(l.o[0], "time_ms"), t0 + 7000);
        assert_false(json_object_get_boolean(
            json_object_object_get(l.o[0], "tombstone")));
        const char *verdicts[] = {"accepted", "superseded", "identical",
                                  "accepted"};
        for (size_t i = 0; i < 4; i++) {
                assert_string_equal(jstr(l.o[i + 1], "type"), "audit");
                assert_string_equal(jstr(l.o[i + 1], "verdict"), verdicts[i]);
                assert_string_equal(jstr(l.o[i + 1], "key"), "user-7");
                assert_false(json_object_get_boolean(
                    json_object_object_get(l.o[i + 1], "key_truncated")));
                assert_false(jhas(l.o[i + 1], "event"));
        }
        assert_int_equal(jint(l.o[2], "hlc"), 900);
        assert_string_equal(jstr(l.o[2], "id"), "v0");
        free_lines(&l);
}

/* Unknown ids and keys: exit 1, the window the gateway's store uses. */
static void test_not_found(void **state) {
        (void)state;

        run(&r, "audit", "id", "nope", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_string_equal(
            r.err, "aagw: audit: id 'nope' not found in the last 90m window\n");
        run(&r, "audit", "key", "nobody", "--json", "--state-dir", maindir,
            NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_string_equal(
            r.err,
            "aagw: audit: key 'nobody' not found in the last 90m window\n");
        /* A key too long to echo whole (keys have no length limit). */
        char longkey[3001];
        memset(longkey, 'K', 3000);
        longkey[3000] = '\0';
        run(&r, "audit", "key", longkey, "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 1);
        assert_true(!strncmp(r.err, "aagw: audit: key 'KKKK", 22));
        assert_non_null(
            strstr(r.err, "K...' not found in the last 90m window\n"));
        assert_true(strlen(r.err) < 1100);
        /* An id's key (user-7) is not an id. */
        run(&r, "audit", "id", "user-7", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 1);
}

/* recent: the newest entries, oldest first, --verdict and --limit. */
static void test_recent(void **state) {
        struct lines l;
        (void)state;

        run(&r, "audit", "recent", "--json", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        parse_lines(r.out, &l);
        assert_int_equal(l.n, NENTS);
        for (size_t i = 0; i < NENTS; i++) {
                assert_int_equal(jint(l.o[i], "time_ms"), t0 + ents[i].dt);
                assert_string_equal(jstr(l.o[i], "verdict"),
                                    aagw_audit_verdict_name(ents[i].v));
                assert_string_equal(jstr(l.o[i], "site"), ents[i].site);
                assert_int_equal(jint(l.o[i], "offset"), ents[i].off);
                assert_int_equal(jhas(l.o[i], "key"), ents[i].ekey != NULL);
        }
        free_lines(&l);

        run(&r, "audit", "recent", "--verdict", "dropped", "--json",
            "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 3);
        assert_int_equal(jint(l.o[0], "time_ms"), t0 + 1000);
        assert_int_equal(jint(l.o[1], "time_ms"), t0 + 2000);
        assert_int_equal(jint(l.o[2], "time_ms"), t0 + 2500);
        free_lines(&l);

        /* The newest two, newest last, and how many were left out. */
        char want[2048];
        run(&r, "audit", "recent", "--limit", "2", "--since", "1h",
            "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        snprintf(want, sizeof(want),
                 "TIME                      VERDICT   SITE  ORIGIN  TOPIC"
                 "          PARTITION  OFFSET  ID    KEY\n"
                 "%s  accepted  east  west    west.profiles          1"
                 "      42  v2    user-7\n"
                 "%s  rejected  east  west    west.clicks            2"
                 "      50  junk  -\n"
                 "(9 older entries not shown; raise --limit)\n",
                 iso(t0 + 7000), iso(t0 + 8000));
        assert_string_equal(r.out, want);

        /* --since 1s: nothing that recent (the newest is ~2 minutes old). */
        run(&r, "audit", "recent", "--since", "1s", "--state-dir", maindir,
            NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.out, "(no audit entries)\n");
}

/* Ids that are not UTF-8: \xNN in tables; in JSON the same text plus the
 * raw bytes in hex.  The id given as raw bytes on the command line. */
static void test_non_utf8(void **state) {
        struct lines l;
        (void)state;

        run(&r, "audit", "recent", "--verdict", "accepted", "--limit", "1",
            "--since", "1h", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        run(&r, "audit", "id", BAD_ID, "--json", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 2);
        assert_string_equal(jstr(l.o[0], "type"), "first_seen");
        assert_string_equal(jstr(l.o[0], "id"), "bad\\x01\\xff");
        assert_string_equal(jstr(l.o[0], "id_hex"), "62616401ff");
        assert_string_equal(jstr(l.o[1], "id"), "bad\\x01\\xff");
        assert_string_equal(jstr(l.o[1], "event"), "first_seen");
        free_lines(&l);
        run(&r, "audit", "id", BAD_ID, "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_true(!strncmp(r.out, "id:          bad\\x01\\xff\n", 25));
        /* Printable UTF-8 is shown as it is; a backslash doubled. */
        run(&r, "audit", "id", "caf\xc3\xa9\\", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.err, "aagw: audit: id 'caf\xc3\xa9\\\\' not "
                                   "found in the last 90m window\n");
}

/* summary: counts per verdict, origin and topic. */
static void test_summary(void **state) {
        struct lines l;
        (void)state;

        run(&r, "audit", "summary", "--json", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        parse_lines(r.out, &l);
        /* summary, 2 origins (east, west), 6 topics */
        assert_int_equal(l.n, 1 + 2 + 6);
        assert_string_equal(jstr(l.o[0], "type"), "summary");
        assert_string_equal(jstr(l.o[0], "window"), "90m");
        assert_int_equal(jint(l.o[0], "window_ms"), 90 * 60000);
        assert_int_equal(jint(l.o[0], "entries"), 11);
        assert_int_equal(jint(l.o[0], "accepted"), 5);
        assert_int_equal(jint(l.o[0], "dropped"), 3);
        assert_int_equal(jint(l.o[0], "superseded"), 1);
        assert_int_equal(jint(l.o[0], "identical"), 1);
        assert_int_equal(jint(l.o[0], "rejected"), 1);
        /* Origins sorted by name: east 6 (3 accepted, 2 dropped, 1
         * identical), west 5. */
        assert_string_equal(jstr(l.o[1], "type"), "origin");
        assert_string_equal(jstr(l.o[1], "origin"), "east");
        assert_int_equal(jint(l.o[1], "entries"), 6);
        assert_int_equal(jint(l.o[1], "accepted"), 3);
        assert_int_equal(jint(l.o[1], "dropped"), 2);
        assert_int_equal(jint(l.o[1], "identical"), 1);
        assert_string_equal(jstr(l.o[2], "origin"), "west");
        assert_int_equal(jint(l.o[2], "entries"), 5);
        assert_int_equal(jint(l.o[2], "rejected"), 1);
        /* Topics sorted: clicks 3, east.clicks 1, east.profiles 1,
         * profiles 1, west.clicks 3, west.profiles 2. */
        const char *topics[] = {"clicks",   "east.clicks", "east.profiles",
                                "profiles", "west.clicks", "west.profiles"};
        const int   counts[] = {3, 1, 1, 1, 3, 2};
        assert_string_equal(jstr(l.o[3], "type"), "topic");
        for (size_t i = 0; i < 6; i++) {
                assert_string_equal(jstr(l.o[3 + i], "topic"), topics[i]);
                assert_int_equal(jint(l.o[3 + i], "entries"), counts[i]);
        }
        free_lines(&l);

        run(&r, "audit", "summary", "--state-dir", maindir, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "\nentries:    11\n"
                                      "accepted:   5\n"
                                      "dropped:    3\n"
                                      "superseded: 1\n"
                                      "identical:  1\n"
                                      "rejected:   1\n"));
        assert_non_null(strstr(
            r.out, "\nORIGIN  ENTRIES  ACCEPTED  DROPPED  SUPERSEDED  "
                   "IDENTICAL  REJECTED  DIVERGED\n"
                   "east          6         3        2           0          "
                   "1         0         0\n"
                   "west          5         2        1           1          "
                   "0         1         0\n"));
        assert_non_null(strstr(r.out, "\nwest.clicks          3         1"));

        /* --since narrows it: the last 1s holds nothing. */
        run(&r, "audit", "summary", "--since", "1s", "--json", "--state-dir",
            maindir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 1);
        assert_int_equal(jint(l.o[0], "entries"), 0);
        free_lines(&l);
}

/* While a gateway holds the state dir (lock and primary store open), the
 * audit reads a secondary view that holds everything committed so far,
 * journal included; each run sees the commits made before it. */
static void test_live_primary(void **state) {
        struct aagw_store_opts o = {.cache_mb = 8, .window_ms = 30 * 60000};
        char                   dir[700], err[512];
        aagw_statedir_t       *sd;
        aagw_store_t          *st;
        struct lines           l;
        (void)state;

        snprintf(dir, sizeof(dir), "%s/live", tmpdir);
        sd = aagw_statedir_open(dir, err, sizeof(err));
        assert_non_null(sd);
        st = aagw_store_open(sd, &o, err, sizeof(err));
        if (!st)
                fail_msg("store: %s", err);
        commit_ents(st, 0, 2); /* click-1, click-2 accepted */

        run(&r, "audit", "id", "click-1", "--json", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 2);
        assert_string_equal(jstr(l.o[0], "type"), "first_seen");
        assert_string_equal(jstr(l.o[1], "event"), "first_seen");
        free_lines(&l);
        /* Not yet committed: not there, and the window is this store's. */
        run(&r, "audit", "key", "user-7", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(
            r.err,
            "aagw: audit: key 'user-7' not found in the last 30m window\n");

        commit_ents(st, 2, NENTS);
        run(&r, "audit", "id", "click-1", "--json", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 4);
        assert_string_equal(jstr(l.o[3], "event"), "dropped");
        assert_int_equal(jint(l.o[3], "offset"), 101);
        free_lines(&l);
        run(&r, "audit", "key", "user-7", "--json", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(l.n, 5);
        assert_string_equal(jstr(l.o[0], "id"), "v2");
        free_lines(&l);

        /* Indexed into SST files by the primary: still all there. */
        assert_int_equal(aagw_store_flush(st, err, sizeof(err)), AAGW_OK);
        run(&r, "audit", "summary", "--json", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 0);
        parse_lines(r.out, &l);
        assert_int_equal(jint(l.o[0], "entries"), NENTS);
        assert_string_equal(jstr(l.o[0], "window"), "30m");
        free_lines(&l);

        /* The audit took no lock and wrote nothing: the gateway still
         * owns the state dir. */
        assert_int_equal(aagw_statedir_owner(dir), getpid());
        aagw_store_close(st);
        aagw_statedir_close(sd);
}

/* The state dir comes from --state-dir, -c FILE or --set, as for run. */
static void test_state_dir_sources(void **state) {
        char path[700], dir[700];
        (void)state;

        snprintf(path, sizeof(path), "%s/gw.yaml", tmpdir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "gateway:\n  state_dir: %s\nunify:\n  window: 90m\n",
                maindir);
        fclose(f);
        run(&r, "audit", "id", "click-1", "-c", path, NULL);
        assert_int_equal(r.status, 0);
        assert_true(!strncmp(r.out, "id:          click-1\n", 21));
        snprintf(dir, sizeof(dir), "gateway.state_dir=%s", maindir);
        run(&r, "audit", "--set", dir, "key", "user-7", NULL);
        assert_int_equal(r.status, 0);
        /* The flag overrides the file. */
        run(&r, "audit", "id", "click-1", "-c", path, "--state-dir",
            "/nonexistent/aagw", NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_string_equal(r.err,
                            "aagw: audit: state dir /nonexistent/aagw: No "
                            "such file or directory (name the gateway's "
                            "with --state-dir DIR or -c FILE)\n");
        /* A directory without a database. */
        snprintf(dir, sizeof(dir), "%s/empty", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        run(&r, "audit", "summary", "--state-dir", dir, NULL);
        assert_int_equal(r.status, 1);
        assert_string_equal(r.out, "");
        assert_true(!strncmp(r.err, "aagw: audit: no aagw state in ", 30));
        assert_non_null(strstr(r.err, dir));
        /* A broken config is a usage error, as for run. */
        run(&r, "audit", "id", "x", "--set", "gateway.bogus=1", NULL);
        assert_int_equal(r.status, 2);
        assert_non_null(strstr(r.err, "gateway.bogus"));
}

static void test_usage(void **state) {
        static const struct {
                const char *args[6];
                const char *err; /* first line of stderr */
        } cases[] = {
            {{"audit", NULL},
             "aagw: audit: a subcommand is required (id, key, recent, "
             "summary)\n"},
            {{"audit", "frob", NULL},
             "aagw: audit: unknown subcommand 'frob'\n"},
            {{"audit", "id", NULL}, "aagw: audit: id: the ID is missing\n"},
            {{"audit", "key", NULL}, "aagw: audit: key: the KEY is missing\n"},
            {{"audit", "id", "a", "b", NULL},
             "aagw: audit: unexpected argument 'b'\n"},
            {{"audit", "recent", "--verdict", "maybe", NULL},
             "aagw: audit: --verdict: expected accepted, dropped, "
             "superseded, identical or rejected, got \"maybe\"\n"},
            {{"audit", "recent", "--since", "soon", NULL},
             "aagw: audit: --since: expected a duration such as 30s, 10m or "
             "24h, got \"soon\"\n"},
            {{"audit", "recent", "--limit", "0", NULL},
             "aagw: audit: --limit: expected 1..100000, got \"0\"\n"},
            {{"audit", "id", "x", "--since", "5m", NULL},
             "aagw: audit: id: --since applies to recent and summary only\n"},
            {{"audit", "summary", "--limit", "5", NULL},
             "aagw: audit: summary: --limit applies to recent only\n"},
            {{"audit", "recent", "--bogus", NULL},
             "aagw: audit: unknown option --bogus\n"},
            {{"audit", "recent", "--since", NULL},
             "aagw: audit: --since requires an argument\n"},
        };
        (void)state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const char *const *a = cases[i].args;
                run(&r, a[0], a[1], a[2], a[3], a[4], a[5], NULL);
                if (r.status != 2 ||
                    strncmp(r.err, cases[i].err, strlen(cases[i].err)))
                        fail_msg("case %zu: exit %d, stderr:\n%s", i, r.status,
                                 r.err);
                assert_non_null(strstr(r.err, "Usage: aagw audit"));
                assert_string_equal(r.out, "");
        }
}

static void test_help(void **state) {
        (void)state;
        run(&r, "audit", "--help", NULL);
        assert_int_equal(r.status, 0);
        assert_string_equal(r.err, "");
        assert_true(!strncmp(r.out, "Usage: aagw audit id ID", 23));
        assert_non_null(strstr(r.out, "--verdict"));
        run(&r, "audit", "id", "-h", NULL);
        assert_int_equal(r.status, 0);
        run(&r, "--help", NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "aagw audit id|key|recent|summary"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_id_table),
            cmocka_unit_test(test_id_json),
            cmocka_unit_test(test_key),
            cmocka_unit_test(test_not_found),
            cmocka_unit_test(test_recent),
            cmocka_unit_test(test_non_utf8),
            cmocka_unit_test(test_summary),
            cmocka_unit_test(test_live_primary),
            cmocka_unit_test(test_state_dir_sources),
            cmocka_unit_test(test_usage),
            cmocka_unit_test(test_help),
        };
        return cmocka_run_group_tests_name("audit", tests, group_setup,
                                           group_teardown);
}
