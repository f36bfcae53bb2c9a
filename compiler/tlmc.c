/* tlmc: the tlm compiler driver. Reads a .tlm file and its modules, checks
 * every model, and reports; later stages (IR, code generation) hang off the
 * same checked models. Exit status: 0 ok, 1 errors in the input, 2 usage. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_so.h"
#include "check_model.h"
#include "ir.h"
#include "parser.h"
#include "program.h"
#include "report.h"
#include "resolve.h"
#include "suggest.h"
#include "vocabulary.h"

#ifndef TLM_VERSION
#define TLM_VERSION "0.0.0"
#endif
#ifndef TLM_STDLIB_DIR
#define TLM_STDLIB_DIR "stdlib"
#endif

enum { EXIT_USER = 1, EXIT_USAGE = 2, MAX_DEFINES = 256, MAX_INCLUDES = 64 };

typedef enum { ACT_SUMMARY, ACT_CHECK, ACT_REPORT_TEXT, ACT_REPORT_JSON } action;

typedef struct options {
    const char *input;
    action act;
    const char *model;
    const char *plot;
    const char *stdlib;
    const char *defines[MAX_DEFINES];
    int ndefines;
    const char *includes[MAX_INCLUDES];
    int nincludes;
    int color;                     /* -1 auto, 0 never, 1 always */
    bool print_keywords, help_settings;
    const char *output;            /* -o model.so */
    bool emit_ir, timing;
    const char *cpu;
    int opt_level;
} options;

static void usage(FILE *out) {
    fputs("usage: tlmc [options] FILE.tlm\n"
          "\n"
          "Checks the models in FILE.tlm and reports on them.\n"
          "\n"
          "  -o FILE.so          compile a model into a loadable shared object (the first\n"
          "                      model in FILE, or the one --model names)\n"
          "  --emit-ir           print the IR: params, buffers, ops, kernels, memory plans\n"
          "  --cpu NAME          generate code for NAME (x86-64, x86-64-v3, znver3, ...)\n"
          "                      instead of this machine's CPU\n"
          "  -O0 .. -O3          LLVM optimisation level (default -O3)\n"
          "  --time              print how long each stage takes\n"
          "  --check             check only; print nothing but diagnostics\n"
          "  --report[=FORMAT]   per-layer width table with params and FLOPs against the\n"
          "                      baseline; FORMAT is text (default) or json\n"
          "  --plot FILE.svg     plot width against depth for the models\n"
          "  --model NAME        only this model (default: every model in FILE)\n"
          "  -D NAME=VALUE       override `param NAME` (VALUE is an expression)\n"
          "  -I DIR              look for modules in DIR too\n"
          "  --stdlib DIR        the standard library (default: $TLM_STDLIB or the built-in path)\n"
          "  --color=WHEN        auto (default), always or never\n"
          "  --print-keywords    the language's names, one `class name` per line\n"
          "  --help-settings     every model and training setting, with its meaning\n"
          "  --help, --version\n"
          "\n"
          "With no option, prints one line per model. Exit status: 0 ok, 1 errors in the\n"
          "input, 2 bad usage.\n", out);
}

static int usage_error(const char *fmt, const char *arg) {
    fputs("tlmc: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\ntry `tlmc --help`\n", stderr);
    return EXIT_USAGE;
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->color = -1;
    o->opt_level = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--version")) { printf("tlmc %s\n", TLM_VERSION); exit(0); }
        else if (!strcmp(a, "--check")) o->act = ACT_CHECK;
        else if (!strcmp(a, "--emit-ir")) o->emit_ir = true;
        else if (!strcmp(a, "--time")) o->timing = true;
        else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o->opt_level = a[2] - '0';
        else if (!strcmp(a, "--report") || !strcmp(a, "--report=text")) o->act = ACT_REPORT_TEXT;
        else if (!strcmp(a, "--report=json")) o->act = ACT_REPORT_JSON;
        else if (!strncmp(a, "--report=", 9)) return usage_error("unknown report format `%s` (text or json)", a + 9);
        else if (!strcmp(a, "--print-keywords")) o->print_keywords = true;
        else if (!strcmp(a, "--help-settings")) o->help_settings = true;
        else if (!strcmp(a, "--color") || !strcmp(a, "--color=always")) o->color = 1;
        else if (!strcmp(a, "--color=never")) o->color = 0;
        else if (!strcmp(a, "--color=auto")) o->color = -1;
        else if (!strncmp(a, "--color=", 8)) return usage_error("--color takes auto, always or never, not `%s`", a + 8);
        else if (!strcmp(a, "--model") || !strcmp(a, "--plot") || !strcmp(a, "--stdlib") ||
                 !strcmp(a, "-o") || !strcmp(a, "--cpu")) {
            if (!next) return usage_error("%s needs an argument", a);
            if (!strcmp(a, "--model")) o->model = next;
            else if (!strcmp(a, "--plot")) o->plot = next;
            else if (!strcmp(a, "-o")) o->output = next;
            else if (!strcmp(a, "--cpu")) o->cpu = next;
            else o->stdlib = next;
            i++;
        } else if (!strncmp(a, "-D", 2) || !strncmp(a, "-I", 2)) {
            const char *v = a[2] ? a + 2 : next;
            if (!v) return usage_error("%s needs an argument", a);
            if (!a[2]) i++;
            if (a[1] == 'D') {
                if (o->ndefines == MAX_DEFINES) return usage_error("too many -D options%s", "");
                o->defines[o->ndefines++] = v;
            } else {
                if (o->nincludes == MAX_INCLUDES) return usage_error("too many -I options%s", "");
                o->includes[o->nincludes++] = v;
            }
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option `%s`", a);
        } else if (o->input) {
            return usage_error("more than one input file (`%s`)", a);
        } else {
            o->input = a;
        }
    }
    if (!o->input && !o->print_keywords && !o->help_settings)
        return usage_error("no input file%s", "");
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void print_class(const char *cls, const char **names, int n) {
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) printf("%s %s\n", cls, names[i]);
}

