#include "program.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parser.h"
#include "suggest.h"
#include "eval.h"
#include "vocabulary.h"
#include "xalloc.h"

enum { MAX_MODULE_DEPTH = 64 };

static int load_source(program *p, int file, int depth);

static loaded_file *add_file(program *p, const char *realpath, int file) {
    if (p->nfiles == p->capfiles) {
        p->capfiles = p->capfiles ? 2 * p->capfiles : 8;
        p->files = tlm_xrealloc(p->files, (size_t)p->capfiles * sizeof *p->files);
    }
    loaded_file *f = &p->files[p->nfiles++];
    memset(f, 0, sizeof *f);
    f->realpath = tlm_xstrdup(realpath);
    f->file = file;
    return f;
}

static int find_loaded(program *p, const char *realpath) {
    for (int i = 0; i < p->nfiles; i++)
        if (strcmp(p->files[i].realpath, realpath) == 0) return i;
    return -1;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return tlm_xstrdup(".");
    if (slash == path) return tlm_xstrdup("/");
    return tlm_xstrndup(path, (size_t)(slash - path));
}

/* A path on the search path that the module could not be read from. */
typedef struct module_candidate {
    char *path;
    int error;          /* errno of access(path, R_OK) */
    bool dangling_link; /* error is ENOENT, but path is a symbolic link */
} module_candidate;

/* "std.schedules" -> "<stdlib>/schedules.tlm"; "a.b" -> "a/b.tlm" on the
 * search path: the user's directory first, then each -I directory. */
static char *find_module(program *p, const char *module, const char *from_path, module_candidate **tried, int *ntried) {
    char rel[PATH_MAX];
    bool is_std = strncmp(module, "std.", 4) == 0;
    const char *rest = is_std ? module + 4 : module;
    size_t k = 0;
    for (const char *c = rest; *c && k + 5 < sizeof rel; c++) rel[k++] = *c == '.' ? '/' : *c;
    memcpy(rel + k, ".tlm", 5);

    int ndirs = 0;
    char *dirs[80];
    if (is_std) {
        dirs[ndirs++] = tlm_xstrdup(p->stdlib_dir);
    } else {
        dirs[ndirs++] = dir_of(from_path);
        for (int i = 0; i < p->ninclude && ndirs < 80; i++) dirs[ndirs++] = tlm_xstrdup(p->include_dirs[i]);
    }
    char *found = NULL;
    *tried = tlm_xcalloc((size_t)ndirs, sizeof **tried);
    *ntried = 0;
    for (int i = 0; i < ndirs; i++) {
        char *cand = tlm_xmalloc(strlen(dirs[i]) + strlen(rel) + 2);
        sprintf(cand, "%s/%s", dirs[i], rel);
        if (found) {
            free(cand); /* the search stops at the first readable file */
        } else if (access(cand, R_OK) == 0) {
            found = cand;
        } else {
            /* the hint says why: a symlink loop or a file without read
             * permission exists, and "not found" would send the user looking
             * for the wrong thing */
            int error = errno;
            struct stat st;
            bool dangling = error == ENOENT && lstat(cand, &st) == 0 && S_ISLNK(st.st_mode);
            (*tried)[(*ntried)++] = (module_candidate){cand, error, dangling};
        }
        free(dirs[i]);
    }
    return found;
}

static void free_candidates(module_candidate *list, int n) {
    for (int i = 0; i < n; i++) free(list[i].path);
    free(list);
}

static void hint_candidate(diag_engine *d, const module_candidate *c) {
    if (c->dangling_link) diag_hint(d, "cannot read %s: %s (a dangling symbolic link)", c->path, strerror(c->error));
    else if (c->error == ENOENT || c->error == ENOTDIR) diag_hint(d, "not found: %s", c->path);
    else diag_hint(d, "cannot read %s: %s", c->path, strerror(c->error));
}

