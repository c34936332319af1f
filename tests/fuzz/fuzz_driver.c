/* tests/fuzz/fuzz_driver.c: run a libFuzzer target without libFuzzer.
 *
 * Any compiler builds this, so the target runs in the normal test suite:
 * first every file of the corpus directories given as arguments, then
 * pseudo-random inputs from a fixed seed (mutations of corpus entries and
 * plain noise), so a run is reproducible and bounded.  The real fuzzer
 * (clang, -Dfuzz) explores; this keeps what it found from regressing.
 *
 *   fuzz_provenance_driver [-n ITERATIONS] [-s SEED] DIR|FILE...
 *
 * An input that crashes or fails an invariant is written to ./crash-input.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 8192
#define MAX_CORPUS 4096

static uint8_t *corpus[MAX_CORPUS];
static size_t   corpus_len[MAX_CORPUS];
static size_t   corpus_cnt;

static uint64_t rng_state;

static uint64_t rnd(void) {
        /* xorshift64*: fast, and the same sequence everywhere */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dull;
}

/* The input being run, so a crash can be kept as a file to reproduce it
 * with: `fuzz_X_driver -n 0 crash-input` (or the libFuzzer build). */
static uint8_t cur[INPUT_MAX];
static size_t  cur_len;

static void on_crash(int sig) {
        static const char msg[] = "fuzz driver: the input is in "
                                  "./crash-input\n";
        int fd = open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);

        if (fd >= 0) {
                ssize_t w = write(fd, cur, cur_len);
                (void)w;
                close(fd);
                w = write(2, msg, sizeof(msg) - 1);
                (void)w;
        }
        signal(sig, SIG_DFL);
        raise(sig);
}

static int load_file(const char *path) {
        FILE    *f = fopen(path, "rb");
        uint8_t *buf;
        size_t   n;

        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        buf = malloc(INPUT_MAX);
        if (!buf) {
                fclose(f);
                return -1;
        }
        n = fread(buf, 1, INPUT_MAX, f);
        fclose(f);
        /* Run it at once, so a crash names the file that caused it. */
        fprintf(stderr, "corpus: %s (%zu bytes)\n", path, n);
        memcpy(cur, buf, n);
        cur_len = n;
        LLVMFuzzerTestOneInput(buf, n);
        if (corpus_cnt < MAX_CORPUS) {
                corpus[corpus_cnt]       = buf;
                corpus_len[corpus_cnt++] = n;
        } else {
                free(buf);
        }
        return 0;
}

static int load(const char *path) {
        struct stat    st;
        DIR           *d;
        struct dirent *e;
        int            rc = 0;

        if (stat(path, &st)) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        if (!S_ISDIR(st.st_mode))
                return load_file(path);
        d = opendir(path);
        if (!d) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        while ((e = readdir(d))) {
                char full[4096];
                if (e->d_name[0] == '.')
                        continue;
                snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
                if (load_file(full))
                        rc = -1;
        }
        closedir(d);
        return rc;
}

/* One input: a corpus entry with a few mutations, a splice of two, or
 * noise. */
static size_t make_input(uint8_t *buf) {
        size_t n;
        int    kind = (int)(rnd() % 8);

        if (!corpus_cnt || kind == 0) {
                n = (size_t)(rnd() % 512);
                for (size_t i = 0; i < n; i++)
                        buf[i] = (uint8_t)rnd();
                return n;
        }
        {
                size_t c = (size_t)(rnd() % corpus_cnt);
                n        = corpus_len[c];
                memcpy(buf, corpus[c], n);
        }
        if (kind == 1 && n) {
                size_t c   = (size_t)(rnd() % corpus_cnt);
                size_t cut = (size_t)(rnd() % n);
                size_t add = corpus_len[c] < INPUT_MAX - cut ? corpus_len[c]
                                                             : INPUT_MAX - cut;
                memcpy(buf + cut, corpus[c], add);
                n = cut + add;
        }
        for (int m = (int)(rnd() % 4) + 1; m > 0; m--) {
                size_t at = n ? (size_t)(rnd() % n) : 0;
                switch (rnd() % 6) {
                case 0: /* flip a bit */
                        if (n)
                                buf[at] ^= (uint8_t)(1u << rnd() % 8);
                        break;
                case 1: /* set an interesting byte */
                        if (n) {
                                static const uint8_t v[] = {
                                    0,   0xff, '>', ':', ',', '"', '\\',
                                    '{', '}',  '0', '9', 'e', '.', '-'};
                                buf[at] = v[rnd() % sizeof(v)];
                        }
                        break;
                case 2: /* delete a run */
                        if (n) {
                                size_t len = (size_t)(rnd() % (n - at)) + 1;
                                memmove(buf + at, buf + at + len, n - at - len);
                                n -= len;
                        }
                        break;
                case 3: /* duplicate a run */
                        if (n && n < INPUT_MAX / 2) {
                                size_t len = (size_t)(rnd() % (n - at)) + 1;
                                memmove(buf + at + len, buf + at, n - at);
                                n += len;
                        }
                        break;
                case 4: /* truncate */
                        n = at;
                        break;
                default: /* random byte */
                        if (n)
                                buf[at] = (uint8_t)rnd();
                        break;
                }
        }
        return n;
}

int main(int argc, char **argv) {
        static uint8_t buf[INPUT_MAX];
        long           iterations = 5000;
        uint64_t       seed       = 0x5eed5eedull;
        time_t         start      = time(NULL);
        long           done       = 0;
        int            opt;

        while ((opt = getopt(argc, argv, "n:s:")) != -1) {
                switch (opt) {
                case 'n':
                        iterations = strtol(optarg, NULL, 10);
                        break;
                case 's':
                        seed = strtoull(optarg, NULL, 0);
                        break;
                default:
                        fprintf(stderr,
                                "usage: %s [-n ITERATIONS] [-s SEED] "
                                "DIR|FILE...\n",
                                argv[0]);
                        return 2;
                }
        }
        rng_state = seed ? seed : 1;
        signal(SIGABRT, on_crash);
        signal(SIGSEGV, on_crash);
        signal(SIGBUS, on_crash);
        for (int i = optind; i < argc; i++)
                if (load(argv[i]))
                        return 1;
        for (; done < iterations; done++) {
                size_t n = make_input(buf);
                memcpy(cur, buf, n);
                cur_len = n;
                LLVMFuzzerTestOneInput(buf, n);
                /* A time bound as well, for slow sanitizer builds. */
                if (!(done & 255) && time(NULL) - start > 15)
                        break;
        }
        printf("%zu corpus files, %ld random inputs (seed %#llx): ok\n",
               corpus_cnt, done, (unsigned long long)seed);
        for (size_t i = 0; i < corpus_cnt; i++)
                free(corpus[i]);
        return 0;
}
