#include "model_so.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi_checksum.h"
#include "arena_plan.h"
#include "cpu_has.h"
#include "errmsg.h"
#include "le64.h"
#include "regular_file.h"
#include "sha256.h"

/* ---- the file: its integrity trailer, its ELF headers, loading ---- */

#ifdef MFD_EXEC
#define TLM_MFD_EXEC MFD_EXEC
#else
#define TLM_MFD_EXEC 0x0010u /* linux/memfd.h, Linux 6.3 */
#endif

void tlm_so_trailer(const uint8_t *image, uint64_t size, uint8_t trailer[TLM_SO_TRAILER_SIZE]) {
    memcpy(trailer, TLM_SO_TRAILER_MAGIC, 8);
    tlm_put_le64(trailer + 8, size);
    tlm_sha256(image, (size_t)size, trailer + 16);
}

/* dlopen maps whatever the ELF headers claim, and a header pointing past
 * the end could fault inside the loader. The trailer's hash already rules
 * out damage to a file tlmc wrote; these checks give a file that is not
 * one (or is cut short) a message of its own. */
static bool check_elf(const char *path, const uint8_t *image, uint64_t size, tlm_err *err) {
    Elf64_Ehdr eh;
    if (size == 0) return tlm_fail(err, "%s is empty (0 bytes): compile the model with tlmc", path);
    if (size >= SELFMAG && size < sizeof eh && memcmp(image, ELFMAG, SELFMAG) == 0)
        return tlm_fail(err, "%s is truncated: %llu bytes, shorter than an ELF header; recompile it with this tlmc",
                        path, (unsigned long long)size);
    if (size < sizeof eh || memcmp(image, ELFMAG, SELFMAG) != 0)
        return tlm_fail(err, "%s is not a compiled model (not an ELF shared object)", path);
    memcpy(&eh, image, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64)
        return tlm_fail(err, "%s is built for another machine (not x86-64 little-endian)", path);
    if (eh.e_type != ET_DYN) return tlm_fail(err, "%s is not a shared object", path);
    /* Compared without sums that could wrap: phnum and the entry sizes are
     * 16 bits, so their products cannot overflow. */
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size ||
        (uint64_t)eh.e_phnum * eh.e_phentsize > size - eh.e_phoff || eh.e_shoff > size ||
        (uint64_t)eh.e_shnum * eh.e_shentsize > size - eh.e_shoff)
        return tlm_fail(err,
                        "%s is truncated or damaged (headers past the end of the file); recompile it with this "
                        "tlmc",
                        path);
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, image + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
            return tlm_fail(err, "%s is truncated: a segment ends past byte %llu; recompile it with this tlmc", path,
                            (unsigned long long)size);
    }
    return true;
}

/* The trailer at the end of the file: present, recording the length of
 * what precedes it, and that part's SHA-256. *image_size gets that length. */
static bool check_trailer(const char *path, const uint8_t *bytes, uint64_t size, uint64_t *image_size, tlm_err *err) {
    const uint64_t n = TLM_SO_TRAILER_SIZE;
    if (size < n || memcmp(bytes + size - n, TLM_SO_TRAILER_MAGIC, 8) != 0) {
        /* A trailer followed by more bytes: the file was extended. */
        for (uint64_t p = size > n ? size - n : 0; p-- > 0;)
            if (bytes[p] == TLM_SO_TRAILER_MAGIC[0] && memcmp(bytes + p, TLM_SO_TRAILER_MAGIC, 8) == 0 &&
                tlm_get_le64(bytes + p + 8) == p)
                return tlm_fail(err,
                                "%s is damaged: %llu bytes follow its integrity trailer (recompile it with "
                                "this tlmc)",
                                path, (unsigned long long)(size - p - n));
        /* None: say what the file is if it is not a model at all. */
        if (!check_elf(path, bytes, size, err)) return false;
        return tlm_fail(err,
                        "%s has no integrity trailer: it is not a compiled tlm model, it was cut short, or "
                        "an older tlmc compiled it (recompile it with this tlmc)",
                        path);
    }
    uint64_t recorded = tlm_get_le64(bytes + size - n + 8);
    if (recorded != size - n)
        return tlm_fail(err,
                        "%s is damaged: its integrity trailer records %llu bytes before it, the file holds %llu "
                        "(recompile it with this tlmc)",
                        path, (unsigned long long)recorded, (unsigned long long)(size - n));
    uint8_t digest[TLM_SHA256_SIZE];
    tlm_sha256(bytes, (size_t)recorded, digest);
    if (memcmp(digest, bytes + size - n + 16, sizeof digest) != 0)
        return tlm_fail(err,
                        "%s is damaged: its SHA-256 is not the one tlmc recorded in it (recompile it with "
                        "this tlmc)",
                        path);
    *image_size = recorded;
    return true;
}

/* Loads the checked bytes themselves: written to a sealed memory file and
 * opened through /proc/self/fd, so nothing can change between the check
 * and the load (a path could be replaced in between). */
