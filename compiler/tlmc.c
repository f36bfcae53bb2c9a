/* tlmc: the tlm compiler driver. Reads a .tlm file and its modules, checks
 * every model, and reports; later stages (IR, code generation) hang off the
 * same checked models. Exit status: 0 ok, 1 errors in the input, 2 usage. */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "stdout_status.h"
#include "blob.h"
#include "build_so.h"
#include "check_model.h"
#include "codegen.h"
#include "errmsg.h"
#include "long_options.h"
#include "ir.h"
#include "parser.h"
#include "program.h"
#include "report.h"
#include "resolve.h"
#include "sha256.h"
#include "study.h"
#include "study_report.h"
#include "suggest.h"
#ifdef TLM_HAVE_TOKENIZER
#include "tokenizer/tokenizer_reader.h"
#endif
#include "vocabulary.h"
#include "xalloc.h"

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
    bool check;                    /* --check, which becomes act once the options are read */
    const char *model;
    const char *study, *variant;   /* --study NAME [--variant VARIANT] */
    bool plan;                     /* --plan: the studies as JSON */
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
    int cpu_mlp;                   /* -1: tlmc's rule per width, else tlm_mlp_impl */
    int opt_level;
} options;

/* `tlmc --version`: the release and the model ABI, and what tells one
 * build from another, which a study's recipe hash reads (a tlmc rebuilt
 * with another code generator must not pass for the old one): the first
 * 12 hex digits of this executable's SHA-256, and the LLVM it writes its
 * kernels with. */
static void print_version(void) {
    char build[2 * TLM_SHA256_SIZE + 1] = "unknown";
    uint8_t digest[TLM_SHA256_SIZE];
    if (tlm_sha256_file("/proc/self/exe", digest)) {
        tlm_sha256_hex(digest, build);
        build[12] = '\0';
    }
    char generator[64];
    tlm_codegen_version(generator, sizeof generator);
    printf("tlmc %s (model ABI %u, build %s, %s)\n", TLM_VERSION, TLM_ABI_VERSION, build, generator);
}

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
          "  --cpu-mlp HOW       how the CPU runs every width's MLP: auto (default: tlmc's\n"
          "                      measured rule per width), generated or blas\n"
          "  -O0 .. -O3          LLVM optimisation level (default -O3)\n"
          "  --time              with -o: print how long each stage takes\n"
          "  --check             check only; print nothing but diagnostics\n"
          "  --report[=FORMAT]   per-layer width table with params and FLOPs against the\n"
          "                      baseline; FORMAT is text (default) or json\n"
          "  --plot FILE.svg     plot width against depth for the models\n"
          "  --model NAME        only this model (default: every model in FILE)\n"
          "  --plan              print the studies in FILE, expanded and checked, as JSON\n"
          "  --study NAME        only this study (with --plan, --report or --check): its\n"
          "                      variants, not the file's other models\n"
          "  --variant VARIANT   with --study: the variant's model, built with the study's\n"
          "                      train settings, is what -o, --report and --emit-ir see\n"
          "  -D NAME=VALUE       override `param NAME` (VALUE is an expression)\n"
          "  -I DIR              look for modules in DIR too\n"
          "  --stdlib DIR        the standard library (default: $TLM_STDLIB or the built-in path)\n"
          "  --color=WHEN        auto (default), always or never\n"
          "  --print-keywords    the language's names, one `class name` per line\n"
          "  --help-settings     every model and training setting, with its meaning\n"
          "  --help, --version\n"
          "\n"
          "With no option, prints one line per model. Exit status: 0 ok, 1 errors in the\n"
          "input, 2 bad usage.\n",
          out);
}

/* One line on stderr, exit status 2. Control characters in the message
 * (from an argument) become '?', so the message stays on its line. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    char msg[TLM_ERR_MSG_BYTES]; /* a path of PATH_MAX bytes and the words around it */
    va_list ap;
    va_start(ap, fmt);
    tlm_vformat_fit(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    fprintf(stderr, "tlmc: %s (see `tlmc --help`)\n", msg);
    return EXIT_USAGE;
}