static void follow_use(program *p, item *use, int depth) {
    diag_engine *d = &p->s->diag;
    source *from = p->s->sources.files[use->file];
    module_candidate *tried;
    int ntried;
    char *path = find_module(p, use->name, from->path, &tried, &ntried);
    if (!path) {
        diag_error(d, use->name_loc, "cannot find module `%s`", use->name);
        for (int i = 0; i < ntried; i++) hint_candidate(d, &tried[i]);
        if (strncmp(use->name, "std.", 4) != 0) diag_hint(d, "add a directory to the search path with -I DIR");
        free_candidates(tried, ntried);
        return;
    }
    free_candidates(tried, ntried);
    char *real = realpath(path, NULL);
    if (!real) real = tlm_xstrdup(path);
    int at = find_loaded(p, real);
    if (at >= 0 && p->files[at].loading) {
        diag_error(d, use->name_loc, "module `%s` uses itself through a cycle of `use`", use->name);
        char chain[1024] = "";
        size_t n = 0;
        for (int i = at; i < p->nfiles; i++)
            if (p->files[i].loading && n < sizeof chain)
                n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ",
                                      p->s->sources.files[p->files[i].file]->name);
        if (n < sizeof chain) snprintf(chain + n, sizeof chain - n, "%s", p->s->sources.files[p->files[at].file]->name);
        diag_hint(d, "the cycle: %s", chain);
    } else if (at < 0) {
        if (depth >= MAX_MODULE_DEPTH) {
            diag_error(d, use->name_loc, "modules nested too deeply (the limit is %d)", MAX_MODULE_DEPTH);
        } else {
            const char *why;
            int file = source_load(&p->s->sources, path, real, &why);
            if (file < 0) diag_error(d, use->name_loc, "cannot read module `%s`: %s: %s", use->name, path, why);
            else load_source(p, file, depth + 1);
        }
    }
    free(real);
    free(path);
}

/* Parses one file, then follows its `use`s; the file is "loading" meanwhile
 * so a `use` that leads back to it is a cycle. */
static int load_source(program *p, int file, int depth) {
    source *src = p->s->sources.files[file];
    char *real = realpath(src->path, NULL);
    int index = p->nfiles;
    add_file(p, real ? real : src->path, file);
    free(real);
    p->files[index].loading = true;
    item *items = parse_file(p->s, file);
    p->files[index].items = items;
    /* every model of the file reads these: listed once, not found by a
     * walk over the file's items per model (60,000 models took 138 s) */
    int ntrains = 0;
    for (item *it = items; it; it = it->next) ntrains += it->kind == IT_TRAIN;
    const item **trains = arena_alloc(&p->s->arena, (size_t)(ntrains ? ntrains : 1) * sizeof *trains);
    ntrains = 0;
    for (item *it = items; it; it = it->next)
        if (it->kind == IT_TRAIN) trains[ntrains++] = it;
    p->files[index].trains = trains, p->files[index].ntrains = ntrains;
    for (item *it = items; it && !p->s->diag.stopped; it = it->next)
        if (it->kind == IT_USE) follow_use(p, it, depth);
    p->files[index].loading = false;
    return index;
}

static const char *kind_word(item_kind k) {
    return k == IT_SCHEDULE ? "schedule" : k == IT_PARAM ? "param" : k == IT_STUDY ? "study" : "model";
}

static bool reserved_name(program *p, item *it) {
    diag_engine *d = &p->s->diag;
    const char *n = it->name;
    if (it->kind == IT_MODEL || it->kind == IT_STUDY) return false;   /* never in expressions */
    if (strcmp(n, "l") == 0 || strcmp(n, "L") == 0 || strcmp(n, "t") == 0 || strcmp(n, "pi") == 0) {
        diag_error(d, it->name_loc, "`%s` is predefined and cannot name a %s", n, kind_word(it->kind));
        diag_hint(d, "l is the layer index, L the number of layers, t = l / (L - 1), pi = 3.14159...");
        return true;
    }
    if (it->kind == IT_PARAM && is_numeric_setting(n)) {
        /* an expression in a model reads the name as the param (params come
         * first), so `d_ff = 2 * d_model` silently used the param */
        diag_error(d, it->name_loc, "`%s` is a model setting, which expressions read by name; a param cannot take it",
                   n);
        diag_hint(d, "rename the param (and its uses), e.g. `%s_value`", n);
        return true;
    }
    int min, max;
    if (it->kind == IT_SCHEDULE && builtin_arity(n, &min, &max)) {
        /* A schedule may share a builtin's name only if no call could mean
         * both: it must need more arguments than the builtin takes. */
        int required = 0;
        for (const sched_param *sp = it->params; sp; sp = sp->next) required += sp->fallback == NULL;
        if (max >= TLM_BUILTIN_ANY_ARGS) {
            diag_error(d, it->name_loc,
                       "`%s` is a builtin function taking any number of arguments (%d or more); a "
                       "schedule cannot take its name",
                       n, min);
            return true;
        }
        if (required <= max) {
            diag_error(d, it->name_loc,
                       "`%s` is a builtin function taking %d argument%s; a schedule "
                       "of that name needs more required parameters",
                       n, max, max == 1 ? "" : "s");
            return true;
        }
    }
    return false;
}

