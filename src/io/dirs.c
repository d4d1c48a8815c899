/* dirs.c — paths and directories: joining, creating with parents, checking emptiness and identity. */
#include "io/files.h"

#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

sf_status sf_path_join(char *buf, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return sf_fail(SF_ERR_IO, "path '%s/%s' is too long", dir, name);
    return SF_OK;
}

sf_status sf_dir_create(const char *dir)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) return sf_fail(SF_ERR_IO, "bad directory name '%s'", dir);
    memcpy(path, dir, n + 1);
    /* Create each prefix in turn; EEXIST is fine as long as the last one is a directory (checked below). */
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != 0) continue;
        char saved = path[i];
        path[i] = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return sf_fail(SF_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sf_fail(SF_ERR_IO, "%s exists and is not a directory", dir);
    return SF_OK;
}

sf_status sf_dir_check_empty(const char *dir, int (*ignore)(const char *name))
{
    DIR *d = opendir(dir);
    if (!d) return sf_fail(SF_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    const char *found = NULL;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !(ignore && ignore(e->d_name)))
            found = e->d_name;
    sf_status s = found ? sf_fail(SF_ERR_STATE, "%s is not empty (it holds %s)", dir, found) : SF_OK;
    closedir(d);
    return s;
}

int sf_same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISDIR(sa.st_mode) && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}