/* Long options without a short form are numbered past every character. */
enum {
    OPT_VERSION = 256,
    OPT_CHECK,
    OPT_EMIT_IR,
    OPT_TIME,
    OPT_REPORT,
    OPT_PLOT,
    OPT_MODEL,
    OPT_STDLIB,
    OPT_COLOR,
    OPT_CPU,
    OPT_CPU_MLP,
    OPT_PRINT_KEYWORDS,
    OPT_HELP_SETTINGS,
    OPT_PLAN,
    OPT_STUDY,
    OPT_VARIANT
};

/* "-" first: file names come back in order as option 1, so the input may
 * stand anywhere, whatever POSIXLY_CORRECT says; ":" next: a missing
 * argument is reported as ':' and the message is ours. */
static const char short_options[] = "-:hO:o:D:I:";
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"check", no_argument, NULL, OPT_CHECK},
    {"emit-ir", no_argument, NULL, OPT_EMIT_IR},
    {"time", no_argument, NULL, OPT_TIME},
    {"report", optional_argument, NULL, OPT_REPORT},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"model", required_argument, NULL, OPT_MODEL},
    {"stdlib", required_argument, NULL, OPT_STDLIB},
    {"color", optional_argument, NULL, OPT_COLOR},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"cpu-mlp", required_argument, NULL, OPT_CPU_MLP},
    {"print-keywords", no_argument, NULL, OPT_PRINT_KEYWORDS},
    {"help-settings", no_argument, NULL, OPT_HELP_SETTINGS},
    {"plan", no_argument, NULL, OPT_PLAN},
    {"study", required_argument, NULL, OPT_STUDY},
    {"variant", required_argument, NULL, OPT_VARIANT},
    {NULL, 0, NULL, 0},
};

/* The option as the user spells it, for messages: "-o", "--model". */
static void option_spelling(int opt, char *buf, size_t size) {
    for (const struct option *lo = long_options; lo->name; lo++)
        if (lo->val == opt && opt >= 256) {
            snprintf(buf, size, "--%s", lo->name);
            return;
        }
    snprintf(buf, size, "-%c", opt);
}

