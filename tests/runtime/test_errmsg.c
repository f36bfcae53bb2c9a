/* The one way to fail keeps a message's reason: a message longer than
 * tlm_err holds (a path near PATH_MAX, two paths) loses its middle, not its
 * end, is cut between UTF-8 characters, and fills the buffer; a message
 * that fits is left as it is. */
#include "errmsg.h"
#include "test_util.h"
#include "tlm_rt/json.h"

static char *repeat(const char *unit, size_t times) {
    size_t n = strlen(unit);
    char *s = malloc(n * times + 1);
    if (!s) exit(2);
    for (size_t i = 0; i < times; i++) memcpy(s + i * n, unit, n);
    s[n * times] = '\0';
    return s;
}

static void check_long(const char *unit, size_t times) {
    char *path = repeat(unit, times);
    tlm_err err = {{0}};
    bool r = tlm_fail(&err, "cannot open %s: %s", path, "No such file or directory");
    size_t n = strlen(err.msg);
    CHECK(!r, "tlm_fail returns false");
    CHECK(n > sizeof err.msg - 8 && n < sizeof err.msg, "a %zu-byte path: the message has %zu of %zu bytes",
          strlen(path), n, sizeof err.msg);
    CHECK(strncmp(err.msg, "cannot open ", 12) == 0, "the beginning kept: %.40s", err.msg);
    const char *end = ": No such file or directory";
    CHECK(n >= strlen(end) && strcmp(err.msg + n - strlen(end), end) == 0, "the reason kept: ...%s",
          err.msg + (n > 60 ? n - 60 : 0));
    CHECK(strstr(err.msg, " ... ") != NULL, "the cut is marked");
    CHECK(tlm_json_valid_utf8(err.msg, n), "cut between UTF-8 characters (unit '%s')", unit);
    free(path);
}

int main(void) {
    tlm_err err = {{0}};
    tlm_fail(&err, "cannot open %s: %s", "/data/a.txt", "Permission denied");
    CHECK(strcmp(err.msg, "cannot open /data/a.txt: Permission denied") == 0, "a short message as it is: %s", err.msg);

    char *fits = repeat("d", sizeof err.msg - 1 - strlen("x: y"));
    tlm_fail(&err, "x: %s%s", fits, "y");
    CHECK(strlen(err.msg) == sizeof err.msg - 1 && err.msg[strlen(err.msg) - 1] == 'y' && !strstr(err.msg, " ... "),
          "a message that just fits is not cut");
    free(fits);

    char *path_max = repeat("d/", 2047); /* 4,094 bytes and "x": a path of PATH_MAX bytes with its NUL */
    tlm_fail(&err, "cannot open %sx: %s", path_max, "No such file or directory");
    CHECK(strlen(err.msg) == 12 + 4095 + 27 && !strstr(err.msg, " ... "), "a path of PATH_MAX bytes fits whole");
    free(path_max);

    check_long("d/", 3000); /* two paths' worth */
    check_long("\xc3\xa9/", 3000); /* two-byte characters */
    check_long("\xe2\x82\xac", 5000);
    check_long("\xf0\x9f\x98\x80", 4000);

    tlm_fail(NULL, "dropped %s", "message"); /* NULL: nothing written, no crash */
    return test_finish("errmsg");
}
