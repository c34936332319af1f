/* dedup/statedir.c: the state directory and its single-owner lock. */
#include "aagw_dedup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCK_NAME "LOCK.aagw"

struct aagw_statedir {
        char *path;
        int   lock_fd;
};

/* mkdir -p: create every missing component of 'dir' with mode 0750. */
static int mkdirs(const char *dir, char *errstr, size_t errstr_size) {
        char   tmp[PATH_MAX];
        size_t len = strlen(dir);

        if (len == 0 || len >= sizeof(tmp)) {
                snprintf(errstr, errstr_size, "state dir path is %s",
                         len ? "too long" : "empty");
                return -1;
        }
        memcpy(tmp, dir, len + 1);
        for (char *p = tmp + 1; ; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char c = *p;
                *p     = '\0';
                if (mkdir(tmp, 0750) == -1 && errno != EEXIST) {
                        snprintf(errstr, errstr_size,
                                 "cannot create state dir %s: %s", tmp,
                                 strerror(errno));
                        return -1;
                }
                *p = c;
                if (c == '\0')
                        break;
        }
        return 0;
}

static pid_t read_pid(int fd) {
        char    buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        long pid = strtol(buf, NULL, 10);
        return pid > 0 ? (pid_t)pid : -1;
}

aagw_statedir_t *aagw_statedir_open(const char *dir, char *errstr,
                                    size_t errstr_size) {
        char             lock_path[PATH_MAX];
        struct stat      st;
        aagw_statedir_t *sd;
        int              fd;

        if (mkdirs(dir, errstr, errstr_size) == -1)
                return NULL;
        if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
                snprintf(errstr, errstr_size, "state dir %s is not a directory",
                         dir);
                return NULL;
        }
        if ((size_t)snprintf(lock_path, sizeof(lock_path), "%s/%s", dir,
                             LOCK_NAME) >= sizeof(lock_path)) {
                snprintf(errstr, errstr_size, "state dir path is too long");
                return NULL;
        }
        fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
        if (fd == -1) {
                snprintf(errstr, errstr_size, "cannot open %s: %s", lock_path,
                         strerror(errno));
                return NULL;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
                int   e   = errno;
                pid_t pid = read_pid(fd);
                close(fd);
                if (e == EWOULDBLOCK && pid > 0)
                        snprintf(errstr, errstr_size,
                                 "state dir %s is in use by another aagw "
                                 "process (pid %d); stop it or choose another "
                                 "state_dir",
                                 dir, (int)pid);
                else if (e == EWOULDBLOCK)
                        snprintf(errstr, errstr_size,
                                 "state dir %s is in use by another aagw "
                                 "process; stop it or choose another "
                                 "state_dir",
                                 dir);
                else
                        snprintf(errstr, errstr_size, "cannot lock %s: %s",
                                 lock_path, strerror(e));
                return NULL;
        }
        /* Record our pid for the refusal message of the next contender. */
        char pidbuf[32];
        int  n = snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)getpid());
        if (ftruncate(fd, 0) == -1 || pwrite(fd, pidbuf, (size_t)n, 0) != n) {
                snprintf(errstr, errstr_size, "cannot write %s: %s", lock_path,
                         strerror(errno));
                close(fd);
                return NULL;
        }
        sd = calloc(1, sizeof(*sd));
        if (!sd || !(sd->path = strdup(dir))) {
                free(sd);
                close(fd);
                snprintf(errstr, errstr_size, "out of memory");
                return NULL;
        }
        sd->lock_fd = fd;
        return sd;
}

const char *aagw_statedir_path(const aagw_statedir_t *sd) {
        return sd->path;
}

void aagw_statedir_close(aagw_statedir_t *sd) {
        if (!sd)
                return;
        /* Leave the file; truncating it would race with a new owner that
         * locked it between our unlock and our truncate. */
        close(sd->lock_fd);
        free(sd->path);
        free(sd);
}

pid_t aagw_statedir_owner(const char *dir) {
        char  lock_path[PATH_MAX];
        pid_t pid = -1;
        int   fd;

        snprintf(lock_path, sizeof(lock_path), "%s/%s", dir, LOCK_NAME);
        fd = open(lock_path, O_RDONLY | O_CLOEXEC);
        if (fd == -1)
                return -1;
        if (flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK)
                pid = read_pid(fd);
        close(fd);
        return pid;
}