static void build_tables(program *p) {
    diag_engine *d = &p->s->diag;
    for (int f = 0; f < p->nfiles; f++) {
        for (item *it = p->files[f].items; it; it = it->next) {
            symtab *t = it->kind == IT_SCHEDULE ? &p->schedules
                        : it->kind == IT_PARAM  ? &p->params
                        : it->kind == IT_MODEL  ? &p->models
                        : it->kind == IT_STUDY  ? &p->studies
                                                : NULL;
            if (!t || !it->name || reserved_name(p, it)) continue;
            item *prev = symtab_put_new(t, it->name, it);
            if (prev && prev->name_loc.file == p->main_file && it->name_loc.file != p->main_file) {
                /* the file being compiled takes a name a module defines
                 * (the standard library's, say): the error goes where its
                 * author can change it; two modules' clash is a plain
                 * redefinition */
                diag_error(d, prev->name_loc, "%s `%s` is also defined in a module this file uses",
                           kind_word(prev->kind), prev->name);
                diag_note(d, it->name_loc, "the module's definition is here");
                diag_hint(d, "rename one of them");
            } else if (prev) {
                diag_error(d, it->name_loc, "redefinition of %s `%s`", kind_word(it->kind), it->name);
                diag_note(d, prev->name_loc, "the first definition is here");
            }
        }
    }
}

static void init(program *p, tlm_session *s, const char *const *include_dirs, int ninclude, const char *stdlib_dir) {
    memset(p, 0, sizeof *p);
    p->s = s;
    p->include_dirs = include_dirs;
    p->ninclude = ninclude;
    p->stdlib_dir = stdlib_dir;
    p->max_eval_steps = TLM_DEFAULT_EVAL_STEPS;
}

bool program_load(program *p, tlm_session *s, const char *path, const char *const *include_dirs, int ninclude,
                  const char *stdlib_dir) {
    init(p, s, include_dirs, ninclude, stdlib_dir);
    const char *why;
    int file = source_load(&s->sources, path, path, &why);
    if (file < 0) {
        diag_error(&s->diag, TLM_NO_LOC, "cannot read %s: %s", path, why);
        return false;
    }
    p->main_file = file;
    load_source(p, file, 0);
    build_tables(p);
    return true;
}

bool program_load_text(program *p, tlm_session *s, const char *name, const char *text, size_t len,
                       const char *stdlib_dir) {
    init(p, s, NULL, 0, stdlib_dir);
    char *copy = tlm_xstrndup(text, len);
    p->main_file = source_add(&s->sources, name, name, copy, len);
    load_source(p, p->main_file, 0);
    build_tables(p);
    return true;
}

void program_free(program *p) {
    for (int i = 0; i < p->nfiles; i++) free(p->files[i].realpath);
    free(p->files);
    symtab_free(&p->schedules);
    symtab_free(&p->params);
    symtab_free(&p->models);
    symtab_free(&p->studies);
    symtab_free(&p->param_overrides);
}

const char *program_file_dir(const program *p, int file) {
    for (int i = 0; i < p->nfiles; i++) {
        if (p->files[i].file != file) continue;
        const char *real = p->files[i].realpath, *slash = strrchr(real, '/');
        return slash ? arena_strndup(&p->s->arena, real, slash == real ? 1 : (size_t)(slash - real)) : ".";
    }
    return ".";
}

item *program_main_items(const program *p) {
    for (int i = 0; i < p->nfiles; i++)
        if (p->files[i].file == p->main_file) return p->files[i].items;
    return NULL;
}