static void print_list(const char *cls, const char *const *list) {
    const char *names[128];
    int n = 0;
    for (; list[n] && n < 128; n++) names[n] = list[n];
    print_class(cls, names, n);
}

/* The names editors highlight, from the same tables the checker uses. */
static int print_keywords(const char *stdlib) {
    tlm_session s;
    session_init(&s, stderr);
    program p;
    const char *text = "use std.schedules;";
    program_load_text(&p, &s, "<keywords>", text, strlen(text), stdlib);
    int rc = s.diag.errors ? EXIT_USER : 0;
    print_list("keyword", keywords);
    print_list("setting", setting_names(model_settings));
    print_list("train_setting", setting_names(train_settings));
    print_list("mixer", tlm_mixer_enum.names);
    print_list("mlp", tlm_mlp_enum.names);
    print_list("value", symbol_values);
    print_list("function", value_functions);
    print_list("builtin", builtin_names);
    static const char *const constants[] = {"pi", NULL}, *const variables[] = {"L", "l", "t", NULL};
    print_list("constant", constants);
    print_list("variable", variables);
    const char **names = malloc((p.schedules.count + 1) * sizeof *names);
    int n = 0;
    for (size_t i = 0; i < p.schedules.cap; i++)
        if (p.schedules.keys[i]) names[n++] = p.schedules.keys[i];
    print_class("schedule", names, n);
    free(names);
    program_free(&p);
    session_free(&s);
    return rc;
}

static void print_settings(void) {
    puts("model settings (required ones marked *):");
    for (const setting_spec *x = model_settings; x->name; x++)
        printf("  %-15s%s %s%s%s\n", x->name, x->required ? "*" : " ", x->help,
               x->mixer ? "; mixer " : "", x->mixer ? x->mixer : "");
    puts("training settings (in a train { ... } block):");
    for (const setting_spec *x = train_settings; x->name; x++) printf("  %-16s %s\n", x->name, x->help);
}

/* -D name=value: value is parsed as an expression of its own. */
static int apply_defines(program *p, tlm_session *s, const options *o) {
    for (int i = 0; i < o->ndefines; i++) {
        const char *d = o->defines[i], *eq = strchr(d, '=');
        if (!eq || eq == d) return usage_error("-D takes NAME=VALUE, not `%s`", d);
        const char *name = intern(&s->names, d, (size_t)(eq - d));
        if (!symtab_get(&p->params, name)) {
            fprintf(stderr, "tlmc: -D %s: %s declares no `param %s`\n", name, o->input, name);
            suggester sg;
            suggest_begin(&sg, name);
            for (size_t k = 0; k < p->params.cap; k++) suggest_consider(&sg, p->params.keys[k]);
            if (suggest_result(&sg)) fprintf(stderr, "   = hint: did you mean `%s`?\n", suggest_result(&sg));
            return EXIT_USAGE;
        }
        size_t len = strlen(eq + 1);
        char *text = malloc(len + 1);
        memcpy(text, eq + 1, len + 1);
        char label[128];
        snprintf(label, sizeof label, "-D %s", name);
        int file = source_add(&s->sources, label, label, text, len);
        expr *e = parse_expression(s, file);
        if (!e) return EXIT_USER;
        symtab_set(&p->param_overrides, name, e);
    }
    return 0;
}