static void *load_image(const char *path, const uint8_t *image, uint64_t size, tlm_err *err) {
    const char *base = strrchr(path, '/');
    char name[64];
    snprintf(name, sizeof name, "tlm:%s", base ? base + 1 : path); /* in /proc/PID/maps */
    /* MFD_EXEC: where vm.memfd_noexec makes memory files non-executable by
     * default (Linux 6.3 on), ask for an executable one; older kernels do
     * not know the flag and refuse it, and need it not. */
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | TLM_MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        tlm_fail(err, "cannot load %s: memfd_create: %s", path, strerror(errno));
        return NULL;
    }
    for (uint64_t done = 0; done < size;) {
        ssize_t w = write(fd, image + done, (size_t)(size - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            tlm_fail(err, "cannot load %s: copying it to memory: %s", path, w < 0 ? strerror(errno) : "no space");
            close(fd);
            return NULL;
        }
        done += (uint64_t)w;
    }
    /* Best effort: a kernel without seals still loads what was written. */
    (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    /* dlopen returns an object already loaded under the same name, and a
     * model closed earlier may have had this descriptor's number while it
     * stays loaded. Take another number while the name is taken. */
    enum { TRIES = 16 };
    int fds[TRIES] = {fd};
    int nfds = 1;
    char proc[64];
    void *h = NULL;
    for (;;) {
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fds[nfds - 1]);
        void *taken = dlopen(proc, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
        if (!taken) break;
        dlclose(taken);
        if (nfds == TRIES || (fds[nfds] = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            tlm_fail(err, "cannot load %s: no free descriptor name to load it under", path);
            goto done;
        }
        nfds++;
    }
    (void)dlerror();
    h = dlopen(proc, RTLD_NOW | RTLD_LOCAL);
    if (!h) tlm_fail(err, "cannot load %s: %s", path, dlerror());
done:
    for (int i = 0; i < nfds; i++) close(fds[i]);
    return h;
}

/* ---- the validator ----
 * Everything a reader or the executor later follows without a check: the
 * tables' bounds, every string offset, every enum a switch or a name table
 * reads, every index an op holds, every buffer a plan places lying wholly
 * inside its arena (and every buffer its ops use placed), and the buffers
 * the runtime reads by role. A descriptor that passes cannot make the
 * executor read or write out of bounds through an index or an offset. */

static bool in_bounds(uint64_t off, uint64_t count, uint64_t elem, uint64_t size) {
    if (elem && count > size / elem) return false;
    return off <= size && count * elem <= size - off && off % 8 == 0;
}

/* The descriptor's parts once its bounds are known good. */
typedef struct blob_view {
    const tlm_blob_header *h;
    const char *strings;
    const tlm_abi_config *config;
    const tlm_abi_train *train;
    const tlm_abi_layer *layers;
    const tlm_abi_param *params;
    const tlm_abi_kernel *kernels;
    const tlm_abi_buffer *buffers;
    const tlm_abi_op *ops;
    const tlm_abi_plan *plans;
} blob_view;

static bool string_ok(const blob_view *v, uint32_t offset) { return offset < v->h->strings_size; }

static bool check_header(const uint8_t *blob, size_t size, blob_view *v, tlm_err *err) {
    if (size < sizeof(tlm_blob_header)) return tlm_fail(err, "model descriptor is truncated");
    const tlm_blob_header *h = (const tlm_blob_header *)blob;
    if (h->magic != TLM_ABI_MAGIC) return tlm_fail(err, "model descriptor has a wrong magic number");
    if (h->version != TLM_ABI_VERSION)
        return tlm_fail(err,
                        "model descriptor is version %u; this runtime reads version %u (recompile the "
                        "model with this tlmc)",
                        h->version, TLM_ABI_VERSION);
    if (h->size != size)
        return tlm_fail(err, "model descriptor size %llu does not match %zu", (unsigned long long)h->size, size);
    if (tlm_abi_checksum(blob + sizeof *h, size - sizeof *h) != h->checksum)
        return tlm_fail(err, "model descriptor is damaged (checksum mismatch)");
    if (!in_bounds(h->model_off, 1, sizeof(tlm_abi_config), size) ||
        !in_bounds(h->train_off, 1, sizeof(tlm_abi_train), size) ||
        !in_bounds(h->layers_off, h->nlayers, sizeof(tlm_abi_layer), size) ||
        !in_bounds(h->params_off, h->nparams, sizeof(tlm_abi_param), size) ||
        !in_bounds(h->kernels_off, h->nkernels, sizeof(tlm_abi_kernel), size) ||
        !in_bounds(h->buffers_off, h->nbuffers, sizeof(tlm_abi_buffer), size) ||
        !in_bounds(h->ops_off, h->nops, sizeof(tlm_abi_op), size) ||
        !in_bounds(h->plans_off, h->nplans, sizeof(tlm_abi_plan), size) ||
        !in_bounds(h->strings_off, h->strings_size, 1, size) || h->strings_size == 0)
        return tlm_fail(err, "model descriptor has a table outside its bounds");
    /* Operand indices are int32 and compared as such. */
    if (h->nbuffers > INT32_MAX || h->nparams > INT32_MAX || h->nkernels > INT32_MAX || h->nlayers > INT32_MAX)
        return tlm_fail(err, "model descriptor has tables too large to index");
    v->h = h;
    v->strings = (const char *)blob + h->strings_off;
    if (v->strings[h->strings_size - 1] != '\0') return tlm_fail(err, "model descriptor's strings are unterminated");
    v->config = (const tlm_abi_config *)(blob + h->model_off);
    v->train = (const tlm_abi_train *)(blob + h->train_off);
    v->layers = (const tlm_abi_layer *)(blob + h->layers_off);
    v->params = (const tlm_abi_param *)(blob + h->params_off);
    v->kernels = (const tlm_abi_kernel *)(blob + h->kernels_off);
    v->buffers = (const tlm_abi_buffer *)(blob + h->buffers_off);
    v->ops = (const tlm_abi_op *)(blob + h->ops_off);
    v->plans = (const tlm_abi_plan *)(blob + h->plans_off);
    return true;
}

static bool check_settings(const blob_view *v, tlm_err *err) {
    const tlm_abi_config *m = v->config;
    if (!string_ok(v, m->name)) return tlm_fail(err, "model descriptor: bad model name");
    if (!string_ok(v, m->tokenizer)) return tlm_fail(err, "model descriptor: bad tokenizer path");
    if (!string_ok(v, m->cpu_needs)) return tlm_fail(err, "model descriptor: bad CPU extension list");
    if (m->mixer >= TLM_MIXER_COUNT || m->mlp >= TLM_MLP_COUNT || m->gate >= TLM_GATE_COUNT || m->tie_embeddings > 1 ||
        m->ncms > sizeof m->cms / sizeof m->cms[0])
        return tlm_fail(err, "model descriptor: a model setting (mixer, mlp, gate, tie_embeddings or CMS "
                             "levels) is out of range");
    if (m->layers != v->h->nlayers || m->layers < 1 || m->d_model < 1 || m->vocab < 2 || m->heads < 1 ||
        m->head_dim < 1 || m->context < 1 || m->param_floats < 1)
        return tlm_fail(err, "model descriptor: inconsistent model settings");
    /* The runtime holds these in an int, and the validator's sums and
     * products of them (3·heads·head_dim, three weights' rows) must not
     * overflow. */
    if (m->d_model > INT32_MAX || m->vocab > INT32_MAX || m->heads > INT32_MAX || m->head_dim > INT32_MAX ||
        m->context > INT32_MAX || m->heads > INT32_MAX / m->head_dim || m->param_floats > (int64_t)1 << 60)
        return tlm_fail(err, "model descriptor: a model size is too large");
    if (v->train->optimizer >= TLM_OPT_COUNT || v->train->lr_schedule >= TLM_LR_COUNT)
        return tlm_fail(err, "model descriptor: the training defaults' optimizer or schedule is out of range");
    return true;
}

/* The length of a kernel symbol's stem (less "_fwd"), or -1 when it does
 * not end so. */
static int kernel_stem_length(const char *symbol) {
    static const char suffix[] = "_" TLM_ENTRY_FWD;
    size_t n = strlen(symbol), fwd = strlen(suffix);
    if (n <= fwd || n > 200 || strcmp(symbol + n - fwd, suffix) != 0) return -1;
    return (int)(n - fwd);
}

static bool check_layers_kernels(const blob_view *v, tlm_err *err) {
    const tlm_blob_header *h = v->h;
    for (uint32_t i = 0; i < h->nkernels; i++) {
        const tlm_abi_kernel *k = &v->kernels[i];
        if (!string_ok(v, k->symbol) || kernel_stem_length(v->strings + k->symbol) < 0 || k->mlp >= TLM_MLP_COUNT ||
            k->mlp != v->config->mlp || k->d_model != v->config->d_model || k->width < 1 ||
            k->cpu_impl >= TLM_MLP_IMPL_COUNT || !string_ok(v, k->cpu_impl_why))
            return tlm_fail(err, "model descriptor: kernel %u is invalid", i);
    }
    for (uint32_t l = 0; l < h->nlayers; l++) {
        const tlm_abi_layer *layer = &v->layers[l];
        if (layer->kernel >= h->nkernels || layer->width < 1 || v->kernels[layer->kernel].width != layer->width)
            return tlm_fail(err, "model descriptor: layer %u is invalid", l);
    }
    return true;
}

static bool check_params_buffers(const blob_view *v, tlm_err *err) {
    const tlm_blob_header *h = v->h;
    for (uint32_t i = 0; i < h->nparams; i++) {
        const tlm_abi_param *p = &v->params[i];
        if (!string_ok(v, p->name) || p->role >= TLM_P_COUNT || p->init >= TLM_INIT_COUNT || p->ndim < 1 ||
            p->ndim > 2 || p->shape[0] < 1 || (p->ndim == 2 && p->shape[1] < 1) || p->layer < -1 ||
            p->layer >= (int32_t)h->nlayers || p->period < 1)
            return tlm_fail(err, "model descriptor: parameter %u is invalid", i);
        if (p->offset < 0 || p->count < 1 || p->count > v->config->param_floats - p->offset ||
            p->count / p->shape[0] != (p->ndim == 2 ? p->shape[1] : 1) || p->count % p->shape[0] != 0)
            return tlm_fail(err,
                            "model descriptor: parameter %u lies outside the parameter block or does not "
                            "match its shape",
                            i);
    }
    for (uint32_t i = 0; i < h->nbuffers; i++) {
        const tlm_abi_buffer *b = &v->buffers[i];
        if (!string_ok(v, b->name) || b->role >= TLM_B_COUNT || b->layer < -1 || b->layer > (int32_t)h->nlayers ||
            b->per_token < 0 || b->per_token_t < 0 || b->per_seq < 0)
            return tlm_fail(err, "model descriptor: buffer %u is invalid", i);
    }
    return true;
}

/* An op's twelve operand slots, numbered as tlm_ops.h lays them out: in[4],
 * out[4], param[4]. */
enum { SLOTS = 12 };
#define SLOT(op, field) ((int)(offsetof(tlm_operands_##op, field) / sizeof(int32_t)))

static int32_t slot_value(const tlm_abi_op *op, int s) {
    return s < 4 ? op->in[s] : s < 8 ? op->out[s - 4] : op->param[s - 8];
}
static const char *slot_name(uint32_t kind, int s) {
    const tlm_op_info *info = &tlm_op_table[kind];
    return s < 4 ? info->in[s] : s < 8 ? info->out[s - 4] : info->param[s - 8];
}

/* The slots a GELU MLP leaves empty: it has no gate, so no gate weight and
 * no gate pre-activation (or its gradient); a SwiGLU MLP fills them. */
static bool is_gate_slot(uint32_t kind, int s) {
    if (kind == TLM_OP_MLP) return s == SLOT(mlp, out_pre_gate) || s == SLOT(mlp, param_w_gate);
    if (kind == TLM_OP_MLP_BACKWARD)
        return s == SLOT(mlp_backward, in_pre_gate) || s == SLOT(mlp_backward, out_d_pre_gate) ||
               s == SLOT(mlp_backward, param_w_gate);
    return false;
}

/* Ops whose parameters are read as the rows of one matrix. */
static bool reads_one_matrix(uint32_t kind) {
    return kind == TLM_OP_QKV || kind == TLM_OP_QKV_BACKWARD || kind == TLM_OP_LINEAR || kind == TLM_OP_LINEAR_DW ||
           kind == TLM_OP_LINEAR_DX;
}
static bool is_linear(uint32_t kind) {
    return kind == TLM_OP_LINEAR || kind == TLM_OP_LINEAR_DW || kind == TLM_OP_LINEAR_DX;
}

/* ---- what the executor reads through each operand ----
 * The executor computes its sizes from the config (D, A = heads·head_dim,
 * H, V), the kernel's width W and, for a linear op, its weight's shape; a
 * buffer or parameter smaller than that would let it read or write past
 * its slot of the arena or the parameter block. So each named slot has a
 * size here, and the validator checks the operand against it. A slot of the
 * op table without a size here is refused (the two tables must agree: a
 * new op fails every model until it has its sizes). */
typedef enum operand_size {
    SIZE_NONE,   /* not in this table */
    SIZE_1,      /* a float per token */
    SIZE_D,      /* d_model per token; a [D] parameter */
    SIZE_A,      /* heads·head_dim per token; a [A] parameter */
    SIZE_3A,     /* q, k, v packed */
    SIZE_W,      /* the kernel's width per token */
    SIZE_V,      /* the vocabulary per token */
    SIZE_H,      /* a float per head per token */
    SIZE_2H,     /* q and k's norms */
    SIZE_3H,     /* titans' three gates */
    SIZE_GATE,   /* gated attention's gate: H when head-wise, else A */
    SIZE_ROWS,   /* a linear op's output: its weight's rows */
    SIZE_COLS,   /* a linear op's input: its weight's columns */
    SIZE_SAVED,  /* titans' checkpoints: checked by tlm_model_create for its sizes */
    SIZE_VxD,    /* parameters: [V, D] */
    SIZE_AxD,    /* [A, D] */
    SIZE_DxA,    /* [D, A] */
    SIZE_WxD,    /* [W, D] */
    SIZE_DxW,    /* [D, W] */
    SIZE_HxD,    /* [H, D] */
    SIZE_MATRIX, /* any [rows, cols]: a linear op's weight */
} operand_size;

#define Z(op, field, size) [SLOT(op, field)] = size
static const uint8_t operand_sizes[TLM_OP_COUNT][SLOTS] = {
    [TLM_OP_EMBED] = {Z(embed, out_resid, SIZE_D), Z(embed, param_embed, SIZE_VxD)},
    [TLM_OP_RMSNORM] = {Z(rmsnorm, in_x, SIZE_D), Z(rmsnorm, out_y, SIZE_D), Z(rmsnorm, out_rstd, SIZE_1),
                        Z(rmsnorm, param_weight, SIZE_D)},
    [TLM_OP_QKV] = {Z(qkv, in_x, SIZE_D), Z(qkv, out_qkv, SIZE_3A), Z(qkv, param_wq, SIZE_AxD),
                    Z(qkv, param_wk, SIZE_AxD), Z(qkv, param_wv, SIZE_AxD)},
    [TLM_OP_ROPE] = {Z(rope, out_qkv, SIZE_3A)},
    [TLM_OP_ATTENTION] = {Z(attention, in_qkv, SIZE_3A), Z(attention, out_lse, SIZE_H), Z(attention, out_y, SIZE_A)},
    [TLM_OP_OUT_PROJ] = {Z(out_proj, in_y, SIZE_A), Z(out_proj, in_resid, SIZE_D), Z(out_proj, out_out, SIZE_D),
                         Z(out_proj, param_wo, SIZE_DxA)},
    [TLM_OP_MLP] = {Z(mlp, in_x, SIZE_D), Z(mlp, in_resid, SIZE_D), Z(mlp, out_pre_gate, SIZE_W),
                    Z(mlp, out_pre_up, SIZE_W), Z(mlp, out_out, SIZE_D), Z(mlp, param_w_gate, SIZE_WxD),
                    Z(mlp, param_w_up, SIZE_WxD), Z(mlp, param_w_down, SIZE_DxW)},
    [TLM_OP_HEAD] = {Z(head, in_x, SIZE_D), Z(head, out_logits, SIZE_V), Z(head, param_w, SIZE_VxD)},
    [TLM_OP_LOSS] = {Z(loss, in_logits, SIZE_V), Z(loss, out_lse, SIZE_1)},
    [TLM_OP_LOSS_BACKWARD] = {Z(loss_backward, in_logits, SIZE_V), Z(loss_backward, in_lse, SIZE_1),
                              Z(loss_backward, out_dlogits, SIZE_V)},
    [TLM_OP_HEAD_BACKWARD] = {Z(head_backward, in_dlogits, SIZE_V), Z(head_backward, in_x, SIZE_D),
                              Z(head_backward, out_dx, SIZE_D), Z(head_backward, param_w, SIZE_VxD)},
    [TLM_OP_RMSNORM_BACKWARD] = {Z(rmsnorm_backward, in_dy, SIZE_D), Z(rmsnorm_backward, in_x, SIZE_D),
                                 Z(rmsnorm_backward, in_rstd, SIZE_1), Z(rmsnorm_backward, out_dx, SIZE_D),
                                 Z(rmsnorm_backward, param_weight, SIZE_D)},
    [TLM_OP_MLP_BACKWARD] = {Z(mlp_backward, in_dout, SIZE_D), Z(mlp_backward, in_x, SIZE_D),
                             Z(mlp_backward, in_pre_gate, SIZE_W), Z(mlp_backward, in_pre_up, SIZE_W),
                             Z(mlp_backward, out_d_pre_gate, SIZE_W), Z(mlp_backward, out_d_pre_up, SIZE_W),
                             Z(mlp_backward, out_dx, SIZE_D), Z(mlp_backward, param_w_gate, SIZE_WxD),
                             Z(mlp_backward, param_w_up, SIZE_WxD), Z(mlp_backward, param_w_down, SIZE_DxW)},
    [TLM_OP_OUT_PROJ_BACKWARD] = {Z(out_proj_backward, in_dout, SIZE_D), Z(out_proj_backward, in_y, SIZE_A),
                                  Z(out_proj_backward, out_dy, SIZE_A), Z(out_proj_backward, param_wo, SIZE_DxA)},
    [TLM_OP_ATTENTION_BACKWARD] = {Z(attention_backward, in_dy, SIZE_A), Z(attention_backward, in_qkv, SIZE_3A),
                                   Z(attention_backward, in_lse, SIZE_H), Z(attention_backward, in_y, SIZE_A),
                                   Z(attention_backward, out_dqkv, SIZE_3A)},
    [TLM_OP_ROPE_BACKWARD] = {Z(rope_backward, out_dqkv, SIZE_3A)},
    [TLM_OP_QKV_BACKWARD] = {Z(qkv_backward, in_dqkv, SIZE_3A), Z(qkv_backward, in_x, SIZE_D),
                             Z(qkv_backward, out_dx, SIZE_D), Z(qkv_backward, param_wq, SIZE_AxD),
                             Z(qkv_backward, param_wk, SIZE_AxD), Z(qkv_backward, param_wv, SIZE_AxD)},
    [TLM_OP_EMBED_BACKWARD] = {Z(embed_backward, in_dresid, SIZE_D), Z(embed_backward, param_embed, SIZE_VxD)},
    [TLM_OP_LINEAR] = {Z(linear, in_x, SIZE_COLS), Z(linear, out_y, SIZE_ROWS), Z(linear, param_w0, SIZE_MATRIX),
                       Z(linear, param_w1, SIZE_MATRIX), Z(linear, param_w2, SIZE_MATRIX)},
    [TLM_OP_LINEAR_DW] = {Z(linear_dw, in_dy, SIZE_ROWS), Z(linear_dw, in_x, SIZE_COLS),
                          Z(linear_dw, param_w0, SIZE_MATRIX), Z(linear_dw, param_w1, SIZE_MATRIX),
                          Z(linear_dw, param_w2, SIZE_MATRIX)},
    [TLM_OP_LINEAR_DX] = {Z(linear_dx, in_dy, SIZE_ROWS), Z(linear_dx, out_dx, SIZE_COLS),
                          Z(linear_dx, param_w0, SIZE_MATRIX), Z(linear_dx, param_w1, SIZE_MATRIX),
                          Z(linear_dx, param_w2, SIZE_MATRIX)},
    [TLM_OP_SIGMOID_GATE] = {Z(sigmoid_gate, in_gate_pre, SIZE_GATE), Z(sigmoid_gate, in_y, SIZE_A),
                             Z(sigmoid_gate, out_out, SIZE_A)},
    [TLM_OP_SIGMOID_GATE_BACKWARD] = {Z(sigmoid_gate_backward, in_dout, SIZE_A), Z(sigmoid_gate_backward, in_y, SIZE_A),
                                      Z(sigmoid_gate_backward, in_gate_pre, SIZE_GATE),
                                      Z(sigmoid_gate_backward, out_dy, SIZE_A),
                                      Z(sigmoid_gate_backward, out_dgate_pre, SIZE_GATE)},
    [TLM_OP_SILU_GATE] = {Z(silu_gate, in_x, SIZE_A), Z(silu_gate, in_gate_pre, SIZE_A), Z(silu_gate, out_out, SIZE_A)},
    [TLM_OP_SILU_GATE_BACKWARD] = {Z(silu_gate_backward, in_dout, SIZE_A), Z(silu_gate_backward, in_x, SIZE_A),
                                   Z(silu_gate_backward, in_gate_pre, SIZE_A), Z(silu_gate_backward, out_dx, SIZE_A),
                                   Z(silu_gate_backward, out_dgate_pre, SIZE_A)},
    [TLM_OP_MEM_ACT] = {Z(memory_act, in_qkv, SIZE_3A), Z(memory_act, out_act, SIZE_3A),
                        Z(memory_act, out_mem_qkv, SIZE_3A), Z(memory_act, out_rnorm, SIZE_2H)},
    [TLM_OP_MEM_ACT_BACKWARD] = {Z(memory_act_backward, in_d_mem_qkv, SIZE_3A), Z(memory_act_backward, in_qkv, SIZE_3A),
                                 Z(memory_act_backward, in_act, SIZE_3A), Z(memory_act_backward, in_rnorm, SIZE_2H),
                                 Z(memory_act_backward, out_dqkv, SIZE_3A)},
    [TLM_OP_MEM_GATES] = {Z(memory_gates, in_pre, SIZE_3H), Z(memory_gates, out_gates, SIZE_3H)},
    [TLM_OP_MEM_GATES_BACKWARD] = {Z(memory_gates_backward, in_dgates, SIZE_3H),
                                   Z(memory_gates_backward, in_gates, SIZE_3H),
                                   Z(memory_gates_backward, out_dpre, SIZE_3H)},
    [TLM_OP_TITANS] = {Z(titans, in_mem_qkv, SIZE_3A), Z(titans, in_gates, SIZE_3H), Z(titans, out_y, SIZE_A),
                       Z(titans, out_saved, SIZE_SAVED)},
    [TLM_OP_TITANS_BACKWARD] = {Z(titans_backward, in_dy, SIZE_A), Z(titans_backward, in_mem_qkv, SIZE_3A),
                                Z(titans_backward, in_gates, SIZE_3H), Z(titans_backward, in_saved, SIZE_SAVED),
                                Z(titans_backward, out_d_mem_qkv, SIZE_3A), Z(titans_backward, out_dgates, SIZE_3H)},
    [TLM_OP_RMSNORM_HEADS] = {Z(rmsnorm_heads, in_x, SIZE_A), Z(rmsnorm_heads, out_y, SIZE_A),
                              Z(rmsnorm_heads, out_rstd, SIZE_H), Z(rmsnorm_heads, param_weight, SIZE_A)},
    [TLM_OP_RMSNORM_HEADS_BACKWARD] = {Z(rmsnorm_heads_backward, in_dy, SIZE_A),
                                       Z(rmsnorm_heads_backward, in_x, SIZE_A),
                                       Z(rmsnorm_heads_backward, in_rstd, SIZE_H),
                                       Z(rmsnorm_heads_backward, out_dx, SIZE_A),
                                       Z(rmsnorm_heads_backward, param_weight, SIZE_A)},
};
#undef Z

/* The sizes of one op, from the config, its kernel and its weight. */
typedef struct op_dims {
    int64_t D, A, H, V, W, gate, rows, cols;
} op_dims;

/* Floats per token a buffer needs for its slot. */
static int64_t buffer_floats(operand_size size, const op_dims *d) {
    switch (size) {
    case SIZE_1: return 1;
    case SIZE_D: return d->D;
    case SIZE_A: return d->A;
    case SIZE_3A: return 3 * d->A;
    case SIZE_W: return d->W;
    case SIZE_V: return d->V;
    case SIZE_H: return d->H;
    case SIZE_2H: return 2 * d->H;
    case SIZE_3H: return 3 * d->H;
    case SIZE_GATE: return d->gate;
    case SIZE_ROWS: return d->rows;
    case SIZE_COLS: return d->cols;
    default: return 0;
    }
}

/* The shape a parameter needs for its slot: rows, and cols (0: a vector). */
static void param_shape(operand_size size, const op_dims *d, int64_t *rows, int64_t *cols) {
    *rows = *cols = 0;
    switch (size) {
    case SIZE_D: *rows = d->D; break;
    case SIZE_A: *rows = d->A; break;
    case SIZE_VxD: *rows = d->V, *cols = d->D; break;
    case SIZE_AxD: *rows = d->A, *cols = d->D; break;
    case SIZE_DxA: *rows = d->D, *cols = d->A; break;
    case SIZE_WxD: *rows = d->W, *cols = d->D; break;
    case SIZE_DxW: *rows = d->D, *cols = d->W; break;
    case SIZE_HxD: *rows = d->H, *cols = d->D; break;
    default: break;
    }
}

/* Checks every operand of op i against what the executor reads through it. */
static bool check_operand_sizes(const blob_view *v, uint32_t i, tlm_err *err) {
    const tlm_abi_op *op = &v->ops[i];
    const tlm_abi_config *c = v->config;
    const char *name = tlm_op_name(op->kind);
    op_dims d = {.D = c->d_model,
                 .A = c->heads * c->head_dim,
                 .H = c->heads,
                 .V = c->vocab,
                 .W = op->kernel >= 0 ? v->kernels[op->kernel].width : 0};
    d.gate = c->gate == TLM_GATE_HEADWISE ? d.H : d.A;
    if (is_linear(op->kind)) {                     /* its weight: rows of one matrix */
        d.cols = v->params[op->param[0]].shape[1];
        for (int j = 0; j < 3 && op->param[j] >= 0; j++) d.rows += v->params[op->param[j]].shape[0];
    }
    for (int s = 0; s < SLOTS; s++) {
        const char *slot = slot_name(op->kind, s);
        operand_size size = (operand_size)operand_sizes[op->kind][s];
        if (slot[0] && size == SIZE_NONE)
            return tlm_fail(err,
                            "model descriptor: this reader has no size for op %s's operand %s (update "
                            "abi/model_so.c's operand_sizes with abi/tlm_ops.h)",
                            name, slot);
        int32_t x = slot_value(op, s);
        if (x < 0 || size == SIZE_SAVED) continue;
        if (s < 8) {
            const tlm_abi_buffer *b = &v->buffers[x];
            if (b->per_token < buffer_floats(size, &d))
                return tlm_fail(err, "model descriptor: op %u (%s): buffer %s is too small for its operand %s", i, name,
                                v->strings + b->name, slot);
            continue;
        }
        const tlm_abi_param *p = &v->params[x];
        int64_t rows, cols;
        param_shape(size, &d, &rows, &cols);
        bool ok = size == SIZE_MATRIX ? p->ndim == 2 && p->shape[0] >= 1 && p->shape[1] >= 1
                  : cols              ? p->ndim == 2 && p->shape[0] == rows && p->shape[1] == cols
                                      : p->ndim == 1 && p->shape[0] == rows;
        if (!ok)
            return tlm_fail(err, "model descriptor: op %u (%s): parameter %s has the wrong shape for its operand %s", i,
                            name, v->strings + p->name, slot);
    }
    return true;
}

static bool check_op(const blob_view *v, uint32_t i, tlm_err *err) {
    const tlm_blob_header *h = v->h;
    const tlm_abi_op *op = &v->ops[i];
    if (op->kind >= TLM_OP_COUNT) return tlm_fail(err, "model descriptor: op %u has an unknown kind %u", i, op->kind);
    const char *name = tlm_op_name(op->kind);
    if (op->layer < -1 || op->layer >= (int32_t)h->nlayers)
        return tlm_fail(err, "model descriptor: op %u (%s) names layer %d of %u", i, name, op->layer, h->nlayers);
    if (op->flags & ~TLM_OP_FLAG_ACCUMULATE)
        return tlm_fail(err, "model descriptor: op %u (%s) has unknown flags 0x%x", i, name, op->flags);
    /* Only these two honour the flag; on another op it would be ignored
     * silently, a write where the descriptor says add. */
    if ((op->flags & TLM_OP_FLAG_ACCUMULATE) && op->kind != TLM_OP_RMSNORM_BACKWARD && op->kind != TLM_OP_LINEAR_DX)
        return tlm_fail(err, "model descriptor: op %u (%s) cannot accumulate into its output", i, name);

    bool mlp = op->kind == TLM_OP_MLP || op->kind == TLM_OP_MLP_BACKWARD;
    bool swiglu = false;
    if (mlp) {
        if (op->kernel < 0 || op->kernel >= (int32_t)h->nkernels)
            return tlm_fail(err, "model descriptor: op %u (%s) names kernel %d of %u", i, name, op->kernel,
                            h->nkernels);
        if (op->layer < 0) return tlm_fail(err, "model descriptor: op %u (%s) belongs to no layer", i, name);
        if (v->kernels[op->kernel].width != v->layers[op->layer].width)
            return tlm_fail(err, "model descriptor: op %u (%s) runs a kernel of another width than its layer's", i,
                            name);
        swiglu = v->kernels[op->kernel].mlp == TLM_MLP_SWIGLU;
    } else if (op->kernel != -1) {
        return tlm_fail(err, "model descriptor: op %u (%s) names a kernel but is not an MLP", i, name);
    }

    for (int s = 0; s < SLOTS; s++) {
        int32_t x = slot_value(op, s);
        const char *slot = slot_name(op->kind, s);
        const char *group = s < 4 ? "input" : s < 8 ? "output" : "parameter";
        bool named = slot[0] != '\0';
        int32_t limit = s < 8 ? (int32_t)h->nbuffers : (int32_t)h->nparams;
        if (x < -1 || x >= limit)
            return tlm_fail(err, "model descriptor: op %u (%s): %s %s is %d, out of range (%d %ss)", i, name, group,
                            named ? slot : "(unused slot)", x, limit, s < 8 ? "buffer" : "parameter");
        bool optional = (is_gate_slot(op->kind, s) && !swiglu) ||
                        (is_linear(op->kind) && (s == SLOT(linear, param_w1) || s == SLOT(linear, param_w2)));
        if (!named && x != -1)
            return tlm_fail(err, "model descriptor: op %u (%s) fills %s slot %d, which its kind does not use", i, name,
                            group, s % 4);
        if (named && !optional && x < 0)
            return tlm_fail(err, "model descriptor: op %u (%s) lacks its operand %s", i, name, slot);
        if (is_gate_slot(op->kind, s) && !swiglu && x >= 0)
            return tlm_fail(err, "model descriptor: op %u (%s) of a GELU MLP has a gate operand %s", i, name, slot);
    }
    /* A linear map's weight is w0, w0 + w1 or all three: linear_rows stops
     * at the first absent one, so a gap would drop w2 silently. */
    if (is_linear(op->kind) && op->linear.param_w1 < 0 && op->linear.param_w2 >= 0)
        return tlm_fail(err, "model descriptor: op %u (%s) has w2 without w1", i, name);
    if (reads_one_matrix(op->kind)) {
        for (int j = 1; j < 4 && op->param[j] >= 0; j++) {
            const tlm_abi_param *a = &v->params[op->param[j - 1]], *b = &v->params[op->param[j]];
            if (a->ndim != 2 || b->ndim != 2 || b->offset != a->offset + a->count || a->shape[1] != b->shape[1])
                return tlm_fail(err, "model descriptor: op %u (%s) reads parameters that are not one matrix", i, name);
        }
    }
    return check_operand_sizes(v, i, err);
}

static bool check_plans(const blob_view *v, const uint8_t *blob, size_t size, tlm_err *err) {
    const tlm_blob_header *h = v->h;
    if (h->nplans != TLM_PLAN_COUNT)
        return tlm_fail(err, "model descriptor has %u memory plans, not %d (training and inference)", h->nplans,
                        TLM_PLAN_COUNT);
    const tlm_abi_plan *train = &v->plans[TLM_PLAN_TRAIN], *infer = &v->plans[TLM_PLAN_INFER];
    /* Training runs every op; inference the forward ones, a prefix. */
    if (train->nops != h->nops)
        return tlm_fail(err, "model descriptor: the training plan covers %u of %u ops", train->nops, h->nops);
    if (infer->nops < 1 || infer->nops > train->nops)
        return tlm_fail(err, "model descriptor: the inference plan covers %u ops of the training plan's %u",
                        infer->nops, train->nops);
    for (uint32_t p = 0; p < h->nplans; p++) {
        const tlm_abi_plan *plan = &v->plans[p];
        if (plan->kind != p || plan->batch < 1 || plan->seq < 1 || plan->arena_bytes < 0 ||
            !in_bounds(plan->offsets_off, h->nbuffers, sizeof(int64_t), size))
            return tlm_fail(err, "model descriptor: memory plan %u is invalid", p);
        const int64_t *offsets = (const int64_t *)(blob + plan->offsets_off);
        for (uint32_t b = 0; b < h->nbuffers; b++) {
            /* Every placed buffer whole, used by an op of the plan or not. */
            int64_t bytes = offsets[b] < 0 ? 0 : tlm_buffer_bytes(&v->buffers[b], plan->batch, plan->seq);
            bool overflows = offsets[b] >= 0 && bytes == 0 &&
                             (v->buffers[b].per_token || v->buffers[b].per_token_t || v->buffers[b].per_seq);
            if (offsets[b] < -1 || offsets[b] > plan->arena_bytes || overflows ||
                (offsets[b] >= 0 && bytes > plan->arena_bytes - offsets[b]))
                return tlm_fail(err, "model descriptor: memory plan %u places buffer %u (%s) outside its arena", p, b,
                                v->strings + v->buffers[b].name);
            if (offsets[b] > 0 && offsets[b] % TLM_ARENA_ALIGN != 0)
                return tlm_fail(err, "model descriptor: memory plan %u places buffer %u at a misaligned offset", p, b);
        }
        for (uint32_t i = 0; i < plan->nops; i++) {
            const tlm_abi_op *op = &v->ops[i];
            for (int s = 0; s < 8; s++) {
                int32_t b = slot_value(op, s);
                if (b >= 0 && offsets[b] < 0)
                    return tlm_fail(err,
                                    "model descriptor: memory plan %u does not place buffer %d (%s), which op %u uses",
                                    p, b, v->strings + v->buffers[b].name, i);
            }
        }
    }
    return true;
}

/* ---- the buffers the runtime finds by role ----
 * Not through an op: tlm_model_buffer takes the first buffer of a role and
 * layer. eval and sample read the logits, V per token, after the
 * inference plan's ops; probe reads the residual stream around each MLP
 * (mid.l and resid.l+1), D per token, after the training plan's. Each must
 * exist, hold that much, and be an operand of an op of that plan (any
 * plan, stored or made for other sizes, places exactly those). */

static int32_t find_buffer(const blob_view *v, uint32_t role, int32_t layer) {
    for (uint32_t i = 0; i < v->h->nbuffers; i++)
        if (v->buffers[i].role == role && v->buffers[i].layer == layer) return (int32_t)i;
    return -1;
}

static bool check_role_buffer(const blob_view *v, uint32_t role, int32_t layer, const char *name, int64_t floats,
                              int plan, tlm_err *err) {
    int32_t b = find_buffer(v, role, layer);
    if (b < 0) return tlm_fail(err, "model descriptor has no %s buffer, which the runtime reads", name);
    if (v->buffers[b].per_token < floats)
        return tlm_fail(err, "model descriptor: the %s buffer holds %lld floats per token, not %lld", name,
                        (long long)v->buffers[b].per_token, (long long)floats);
    for (uint32_t i = 0; i < v->plans[plan].nops; i++)
        for (int s = 0; s < 8; s++)
            if (slot_value(&v->ops[i], s) == b) return true;
    return tlm_fail(err, "model descriptor: no op of the %s plan uses the %s buffer, which the runtime reads after it",
                    plan == TLM_PLAN_TRAIN ? "training" : "inference", name);
}

static bool check_role_buffers(const blob_view *v, tlm_err *err) {
    const tlm_abi_config *c = v->config;
    if (!check_role_buffer(v, TLM_B_LOGITS, -1, "logits", c->vocab, TLM_PLAN_INFER, err)) return false;
    for (int32_t l = 0; l < (int32_t)v->h->nlayers; l++) {
        char mid[32], resid[32];
        snprintf(mid, sizeof mid, "mid.%d", l);
        snprintf(resid, sizeof resid, "resid.%d", l + 1);
        if (!check_role_buffer(v, TLM_B_MID, l, mid, c->d_model, TLM_PLAN_TRAIN, err) ||
            !check_role_buffer(v, TLM_B_RESID, l + 1, resid, c->d_model, TLM_PLAN_TRAIN, err))
            return false;
    }
    return true;
}

/* Validates the blob and locates its tables in *v. */
static bool validate(const uint8_t *blob, size_t size, blob_view *v, tlm_err *err) {
    if (!check_header(blob, size, v, err) || !check_settings(v, err) || !check_layers_kernels(v, err) ||
        !check_params_buffers(v, err))
        return false;
    for (uint32_t i = 0; i < v->h->nops; i++)
        if (!check_op(v, i, err)) return false;
    return check_plans(v, blob, size, err) && check_role_buffers(v, err);
}

bool tlm_blob_validate(const uint8_t *blob, size_t size, tlm_err *err) {
    blob_view v;
    return validate(blob, size, &v, err);
}

/* ---- the reader ---- */

bool tlm_blob_read(const uint8_t *blob, size_t size, tlm_so_tables *t, tlm_err *err) {
    memset(t, 0, sizeof *t);
    blob_view v;
    if (!validate(blob, size, &v, err)) return false;
    const tlm_blob_header *h = v.h;
    /* One array holds every name: parameters, then kernels, then buffers,
     * then why each kernel's CPU implementation was chosen. */
    const char **names = malloc(((size_t)h->nparams + 2 * (size_t)h->nkernels + h->nbuffers + 1) * sizeof *names);
    if (!names) return tlm_fail(err, "out of memory reading the model descriptor");
    for (uint32_t i = 0; i < h->nparams; i++) names[i] = v.strings + v.params[i].name;
    for (uint32_t i = 0; i < h->nkernels; i++) names[h->nparams + i] = v.strings + v.kernels[i].symbol;
    for (uint32_t i = 0; i < h->nbuffers; i++) names[h->nparams + h->nkernels + i] = v.strings + v.buffers[i].name;
    const char **whys = names + h->nparams + h->nkernels + h->nbuffers;
    for (uint32_t i = 0; i < h->nkernels; i++) whys[i] = v.strings + v.kernels[i].cpu_impl_why;
    *t = (tlm_so_tables){
        .config = v.config,
        .train = v.train,
        .layers = v.layers,
        .params = v.params,
        .kernels = v.kernels,
        .buffers = v.buffers,
        .ops = v.ops,
        .plans = v.plans,
        .nlayers = h->nlayers,
        .nparams = h->nparams,
        .nkernels = h->nkernels,
        .nbuffers = h->nbuffers,
        .nops = h->nops,
        .model_name = v.strings + v.config->name,
        .tokenizer_path = v.config->tokenizer ? v.strings + v.config->tokenizer : NULL,
        .cpu_needs = v.config->cpu_needs ? v.strings + v.config->cpu_needs : NULL,
        .param_names = names,
        .kernel_symbols = names + h->nparams,
        .buffer_names = names + h->nparams + h->nkernels,
        .kernel_impl_whys = whys,
    };
    for (int p = 0; p < TLM_PLAN_COUNT; p++) t->plan_offsets[p] = (const int64_t *)(blob + v.plans[p].offsets_off);
    return true;
}

void tlm_so_tables_free(tlm_so_tables *t) {
    free((void *)t->param_names);              /* the one array of tlm_blob_read */
    memset(t, 0, sizeof *t);
}

/* The file's bytes once its trailer and ELF headers check out (malloc'd,
 * *image_size: the ELF image's length), or NULL with the reason. */
static uint8_t *read_checked(const char *path, uint64_t *image_size, tlm_err *err) {
    size_t size = 0;
    uint8_t *bytes = tlm_read_regular(path, TLM_SO_MAX_BYTES, "a compiled model", &size, err);
    if (bytes && !(check_trailer(path, bytes, size, image_size, err) && check_elf(path, bytes, *image_size, err))) {
        free(bytes);
        bytes = NULL;
    }
    return bytes;
}

bool tlm_so_check_file(const char *path, tlm_err *err) {
    uint64_t image_size = 0;
    uint8_t *bytes = read_checked(path, &image_size, err);
    free(bytes);
    return bytes != NULL;
}

bool tlm_so_open(const char *path, tlm_so *m, tlm_err *err) {
    memset(m, 0, sizeof *m);
    uint64_t image_size = 0;
    uint8_t *bytes = read_checked(path, &image_size, err);
    if (!bytes) return false;
    void *h = load_image(path, bytes, image_size, err);
    free(bytes);
    if (!h) return false;
    m->handle = h;
    const uint32_t *magic = dlsym(h, TLM_SYM_MAGIC);
    const uint32_t *version = dlsym(h, TLM_SYM_VERSION);
    if (!magic) {
        tlm_so_close(m);
        return tlm_fail(err, "%s is not a compiled tlm model (no %s)", path, TLM_SYM_MAGIC);
    }
    if (*magic != TLM_ABI_MAGIC) {
        tlm_so_close(m);
        return tlm_fail(err, "%s has a wrong magic number", path);
    }
    if (!version) {
        tlm_so_close(m);
        return tlm_fail(err, "%s lacks %s", path, TLM_SYM_VERSION);
    }
    if (*version != TLM_ABI_VERSION) {
        uint32_t v = *version;
        tlm_so_close(m);
        return tlm_fail(err,
                        "%s was compiled for model ABI version %u; this tlm-run reads version %u "
                        "(recompile it with this tlmc)",
                        path, v, TLM_ABI_VERSION);
    }
    const uint8_t *blob = dlsym(h, TLM_SYM_BLOB);
    const uint64_t *blob_size = dlsym(h, TLM_SYM_BLOB_SIZE);
    const tlm_kernel_fns *fns = dlsym(h, TLM_SYM_KERNELS);
    const char *cuda = dlsym(h, TLM_SYM_CUDA);
    const char *missing = !blob        ? TLM_SYM_BLOB
                          : !blob_size ? TLM_SYM_BLOB_SIZE
                          : !fns       ? TLM_SYM_KERNELS
                          : !cuda      ? TLM_SYM_CUDA
                                       : NULL;
    if (missing) {
        tlm_so_close(m);
        return tlm_fail(err, "%s lacks the symbol %s", path, missing);
    }
    tlm_err why = {""};
    if (!tlm_blob_read(blob, (size_t)*blob_size, &m->tables, &why)) {
        tlm_so_close(m);
        return tlm_fail(err, "%s: %s", path, why.msg);
    }
    const tlm_blob_header *hd = (const tlm_blob_header *)blob;
    m->header = hd;
    m->strings = (const char *)blob + hd->strings_off;
    m->kernel_fns = fns;
    m->cuda_source = cuda;
    for (uint32_t k = 0; k < hd->nkernels; k++) {
        if (!fns[k].fwd || !fns[k].bwd_data || !fns[k].bwd_weight) {
            tlm_so_close(m);
            return tlm_fail(err, "%s: kernel %u has a missing entry point", path, k);
        }
    }
    return true;
}

#if defined(__x86_64__)
/* Whether the CPU has the extension `name` (a cpu_needs entry); false for
 * a name this build cannot test. */
static bool cpu_has(const char *name, size_t n) {
    __builtin_cpu_init();
#define CPU_IS(feature, test) \
    if (n == sizeof feature - 1 && !strncmp(name, feature, n)) return test;
#define CPU_HAS(feature) CPU_IS(feature, __builtin_cpu_supports(feature))
    CPU_HAS("sse3") CPU_HAS("ssse3") CPU_HAS("sse4.1") CPU_HAS("sse4.2") CPU_HAS("popcnt");
    CPU_HAS("avx") CPU_HAS("avx2") CPU_HAS("fma") CPU_IS("f16c", TLM_CPU_HAS_F16C) CPU_HAS("bmi") CPU_HAS("bmi2");
    CPU_IS("lzcnt", TLM_CPU_HAS_LZCNT)
    CPU_IS("movbe", TLM_CPU_HAS_MOVBE) CPU_HAS("fma4") CPU_HAS("xop") CPU_HAS("avx512f");
    CPU_HAS("avx512bw") CPU_HAS("avx512cd") CPU_HAS("avx512dq") CPU_HAS("avx512vl");
#undef CPU_HAS
#undef CPU_IS
    return false;
}
#endif

bool tlm_so_cpu_ok(const tlm_so *m, tlm_err *err) {
    const char *needs = m->cpu_needs;
    if (!needs || !*needs) return true;
#if defined(__x86_64__)
    char lacks[256] = "";
    size_t used = 0;
    for (const char *p = needs; *p;) {
        size_t n = strcspn(p, ",");
        if (!cpu_has(p, n) && used < sizeof lacks)
            used += (size_t)snprintf(lacks + used, sizeof lacks - used, "%s%.*s", used ? ", " : "", (int)n, p);
        p += n + (p[n] == ',');
    }
    if (!used) return true;
    return tlm_fail(err,
                    "%s: its CPU kernels use %s, which this CPU lacks (they would stop on an illegal "
                    "instruction); compile the model on this machine (or with tlmc --cpu x86-64-v3 for any AVX2 "
                    "CPU): its checkpoints stay usable",
                    m->model_name, lacks);
#else
    (void)err;
    return true; /* tlm_so_open already refused a model.so for another machine */
#endif
}

void tlm_so_close(tlm_so *m) {
    tlm_so_tables_free(&m->tables);
    if (m->handle) dlclose(m->handle);
    memset(m, 0, sizeof *m);
}

const char *tlm_so_str(const tlm_so *m, uint32_t offset) { return m->strings + offset; }

const char *tlm_so_kernel_stem(const tlm_so *m, uint32_t k, int *len) {
    const char *symbol = tlm_so_str(m, m->kernels[k].symbol);
    *len = kernel_stem_length(symbol);
    return symbol;
}

const int64_t *tlm_so_plan_offsets(const tlm_so *m, int plan) { return m->plan_offsets[plan]; }