static int parse_args(int argc, char **argv, options *o) {
    memset(o, 0, sizeof *o);
    o->color = -1;
    o->opt_level = 3;
    o->cpu_mlp = -1;
    opterr = 0;
    char name[64];
    int opt;
    int longindex = -1;
    char unknown[512];
    while ((opt = getopt_long(argc, argv, short_options, long_options, &longindex)) != -1) {
        const char *abbreviation = tlm_long_option_abbreviation(opt, longindex, argv, long_options);
        if (abbreviation) {
            tlm_long_option_unknown(abbreviation, strcspn(abbreviation, "="), long_options, unknown, sizeof unknown);
            return usage_error("%s", unknown);
        }
        longindex = -1;
        switch (opt) {
        case 'h': usage(stdout); exit(tlm_stdout_status("tlmc", 0));
        /* The model ABI too: a model.so from another ABI must be recompiled
         * (tlm-run study keys its compiled variants on this line). */
        case OPT_VERSION: print_version(); exit(tlm_stdout_status("tlmc", 0));
        case OPT_CHECK: o->check = true; break;
        case OPT_EMIT_IR: o->emit_ir = true; break;
        case OPT_TIME: o->timing = true; break;
        case 'O':
            if (optarg[0] < '0' || optarg[0] > '3' || optarg[1])
                return usage_error("-O takes 0, 1, 2 or 3, not `%s`", optarg);
            o->opt_level = optarg[0] - '0';
            break;
        case OPT_REPORT: {
            action want = !optarg || !strcmp(optarg, "text") ? ACT_REPORT_TEXT
                          : !strcmp(optarg, "json")          ? ACT_REPORT_JSON
                                                             : ACT_SUMMARY;
            if (want == ACT_SUMMARY) return usage_error("unknown report format `%s` (text or json)", optarg);
            o->act = want;
            break;
        }
        case OPT_PRINT_KEYWORDS: o->print_keywords = true; break;
        case OPT_HELP_SETTINGS: o->help_settings = true; break;
        case OPT_COLOR:
            if (!optarg || !strcmp(optarg, "always")) o->color = 1;
            else if (!strcmp(optarg, "never")) o->color = 0;
            else if (!strcmp(optarg, "auto")) o->color = -1;
            else return usage_error("--color takes auto, always or never, not `%s`", optarg);
            break;
        case OPT_MODEL:
            if (o->model) return usage_error("--model given twice (`%s`, then `%s`): one model", o->model, optarg);
            o->model = optarg;
            break;
        case OPT_PLAN: o->plan = true; break;
        case OPT_STUDY:
            if (o->study) return usage_error("--study given twice (`%s`, then `%s`): one study", o->study, optarg);
            o->study = optarg;
            break;
        case OPT_VARIANT: o->variant = optarg; break;
        case OPT_PLOT: o->plot = optarg; break;
        case OPT_STDLIB: o->stdlib = optarg; break;
        case OPT_CPU: o->cpu = optarg; break;
        case OPT_CPU_MLP:
            if (!strcmp(optarg, "auto")) o->cpu_mlp = -1;
            else if ((o->cpu_mlp = tlm_enum_find(&tlm_mlp_impl_enum, optarg)) < 0)
                return usage_error("--cpu-mlp takes auto, generated or blas, not `%s`", optarg);
            break;
        case 'o':
            if (o->output)
                return usage_error("-o given twice (`%s`, then `%s`): tlmc writes one output", o->output, optarg);
            o->output = optarg;
            break;
        case 'D':
            if (o->ndefines == MAX_DEFINES) return usage_error("too many -D options");
            o->defines[o->ndefines++] = optarg;
            break;
        case 'I':
            if (o->nincludes == MAX_INCLUDES) return usage_error("too many -I options");
            o->includes[o->nincludes++] = optarg;
            break;
        case 1:
            if (o->input) return usage_error("more than one input file (`%s`)", optarg);
            o->input = optarg;
            break;
        case ':': option_spelling(optopt, name, sizeof name); return usage_error("%s needs an argument", name);
        default:   /* '?': optopt is 0 for an unknown long option */
            if (optopt > 0 && optopt < 256 && !strchr(short_options + 2, optopt))
                return usage_error("unknown option `-%c`", optopt);
            if (optopt) return usage_error("`%s` takes no argument", argv[optind - 1]);
            tlm_long_option_unknown(argv[optind - 1], strlen(argv[optind - 1]), long_options, unknown, sizeof unknown);
            return usage_error("%s", unknown);
        }
    }
    /* What follows "--" is file names only. */
    for (; optind < argc; optind++) {
        if (o->input) return usage_error("more than one input file (`%s`)", argv[optind]);
        o->input = argv[optind];
    }
    if (o->check && o->act != ACT_SUMMARY)
        return usage_error("--check prints nothing but diagnostics, --report a report: choose one");
    if (o->check) o->act = ACT_CHECK;
    if (!o->input && !o->print_keywords && !o->help_settings) return usage_error("no input file");
    /* an empty path is a slip, a usage error as tlm-run's are */
    if (o->input && !*o->input) return usage_error("the input file is empty: it needs a path");
    if (o->output && !*o->output) return usage_error("-o is empty: it needs a path");
    if (o->plot && !*o->plot) return usage_error("--plot is empty: it needs a path");
    /* joined with "/", an empty folder would search the root */
    if (o->stdlib && !*o->stdlib) return usage_error("--stdlib is empty: it needs a path");
    for (int i = 0; i < o->nincludes; i++)
        if (!*o->includes[i]) return usage_error("-I is empty: it needs a path");
    if (o->variant && !o->study) return usage_error("--variant needs --study NAME");
    if (o->variant && o->plan) return usage_error("--plan lists every variant; leave out --variant");
    /* without a variant, -o compiled the file's first model, the study ignored */
    if (o->study && o->output && !o->variant)
        return usage_error("-o with --study needs --variant VARIANT (the variant to compile)");
    if ((o->study || o->plan) && o->model) return usage_error("--model cannot be combined with --study or --plan");
    if (o->plan && o->act != ACT_SUMMARY && o->act != ACT_CHECK)
        return usage_error("--plan prints the studies as JSON; leave out --report");
    if (o->plan && (o->output || o->plot || o->emit_ir))
        return usage_error("--plan prints the studies as JSON; leave out %s", o->output ? "-o"
                                                                              : o->plot ? "--plot"
                                                                                        : "--emit-ir");
    /* with --study, the models are the study's variants: a model report
     * or plot is of one variant */
    if (o->study && !o->variant && o->act == ACT_REPORT_JSON)
        return usage_error("--report=json with --study needs --variant VARIANT (a study's JSON is --plan)");
    if (o->study && !o->variant && o->plot)
        return usage_error("--plot with --study needs --variant VARIANT (it plots one variant's widths)");
    if (o->study && !o->variant && o->emit_ir)
        return usage_error("--emit-ir with --study needs --variant VARIANT (the IR of one variant's model)");
    if (o->timing && !o->output) return usage_error("--time times the stages of -o; give -o FILE.so");
    char *err = NULL;
    if (o->cpu && !tlm_codegen_cpu_known(o->cpu, &err)) {
        const char *why = err ? err : "out of memory";
        if (!strncmp(why, "codegen: ", 9)) why += 9;
        int rc = usage_error("--cpu: %s", why);
        free(err);
        return rc;
    }
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void print_class(const char *cls, const char **names, int n) {
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) printf("%s %s\n", cls, names[i]);
}

