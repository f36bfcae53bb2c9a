/* libFuzzer target over the whole front end: lexer, parser, name resolution,
 * evaluation, model checking, widths and budget. Diagnostics go nowhere; the
 * sanitizers and the fuzzer's own limits catch crashes, leaks and hangs. */
#include <stdint.h>
#include <stdlib.h>

#include "check_model.h"
#include "program.h"
#include "resolve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *stdlib = getenv("TLM_STDLIB");
    tlm_session s;
    session_init(&s, NULL);
    program p;
    program_load_text(&p, &s, "fuzz.tlm", (const char *)data, size, stdlib ? stdlib : "stdlib");
    /* Sanitizers slow evaluation down ~10x: a smaller step budget keeps
     * each input well under the fuzzer's timeout. */
    p.max_eval_steps = 2 * 1000 * 1000;
    resolve_program(&p);
    bool names_only = s.diag.errors > 0;
    for (item *it = program_main_items(&p); it && !s.diag.stopped; it = it->next) {
        if (it->kind != IT_MODEL || !it->name) continue;
        checked_model m;
        check_model(&p, it, &m, names_only);
    }
    program_free(&p);
    session_free(&s);
    return 0;
}
