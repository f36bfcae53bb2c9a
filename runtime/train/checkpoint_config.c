#include "checkpoint_config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "tlm_rt/json.h"

char *tlm_ckpt_config_json(const tlm_so *so) {
    const tlm_abi_config *m = so->config;
    tlm_strbuf sb = {0};
    tlm_sb_printf(&sb,
                  "{\"vocab\":%" PRId64 ",\"context\":%" PRId64 ",\"d_model\":%" PRId64 ",\"layers\":%" PRId64
                  ",\"heads\":%" PRId64 ",\"head_dim\":%" PRId64 ",\"mixer\":\"%s\",\"mlp\":\"%s\","
                  "\"tie_embeddings\":%s,\"norm_eps\":%.17g,\"rope_base\":%.17g,\"widths\":[",
                  m->vocab, m->context, m->d_model, m->layers, m->heads, m->head_dim,
                  tlm_enum_name(&tlm_mixer_enum, m->mixer), tlm_enum_name(&tlm_mlp_enum, m->mlp),
                  m->tie_embeddings ? "true" : "false", m->norm_eps, m->rope_base);
    for (uint32_t l = 0; l < so->header->nlayers; l++)
        tlm_sb_printf(&sb, "%s%" PRId64, l ? "," : "", so->layers[l].width);
    /* the mixers' own settings, spelled as tests/reference/tapered_llama.py reads them */
    tlm_sb_printf(&sb, "],\"gate\":\"%s\",\"chunk\":%" PRId64 ",\"inner_lr\":%.17g,\"cms\":[",
                  tlm_enum_name(&tlm_gate_enum, m->gate), m->chunk, m->inner_lr);
    for (uint32_t i = 0; i < m->ncms && i < 8; i++) tlm_sb_printf(&sb, "%s%" PRId64, i ? "," : "", m->cms[i]);
    tlm_sb_puts(&sb, "]}");
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

static bool same_value(const tlm_json *a, const tlm_json *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case TLM_JSON_NULL: return true;
    case TLM_JSON_BOOL: return a->boolean == b->boolean;
    case TLM_JSON_NUMBER: return a->number == b->number && a->is_int == b->is_int && a->integer == b->integer;
    case TLM_JSON_STRING: return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
    case TLM_JSON_ARRAY:
        if (a->len != b->len) return false;
        for (size_t i = 0; i < a->len; i++)
            if (!same_value(&a->items[i], &b->items[i])) return false;
        return true;
    case TLM_JSON_OBJECT: return false; /* the config holds none */
    }
    return false;
}

/* A value as the message shows it: 4, 10000, "swiglu", [1, 2]. */
static void show(tlm_strbuf *sb, const tlm_json *v) {
    switch (v->type) {
    case TLM_JSON_NULL: tlm_sb_puts(sb, "null"); break;
    case TLM_JSON_BOOL: tlm_sb_puts(sb, v->boolean ? "true" : "false"); break;
    case TLM_JSON_NUMBER:
        if (v->is_int) tlm_sb_printf(sb, "%" PRId64, v->integer);
        else {
            char buf[32];
            tlm_sb_puts(sb, fmt_real(buf, sizeof buf, v->number)); /* 1e-05, not %.17g's 1.0000000000000001e-05 */
        }
        break;
    case TLM_JSON_STRING: tlm_sb_append(sb, v->str, v->len); break;
    case TLM_JSON_ARRAY:
        tlm_sb_puts(sb, "[");
        for (size_t i = 0; i < v->len; i++) {
            if (i) tlm_sb_puts(sb, ", ");
            show(sb, &v->items[i]);
        }
        tlm_sb_puts(sb, "]");
        break;
    case TLM_JSON_OBJECT: tlm_sb_puts(sb, "{...}"); break;
    }
}

bool tlm_ckpt_config_matches(const char *config, const tlm_so *so, const char *path, tlm_err *err) {
    if (!config) return true;
    char *ours_text = tlm_ckpt_config_json(so);
    if (!ours_text) return tlm_fail(err, "%s: out of memory", path);
    tlm_err e = {""};
    tlm_json *theirs = tlm_json_parse(config, strlen(config), &e);
    tlm_json *ours = tlm_json_parse(ours_text, strlen(ours_text), &e);
    free(ours_text);
    bool ok = true;
    if (!theirs || theirs->type != TLM_JSON_OBJECT) {
        ok = tlm_fail(err, "%s: its config (the architecture) is not a JSON object", path);
    } else if (!ours) {
        ok = tlm_fail(err, "%s: %s", path, e.msg);
    } else {
        for (size_t i = 0; i < ours->len && ok; i++) {
            const char *key = ours->keys[i];
            const tlm_json *there = tlm_json_get(theirs, key);
            if (!strcmp(key, "context") || !there || same_value(there, &ours->items[i])) continue;
            tlm_strbuf a = {0}, b = {0};
            show(&a, there);
            show(&b, &ours->items[i]);
            ok = tlm_fail(err,
                          "%s: trained as a `%s` with %s %s; this model.so has %s %s (was the model recompiled? "
                          "its weights would run as another network)",
                          path, tlm_so_str(so, so->config->name), key, a.oom ? "?" : a.buf, key, b.oom ? "?" : b.buf);
            tlm_sb_free(&a);
            tlm_sb_free(&b);
        }
    }
    tlm_json_free(theirs);
    tlm_json_free(ours);
    return ok;
}

/* JSON object text's `context` as a positive whole number, or -1. */
static int64_t context_of(const char *json) {
    if (!json) return -1;
    tlm_err e = {""};
    tlm_json *j = tlm_json_parse(json, strlen(json), &e);
    const tlm_json *c = j && j->type == TLM_JSON_OBJECT ? tlm_json_get(j, "context") : NULL;
    int64_t v = c && c->type == TLM_JSON_NUMBER && c->is_int && c->integer >= 1 ? c->integer : -1;
    tlm_json_free(j);
    return v;
}

int64_t tlm_ckpt_trained_context(const char *settings, const char *config) {
    int64_t run = context_of(settings);
    return run > 0 ? run : context_of(config);
}
