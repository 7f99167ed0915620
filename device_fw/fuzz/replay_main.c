/* A main() for the fuzz harnesses without libFuzzer (gcc or clang, with the sanitizers): runs
 * LLVMFuzzerTestOneInput on every file named on the command line, or on every file of every
 * directory named. `make test` uses it to replay fixtures/fuzz/<target>/ (the regression
 * inputs of crashes found once) and the seed corpus. */
#define _DEFAULT_SOURCE /* scandir, alphasort */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "cannot read %s\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int files = 0, errors = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue; /* libFuzzer-style flags are ignored */
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "no such file or directory: %s\n", argv[i]);
            errors++;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            errors += run_file(argv[i]) != 0;
            files++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, alphasort);
        for (int k = 0; k < n; k++) {
            if (names[k]->d_name[0] != '.') {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
                if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                    errors += run_file(path) != 0;
                    files++;
                }
            }
            free(names[k]);
        }
        if (n >= 0) free(names);
    }
    printf("%s: %d inputs replayed, %d unreadable\n", argv[0], files, errors);
    return errors ? 1 : 0;
}
