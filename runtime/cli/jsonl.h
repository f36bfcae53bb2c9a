/* Reading a JSON-lines file (one JSON value per line, the layout of the
 * downstream benchmark sets): the whole file is read once, then handed out
 * line by line. Blank lines (whitespace only) are skipped; any other line
 * must be one JSON value (tlm_json's strict reader; a trailing \r is
 * whitespace). Messages name the file and line: "sets/arc.jsonl:17: ...". */
#ifndef TLM_CLI_JSONL_H
#define TLM_CLI_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/json.h"

/* Larger files are refused unread. */
#define JSONL_MAX_FILE ((uint64_t)1 << 30)

typedef struct jsonl_file {
    const char *path;
    uint8_t *bytes;
    size_t size, pos;
    int64_t line; /* the line of the value last returned (1-based) */
} jsonl_file;

/* Reads path (a regular file). false with a reason. */
bool jsonl_open(jsonl_file *f, const char *path, tlm_err *err);
/* The next non-blank line's value in *value (the caller frees it): 1, or 0
 * at the end of the file, or -1 with "path:line: reason" in err. */
int jsonl_next(jsonl_file *f, tlm_json **value, tlm_err *err);
void jsonl_close(jsonl_file *f);

/* The member key of an item (a JSON object) when it has the type asked
 * for; NULL after "path:line: ..." in err when the item is not an object,
 * lacks the key or has it of another type. */
const tlm_json *jsonl_field(const tlm_json *item, const char *key, tlm_json_type type, const char *path, int64_t line,
                            tlm_err *err);

/* A number for a JSON line written by tlm-run: 17 significant digits
 * (round-trips a double); JSON has no NaN or infinity, so a value that is
 * not finite (a diverged model's loss) is null. */
void jsonl_number(char *buf, size_t n, double v);

#endif
