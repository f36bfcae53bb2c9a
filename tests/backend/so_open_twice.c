/* Models loaded at the same time stay apart. tlm_so_open loads each from
 * a memory file through /proc/self/fd/N, and the dynamic loader returns an
 * object already loaded under the same name: a model opened while another
 * holds the name of a descriptor number since reused must still get its
 * own code and descriptor.
 *
 *   so_open_twice A.so B.so    (two different models)
 */
#include <stdio.h>
#include <string.h>

#include "model_so.h"

static int failures = 0;

static bool open_model(const char *path, tlm_so *so) {
    tlm_err err = {""};
    if (tlm_so_open(path, so, &err)) return true;
    printf("FAIL: %s\n", err.msg);
    failures++;
    return false;
}

static void expect_name(const char *what, const tlm_so *so, const char *name) {
    if (strcmp(so->model_name, name) != 0) {
        printf("FAIL: %s: model %s, wanted %s\n", what, so->model_name, name);
        failures++;
    } else {
        printf("ok: %s: model %s\n", what, name);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: so_open_twice A.so B.so\n");
        return 2;
    }
    tlm_so a, b, c;
    char name_a[256], name_b[256];
    if (!open_model(argv[1], &a)) return 1;
    snprintf(name_a, sizeof name_a, "%s", a.model_name);
    if (!open_model(argv[2], &b)) return 1;
    snprintf(name_b, sizeof name_b, "%s", b.model_name);
    if (strcmp(name_a, name_b) == 0) {
        printf("FAIL: %s and %s are the same model (%s), or one was loaded for the other\n", argv[1], argv[2], name_a);
        return 1;
    }
    printf("ok: %s and %s open side by side as %s and %s\n", argv[1], argv[2], name_a, name_b);
    if (a.handle == b.handle) {
        printf("FAIL: both share one loaded object\n");
        failures++;
    }
    /* Close B and open A again while A is loaded: the second A must be
     * its own load, and closing it must leave the first A usable. */
    tlm_so_close(&b);
    if (!open_model(argv[1], &c)) return 1;
    expect_name("A opened again while A is loaded", &c, name_a);
    tlm_so_close(&c);
    if (!open_model(argv[2], &b)) return 1;
    expect_name("B opened again", &b, name_b);
    expect_name("the first A, after all that", &a, name_a);
    tlm_so_close(&b);
    tlm_so_close(&a);
    if (failures) {
        printf("so_open_twice: %d failure(s)\n", failures);
        return 1;
    }
    printf("so_open_twice: all checks passed\n");
    return 0;
}