static void print_list(const char *cls, const char *const *list) {
    const char *names[128];
    int n = 0;
    for (; n < 128 && list[n]; n++) names[n] = list[n];
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
    print_list("study_setting", setting_names(study_settings));
    print_list("mixer", tlm_mixer_enum.names);
    print_list("mlp", tlm_mlp_enum.names);
    print_list("value", symbol_values);
    print_list("function", value_functions);
    print_list("builtin", builtin_names);
    static const char *const constants[] = {"pi", NULL}, *const variables[] = {"L", "l", "t", NULL};
    print_list("constant", constants);
    print_list("variable", variables);
    const char **names = tlm_xmalloc((p.schedules.count + 1) * sizeof *names);
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
        printf("  %-15s%s %s%s%s\n", x->name, x->required ? "*" : " ", x->help, x->mixer != ANY_MIXER ? "; mixer " : "",
               x->mixer != ANY_MIXER ? tlm_enum_name(&tlm_mixer_enum, (unsigned)x->mixer) : "");
    puts("training settings (in a train { ... } block):");
    for (const setting_spec *x = train_settings; x->name; x++) printf("  %-16s %s\n", x->name, x->help);
    puts("study settings (in a study { ... } block, with `PARAM in [...];` axes and a train block):");
    for (const setting_spec *x = study_settings; x->name; x++) printf("  %-16s %s\n", x->name, x->help);
}

/* Whether out (of the flag) is one of the sources read, which writing it
 * would destroy: said on stderr. */
static bool output_is_source(const source_table *t, const char *flag, const char *out) {
    for (int f = 0; f < t->count; f++)
        if (tlm_same_file(out, t->files[f]->path)) {
            fprintf(stderr, "tlmc: %s %s is also the source %s: writing it would destroy it; name another output\n",
                    flag, out, t->files[f]->name);
            return true;
        }
    return false;
}

/* -D name=value: value is parsed as an expression of its own. */
static int apply_defines(program *p, tlm_session *s, const options *o) {
    for (int i = 0; i < o->ndefines; i++) {
        const char *d = o->defines[i], *eq = strchr(d, '=');
        /* -D "ratio = 1.75" means ratio too: the value is an expression,
         * where spaces are free, so the name may have them around it. */
        const char *n0 = d, *n1 = eq ? eq : d;
        while (n0 < n1 && isspace((unsigned char)*n0)) n0++;
        while (n1 > n0 && isspace((unsigned char)n1[-1])) n1--;
        if (!eq || n0 == n1) return usage_error("-D takes NAME=VALUE, not `%s`", d);
        const char *name = intern(&s->names, n0, (size_t)(n1 - n0));
        if (!symtab_get(&p->params, name)) {
            fprintf(stderr, "tlmc: -D %s: %s declares no `param %s`\n", name, o->input, name);
            suggester sg;
            suggest_begin(&sg, name);
            for (size_t k = 0; k < p->params.cap; k++) suggest_consider(&sg, p->params.keys[k]);
            if (suggest_result(&sg)) fprintf(stderr, "   = hint: did you mean `%s`?\n", suggest_result(&sg));
            return EXIT_USAGE;
        }
        size_t len = strlen(eq + 1);
        char *text = tlm_xstrndup(eq + 1, len);
        char label[128];
        snprintf(label, sizeof label, "-D %s", name);
        int file = source_add(&s->sources, label, label, text, len);
        expr *e = parse_expression(s, file);
        if (!e) return EXIT_USER;
        symtab_set(&p->param_overrides, name, e);
    }
    return 0;
}