static const char *stdlib_dir(const options *o) {
    if (o->stdlib) return o->stdlib;
    const char *env = getenv("TLM_STDLIB");
    return env && *env ? env : TLM_STDLIB_DIR;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.help_settings) { print_settings(); if (!o.input && !o.print_keywords) return 0; }
    if (o.print_keywords) return print_keywords(stdlib_dir(&o));

    double start = now_seconds();
    tlm_session s;
    session_init(&s, stderr);
    s.diag.color = o.color == 1 || (o.color < 0 && isatty(2) && !getenv("NO_COLOR"));
    program p;
    if (!program_load(&p, &s, o.input, o.includes, o.nincludes, stdlib_dir(&o))) {
        program_free(&p);
        session_free(&s);
        return EXIT_USER;
    }
    rc = apply_defines(&p, &s, &o);
    if (!rc) resolve_program(&p);

    /* The models to check: one by name, or all in the main file. */
    const item *models[4096];
    int nmodels = 0;
    if (!rc && o.model) {
        item *m = symtab_get(&p.models, intern_cstr(&s.names, o.model));
        if (!m) {
            fprintf(stderr, "tlmc: no model `%s` in %s\n", o.model, o.input);
            rc = EXIT_USAGE;
        } else {
            models[nmodels++] = m;
        }
    } else if (!rc) {
        for (item *it = program_main_items(&p); it; it = it->next)
            if (it->kind == IT_MODEL && it->name && nmodels < 4096) models[nmodels++] = it;
    }
    checked_model *checked = calloc((size_t)(nmodels ? nmodels : 1), sizeof *checked);
    /* After syntax or name errors the models are still looked at, for the
     * mistakes that can be found without evaluating anything. */
    bool names_only = s.diag.errors > 0;
    for (int i = 0; !rc && i < nmodels && !s.diag.stopped; i++)
        check_model(&p, models[i], &checked[i], names_only);
    if (!rc && s.diag.errors == 0) {
        if (nmodels == 0 && (o.act == ACT_REPORT_TEXT || o.act == ACT_REPORT_JSON || o.plot)) {
            fprintf(stderr, "tlmc: %s defines no models\n", o.input);
            rc = EXIT_USER;
        } else if (o.act == ACT_SUMMARY && !o.output && !o.emit_ir) {
            for (int i = 0; i < nmodels; i++) report_summary(stdout, &checked[i]);
            if (nmodels == 0) printf("%s: no models (checked)\n", o.input);
        } else if (o.act == ACT_REPORT_TEXT) {
            for (int i = 0; i < nmodels; i++) {
                if (i) putchar('\n');
                report_text(stdout, &checked[i]);
            }
        } else if (o.act == ACT_REPORT_JSON) {
            report_json_begin(stdout);
            for (int i = 0; i < nmodels; i++) report_json_model(stdout, &checked[i], i);
            report_json_end(stdout);
        }
        if (!rc && o.emit_ir) {
            for (int i = 0; i < nmodels && !rc; i++) {
                ir_model ir;
                if (i) putchar('\n');
                if (!ir_lower(&checked[i], &ir)) {
                    fprintf(stderr, "tlmc: %s: the memory plan does not fit in memory\n", checked[i].name);
                    rc = EXIT_USER;
                } else {
                    ir_print(stdout, &ir);
                }
                ir_free(&ir);
            }
        }
        if (!rc && o.output) {
            if (nmodels == 0) {
                fprintf(stderr, "tlmc: %s defines no models\n", o.input);
                rc = EXIT_USER;
            } else {
                build_options bo = {o.cpu, o.opt_level, o.timing ? stderr : NULL};
                if (o.timing) fprintf(stderr, "tlmc: timings for %s\n  %-22s %8.1f ms\n", checked[0].name,
                                      "read and check", 1e3 * (now_seconds() - start));
                if (!build_shared_object(&checked[0], o.output, &bo)) rc = EXIT_USER;
            }
        }
        if (!rc && o.plot) {
            const checked_model *list[4096];
            for (int i = 0; i < nmodels; i++) list[i] = &checked[i];
            if (!report_svg(o.plot, list, nmodels)) {
                fprintf(stderr, "tlmc: cannot write %s\n", o.plot);
                rc = EXIT_USER;
            }
        }
    }
    if (!rc && s.diag.errors) rc = EXIT_USER;
    diag_summary(&s.diag);
    free(checked);
    program_free(&p);
    session_free(&s);
    return rc;
}
