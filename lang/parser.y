/* The .tlm grammar: a pure Bison parser with locations. Syntax errors are
 * reported through yyreport_syntax_error (friendly token names, "expected `;`
 * after ..." at the end of the previous line, the bracket left open), and error
 * productions resynchronise at `;` and `}` so one run reports several. */

%require "3.8"
%define api.pure full
%define api.location.type {tlm_loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%lex-param {lexer *lx}
%parse-param {lexer *lx} {item **result} {expr **expr_result}

%code requires {
#include "ast.h"
#include "lexer.h"
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                   \
    do {                                                              \
        if (N) {                                                      \
            (Cur).file = YYRHSLOC(Rhs, 1).file;                       \
            (Cur).begin = YYRHSLOC(Rhs, 1).begin;                     \
            (Cur).end = YYRHSLOC(Rhs, N).end;                         \
        } else {                                                      \
            (Cur).file = YYRHSLOC(Rhs, 0).file;                       \
            (Cur).begin = (Cur).end = YYRHSLOC(Rhs, 0).end;           \
        }                                                             \
    } while (0)
}

%code provides {
int yylex(YYSTYPE *lval, tlm_loc *lloc, lexer *lx);
item *parse_file(tlm_session *s, int file);
/* A whole file that is one expression (the value of -D name=value). */
expr *parse_expression(tlm_session *s, int file);
}

%code {
#include <string.h>
#include "ast_build.h"
#define S (lx->session)
static void yyerror(tlm_loc *loc, lexer *lx, item **result, expr **expr_result, const char *msg);
/* Bison's own limit on nesting; deeper input is refused with an error. */
#define YYMAXDEPTH 5000
}

%union {
    double number;
    const char *text;
    expr *e;
    arg *args;
    setting *settings;
    sched_param *params;
    item *item;
}

%token END 0 "end of file"
%token <number> NUMBER "number"
%token <text> STRING "string"
%token <text> IDENT "identifier"
%token USE "use" PARAM "param" SCHEDULE "schedule" MODEL "model" TRAIN "train" STUDY "study" IN "in"
%token LE "<=" GE ">=" EQ "==" NE "!=" ANDAND "&&" OROR "||"
%token START_EXPR "start of an expression"    /* never in text: selects parse_expression */

%right '?' ':'
%left OROR
%left ANDAND
%nonassoc EQ NE
%nonassoc '<' '>' LE GE
%left '+' '-'
%left '*' '/' '%'
%precedence UNARY

%type <e> expr
%type <args> args arglist arg elems elemlist
%type <settings> settings setting
%type <params> sparams sparamlist sparam
%type <item> items item body study_body train_block
%type <text> modpath

%%

program
    : items                     { *result = item_reverse($1); }
    | START_EXPR expr           { *expr_result = $2; }
    ;

items
    : %empty                    { $$ = NULL; }
    | items item                { $$ = item_prepend($1, $2); }
    ;

item
    : USE modpath ';'           { $$ = mk_item(S, IT_USE, @$, $2, @2); }
    | PARAM IDENT '=' expr ';'  { $$ = mk_item(S, IT_PARAM, @$, $2, @2); $$->value = $4; }
    | SCHEDULE IDENT '(' sparams ')' '=' expr ';'
                                { $$ = mk_schedule(S, @$, $2, @2, $4, $7); }
    | MODEL IDENT '{' body '}'  { $$ = $4; finish_model($$, @$, $2, @2, NULL, @2); }
    | MODEL IDENT ':' IDENT '{' body '}'
                                { $$ = $6; finish_model($$, @$, $2, @2, $4, @4); }
    | STUDY IDENT '{' study_body '}'
                                { $$ = $4; finish_study($$, @$, $2, @2); }
    | train_block               { $$ = $1; }
    | error ';'                 { $$ = NULL; }
    | error '}'                 { $$ = NULL; }
    ;

modpath
    : IDENT                     { $$ = $1; }
    | modpath '.' IDENT         { $$ = join_path(S, $1, $3); }
    ;

sparams
    : %empty                    { $$ = NULL; }
    | sparamlist                { $$ = $1; }
    ;

sparamlist
    : sparam                    { $$ = $1; }
    | sparamlist ',' sparam     { $$ = param_prepend($1, $3); }
    ;

sparam
    : IDENT                     { $$ = mk_sparam(S, $1, @1, NULL); }
    | IDENT '=' expr            { $$ = mk_sparam(S, $1, @1, $3); }
    ;

/* A model body: settings, and at most one train block (checked later). */
body
    : %empty                    { $$ = mk_item(S, IT_MODEL, @$, NULL, @$); }
    | body setting              { $$ = $1; $$->settings = setting_prepend($$->settings, $2); }
    | body train_block          { $$ = $1; model_add_train(S, $$, $2); }
    ;

/* A study body: settings (`seeds = 3;`), grid axes (`ratio in [1.25, 1.5];`)
 * and at most one train block. */
study_body
    : %empty                    { $$ = mk_item(S, IT_STUDY, @$, NULL, @$); }
    | study_body setting        { $$ = $1; $$->settings = setting_prepend($$->settings, $2); }
    | study_body IDENT IN expr ';'
                                { $$ = $1; $$->grid = setting_prepend($$->grid, mk_setting(S, $2, @2, $4)); }
    | study_body train_block    { $$ = $1; model_add_train(S, $$, $2); }
    ;

train_block
    : TRAIN '{' settings '}'    { $$ = mk_item(S, IT_TRAIN, @$, NULL, @1); $$->settings = setting_reverse($3); }
    ;

settings
    : %empty                    { $$ = NULL; }
    | settings setting          { $$ = setting_prepend($1, $2); }
    ;

setting
    : IDENT '=' expr ';'        { $$ = mk_setting(S, $1, @1, $3); }
    | error ';'                 { $$ = NULL; }
    ;

expr
    : NUMBER                    { $$ = mk_number(S, @$, $1); }
    | STRING                    { $$ = mk_string(S, @$, $1); }
    | IDENT                     { $$ = mk_name(S, @$, $1); }
    | IDENT '(' args ')'        { $$ = mk_call(S, @$, $1, arg_reverse($3)); }
    | '(' expr ')'              { $$ = $2; $$->loc = @$; }
    | '(' expr ',' elemlist ')' { $$ = mk_tuple(S, @$, $2, arg_reverse($4)); }
    | '[' elems ']'             { $$ = mk_list(S, @$, arg_reverse($2)); }
    | '-' expr %prec UNARY      { $$ = mk_unary(S, @$, '-', $2); }
    | '+' expr %prec UNARY      { $$ = mk_unary(S, @$, '+', $2); }
    | '!' expr %prec UNARY      { $$ = mk_unary(S, @$, '!', $2); }
    | expr '+' expr             { $$ = mk_binary(S, @$, '+', $1, $3); }
    | expr '-' expr             { $$ = mk_binary(S, @$, '-', $1, $3); }
    | expr '*' expr             { $$ = mk_binary(S, @$, '*', $1, $3); }
    | expr '/' expr             { $$ = mk_binary(S, @$, '/', $1, $3); }
    | expr '%' expr             { $$ = mk_binary(S, @$, '%', $1, $3); }
    | expr '<' expr             { $$ = mk_binary(S, @$, '<', $1, $3); }
    | expr '>' expr             { $$ = mk_binary(S, @$, '>', $1, $3); }
    | expr LE expr              { $$ = mk_binary(S, @$, OP_LE, $1, $3); }
    | expr GE expr              { $$ = mk_binary(S, @$, OP_GE, $1, $3); }
    | expr EQ expr              { $$ = mk_binary(S, @$, OP_EQ, $1, $3); }
    | expr NE expr              { $$ = mk_binary(S, @$, OP_NE, $1, $3); }
    | expr ANDAND expr          { $$ = mk_binary(S, @$, OP_AND, $1, $3); }
    | expr OROR expr            { $$ = mk_binary(S, @$, OP_OR, $1, $3); }
    | expr '?' expr ':' expr    { $$ = mk_cond(S, @$, $1, $3, $5); }
    ;

/* Call arguments and list elements allow a trailing comma. */
args
    : %empty                    { $$ = NULL; }
    | arglist                   { $$ = $1; }
    | arglist ','               { $$ = $1; }
    ;

arglist
    : arg                       { $$ = $1; }
    | arglist ',' arg           { $$ = arg_prepend($1, $3); }
    ;

arg
    : expr                      { $$ = mk_arg(S, NULL, @$, $1); }
    | IDENT '=' expr            { $$ = mk_arg(S, $1, @1, $3); }
    ;

elems
    : %empty                    { $$ = NULL; }
    | elemlist                  { $$ = $1; }
    | elemlist ','              { $$ = $1; }
    ;

elemlist
    : expr                      { $$ = mk_arg(S, NULL, @1, $1); }
    | elemlist ',' expr         { $$ = arg_prepend($1, mk_arg(S, NULL, @3, $3)); }
    ;

%%


/* Single-character tokens are known to Bison by their quoted spelling. */
static bool is_char(yysymbol_kind_t k, char c) {
    const char *n = yysymbol_name(k);
    return n[0] == '\'' && n[1] == c && n[2] == '\'' && n[3] == '\0';
}

/* The name of a token kind as users read it: `;`, `model`, identifier. */
static const char *token_name(yysymbol_kind_t k, char *buf, size_t n) {
    const char *raw = yysymbol_name(k);
    size_t len = strlen(raw);
    if (len >= 2 && (raw[0] == '\'' || raw[0] == '"')) { raw++; len -= 2; }
    if (k == YYSYMBOL_NUMBER || k == YYSYMBOL_STRING || k == YYSYMBOL_IDENT || k == YYSYMBOL_YYEOF)
        snprintf(buf, n, "%s %.*s", k == YYSYMBOL_IDENT ? "an" : k == YYSYMBOL_YYEOF ? "the" : "a",
                 (int)len, raw);
    else
        snprintf(buf, n, "`%.*s`", (int)len, raw);
    return buf;
}

static bool is_operator(yysymbol_kind_t k) {
    if (k == YYSYMBOL_LE || k == YYSYMBOL_GE || k == YYSYMBOL_EQ || k == YYSYMBOL_NE ||
        k == YYSYMBOL_ANDAND || k == YYSYMBOL_OROR)
        return true;
    for (const char *c = "+-*/%<>?"; *c; c++)
        if (is_char(k, *c)) return true;
    return false;
}

static bool starts_expr(yysymbol_kind_t k) {
    if (k == YYSYMBOL_NUMBER || k == YYSYMBOL_STRING || k == YYSYMBOL_IDENT) return true;
    for (const char *c = "([-+!"; *c; c++)
        if (is_char(k, *c)) return true;
    return false;
}

static bool is_keyword(yysymbol_kind_t k) {
    return k == YYSYMBOL_USE || k == YYSYMBOL_PARAM || k == YYSYMBOL_SCHEDULE ||
           k == YYSYMBOL_MODEL || k == YYSYMBOL_TRAIN || k == YYSYMBOL_STUDY || k == YYSYMBOL_IN;
}

static unsigned line_of(lexer *lx, uint32_t offset) {
    unsigned line, col;
    source_position(lx->session->sources.files[lx->file], offset, &line, &col);
    return line;
}

static char closer_of(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

static int yyreport_syntax_error(const yypcontext_t *ctx, lexer *lx, item **result,
                                 expr **expr_result) {
    (void)result;
    (void)expr_result;
    diag_engine *d = &lx->session->diag;
    yysymbol_kind_t want[YYNTOKENS];
    int n = yypcontext_expected_tokens(ctx, want, YYNTOKENS);
    yysymbol_kind_t found = yypcontext_token(ctx);
    tlm_loc loc = *yypcontext_location(ctx);

    /* Summarise: the tokens that can start an expression become "an
     * expression", and operators are left out when something else would do
     * (after `x = 1` we say "expected `;`", not a list of every operator). */
    bool expr_ok = false, other = false, semi = false, equals = false;
    for (int i = 0; i < n; i++) {
        if (want[i] == YYSYMBOL_NUMBER) expr_ok = true;
        if (!is_operator(want[i]) && !starts_expr(want[i])) other = true;
        if (is_char(want[i], ';')) semi = true;
        if (is_char(want[i], '=')) equals = true;
    }
    char list[512] = "", name[128];
    int shown = 0;
    size_t used = 0;
    yysymbol_kind_t keep[YYNTOKENS];
    int nkeep = 0;
    for (int i = 0; i < n; i++) {
        if (expr_ok && starts_expr(want[i])) continue;
        if (other && is_operator(want[i])) continue;
        keep[nkeep++] = want[i];
    }
    bool declaration = false;
    for (int i = 0; i < n; i++) declaration |= want[i] == YYSYMBOL_USE;
    if (declaration) {
        /* At the top level every keyword is possible: name the idea instead. */
        used += (size_t)snprintf(list + used, sizeof list - used,
                                 "a declaration (`use`, `param`, `schedule`, `model`, `study` or `train`)");
        shown = 5;
    }
    if (expr_ok) {
        used += (size_t)snprintf(list + used, sizeof list - used, "an expression");
        shown++;
    }
    for (int i = 0; i < nkeep && shown < 5; i++, shown++) {
        const char *sep = shown == 0 ? "" : (i == nkeep - 1 || shown == 4) ? " or " : ", ";
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", sep,
                                 token_name(keep[i], name, sizeof name));
        if (used >= sizeof list) used = sizeof list - 1;
    }

    char what[160];
    if (found == YYSYMBOL_IDENT || found == YYSYMBOL_NUMBER || is_keyword(found)) {
        uint32_t len = loc.end - loc.begin;
        const char *kind = found == YYSYMBOL_IDENT ? "" : found == YYSYMBOL_NUMBER ? "number "
                                                                              : "keyword ";
        snprintf(what, sizeof what, "%s`%.*s%s`", kind, len > 40 ? 40 : (int)len,
                 (const char *)lx->base + loc.begin, len > 40 ? "..." : "");
    } else {
        token_name(found, what, sizeof what);
    }

    /* A missing `;` at the end of a line is reported where it belongs: just
     * after the previous token, not at the start of the next line. */
    if (semi && found != YYSYMBOL_YYEOF && line_of(lx, loc.begin) > line_of(lx, lx->prev_end)) {
        tlm_loc at = {lx->file, lx->prev_end, lx->prev_end};
        diag_error(d, at, "expected `;` at the end of the line, found %s", what);
        return 0;
    }
    if (n == 0 && found == YYSYMBOL_YYEOF)
        diag_error(d, loc, "unexpected end of file");
    else if (n == 0)
        diag_error(d, loc, "unexpected %s", what);
    else
        diag_error(d, loc, "expected %s, found %s", list, what);

    if (equals && is_char(found, ':'))
        diag_hint(d, "settings and named arguments are written `name = value`");
    if (is_keyword(found) && (n == 1 && want[0] == YYSYMBOL_IDENT))
        diag_hint(d, "`%.*s` is a keyword and cannot be used as a name", (int)(loc.end - loc.begin),
                  (const char *)lx->base + loc.begin);
    if (found == YYSYMBOL_STRING && n == 1 && want[0] == YYSYMBOL_IDENT)
        diag_hint(d, "module names are written with dots, like `use std.schedules;`");
    bool comparison = found == YYSYMBOL_LE || found == YYSYMBOL_GE || found == YYSYMBOL_EQ ||
                      found == YYSYMBOL_NE || is_char(found, '<') || is_char(found, '>');
    if (comparison && other)
        diag_hint(d, "comparisons do not chain: write `a < b && b < c`");
    if (lx->nopen > 0) {
        open_bracket top = lx->open[lx->nopen - 1];
        bool closer_expected = false;
        for (int i = 0; i < n; i++) closer_expected |= is_char(want[i], closer_of(top.c));
        if (found == YYSYMBOL_YYEOF || closer_expected) {
            tlm_loc at = {lx->file, top.offset, top.offset + 1};
            diag_note(d, at, "to match this `%c` (expected `%c`)", top.c, closer_of(top.c));
        }
    }
    return 0;
}

static void yyerror(tlm_loc *loc, lexer *lx, item **result, expr **expr_result, const char *msg) {
    (void)result;
    (void)expr_result;
    if (strstr(msg, "exhausted"))
        diag_error(&lx->session->diag, *loc, "input nested too deeply (the limit is %d levels)",
                   YYMAXDEPTH);
    else
        diag_error(&lx->session->diag, *loc, "%s", msg);
}

item *parse_file(tlm_session *s, int file) {
    lexer lx;
    lexer_init(&lx, s, file);
    item *items = NULL;
    expr *unused = NULL;
    yyparse(&lx, &items, &unused);
    lexer_free(&lx);
    return items;
}

expr *parse_expression(tlm_session *s, int file) {
    lexer lx;
    lexer_init(&lx, s, file);
    lx.start_token = START_EXPR;
    item *unused = NULL;
    expr *e = NULL;
    int errors = s->diag.errors;
    yyparse(&lx, &unused, &e);
    lexer_free(&lx);
    return s->diag.errors > errors ? NULL : e;
}