/* --study NAME, or every study of the main file (none are needed unless
 * asked for or reported). */
static int select_studies(program *p, const options *o, study *out, int *n) {
    *n = 0;
    if (o->study) {
        const item *st = symtab_get(&p->studies, intern_cstr(&p->s->names, o->study));
        if (!st) {
            fprintf(stderr, "tlmc: no study `%s` in %s\n", o->study, o->input);
            return EXIT_USAGE;
        }
        out[(*n)++].decl = st;
        return 0;
    }
    if (o->model) return 0;
    for (item *it = program_main_items(p); it; it = it->next)
        if (it->kind == IT_STUDY && it->name) out[(*n)++].decl = it;
    return 0;
}

static int unknown_variant(const study *st, const char *name) {
    fprintf(stderr, "tlmc: study %s has no variant `%s`; its variants are:", st->name, name);
    for (int i = 0; i < st->nvariants; i++) fprintf(stderr, "%s %s", i ? "," : "", st->variants[i].name);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

static const char *stdlib_dir(const options *o) {
    if (o->stdlib) return o->stdlib;
    const char *env = getenv("TLM_STDLIB");
    return env && *env ? env : TLM_STDLIB_DIR;
}

static int run(int argc, char **argv) {
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (o.help_settings) {
        print_settings();
        if (!o.input && !o.print_keywords) return 0;
    }
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
#ifdef TLM_HAVE_TOKENIZER
    p.load_tokenizer = tokenizer_reader_load;
#endif
    rc = apply_defines(&p, &s, &o);
    if (!rc) resolve_program(&p);

    /* The models to check: one by name, or all in the main file (however
     * many: a fixed array once left every model past the 4096th unchecked,
     * and the studies past the 256th). */
    size_t main_models = 0, main_studies = 0;
    for (item *it = program_main_items(&p); it; it = it->next) {
        main_models += it->kind == IT_MODEL;
        main_studies += it->kind == IT_STUDY;
    }
    const item **models = tlm_xmalloc((main_models + 1) * sizeof *models);
    int nmodels = 0;
    if (!rc && o.model) {
        item *m = symtab_get(&p.models, intern_cstr(&s.names, o.model));
        if (!m) {
            fprintf(stderr, "tlmc: no model `%s` in %s\n", o.model, o.input);
            rc = EXIT_USAGE;
        } else {
            models[nmodels++] = m;
        }
    } else if (!rc && !o.plan && !o.study) { /* --study: its variants only */
        for (item *it = program_main_items(&p); it; it = it->next)
            if (it->kind == IT_MODEL && it->name) models[nmodels++] = it;
    }
    checked_model *checked = tlm_xcalloc((size_t)nmodels + 1, sizeof *checked);
    /* After syntax or name errors the models are still looked at, for the
     * mistakes that can be found without evaluating anything. */
    bool names_only = s.diag.errors > 0;
    for (int i = 0; !rc && i < nmodels && !s.diag.stopped; i++) check_model(&p, models[i], &checked[i], names_only);

    /* The studies: expanded and every variant checked, or with --variant
     * just that one, which then stands in for the models. */
    study *studies = tlm_xcalloc(main_studies + 1, sizeof *studies);
    int nstudies = 0;
    if (!rc) rc = select_studies(&p, &o, studies, &nstudies);
    bool models_ok = !rc && s.diag.errors == 0;
    for (int i = 0; models_ok && i < nstudies && !s.diag.stopped; i++) {
        if (!study_expand(&p, studies[i].decl, &studies[i])) continue;
        if (o.variant) {
            int v = study_find_variant(&studies[i], o.variant);
            if (v < 0) {
                rc = unknown_variant(&studies[i], o.variant);
                break;
            }
            if (study_check_variant(&p, &studies[i], &studies[i].variants[v]))
                checked[nmodels++] = studies[i].variants[v].checked;
            continue;
        }
        for (int v = 0; v < studies[i].nvariants && !s.diag.stopped; v++)
            study_check_variant(&p, &studies[i], &studies[i].variants[v]);
    }
    if (!rc && s.diag.errors == 0 && o.plan) {
        if (nstudies == 0) {
            fprintf(stderr, "tlmc: %s defines no studies\n", o.input);
            rc = EXIT_USER;
        } else {
            char *real = realpath(o.input, NULL);
            const char **sources = tlm_xcalloc((size_t)p.nfiles + 1, sizeof *sources);
            for (int i = 0; i < p.nfiles; i++) sources[i] = p.files[i].realpath;
            study_plan_begin(stdout, real ? real : o.input, sources, p.nfiles);
            free(sources);
            free(real);
            for (int i = 0; i < nstudies; i++) study_plan_json(stdout, &studies[i], i);
            study_plan_end(stdout);
        }
    } else if (!rc && s.diag.errors == 0) {
        if (nmodels == 0 && ((nstudies == 0 && o.act == ACT_REPORT_TEXT) || o.act == ACT_REPORT_JSON || o.plot)) {
            fprintf(stderr, "tlmc: %s defines no models\n", o.input);
            rc = EXIT_USER;
        } else if ((o.output && output_is_source(&s.sources, "-o", o.output)) ||
                   (o.plot && output_is_source(&s.sources, "--plot", o.plot))) {
            rc = EXIT_USER; /* before anything is printed: the command did nothing */
        } else if (o.act == ACT_SUMMARY && !o.output && !o.emit_ir) {
            for (int i = 0; i < nmodels; i++) report_summary(stdout, &checked[i]);
            for (int i = 0; i < nstudies && !o.variant; i++)
                printf("study %s: %d variants x %d seeds, baseline %s (checked)\n", studies[i].name,
                       studies[i].nvariants, studies[i].nseeds, studies[i].variants[studies[i].baseline].name);
            if (nmodels == 0 && nstudies == 0) printf("%s: no models (checked)\n", o.input);
        } else if (o.act == ACT_REPORT_TEXT) {
            for (int i = 0; i < nmodels; i++) {
                if (i) putchar('\n');
                report_text(stdout, &checked[i]);
            }
            for (int i = 0; i < nstudies && !o.variant; i++) {
                if (i || nmodels) putchar('\n');
                study_report_text(stdout, &studies[i]);
            }
        } else if (o.act == ACT_REPORT_JSON) {
            report_json_begin(stdout);
            for (int i = 0; i < nmodels; i++) report_json_model(stdout, &checked[i], i);
            report_json_end(stdout);
        }
        if (!rc && o.emit_ir) {
            for (int i = 0; i < nmodels && !rc; i++) {
                if (i) putchar('\n');
                if (!emit_ir(stdout, &checked[i], o.cpu_mlp)) rc = EXIT_USER;
            }
        }
        if (!rc && o.output) {
            if (nmodels == 0) {
                fprintf(stderr, "tlmc: %s defines no models\n", o.input);
                rc = EXIT_USER;
            } else {
                build_options bo = {o.cpu, o.opt_level, o.timing ? stderr : NULL, o.cpu_mlp};
                if (o.timing)
                    fprintf(stderr, "tlmc: timings for %s\n  %-22s %8.1f ms\n", checked[0].name, "read and check",
                            1e3 * (now_seconds() - start));
                if (!build_shared_object(&checked[0], o.output, &bo)) rc = EXIT_USER;
            }
        }
        if (!rc && o.plot) {
            const checked_model **list = tlm_xmalloc((size_t)nmodels * sizeof *list);
            for (int i = 0; i < nmodels; i++) list[i] = &checked[i];
            tlm_err why = {""};
            if (!report_svg(o.plot, list, nmodels, &why)) {
                fprintf(stderr, "tlmc: --plot %s\n", why.msg);
                rc = EXIT_USER;
            }
            free(list);
        }
    }
    if (!rc && s.diag.errors) rc = EXIT_USER;
    diag_summary(&s.diag);
    free(checked);
    free(models);
    free(studies);
    program_free(&p);
    session_free(&s);
    return rc;
}

int main(int argc, char **argv) {
    /* A file-size limit (ulimit -f) makes write() fail with EFBIG, an error
     * that removes the temporaries, instead of killing tlmc with SIGXFSZ
     * (the linker it runs inherits this). */
    signal(SIGXFSZ, SIG_IGN);
    return tlm_stdout_status("tlmc", run(argc, argv));
}
