#include "model_so.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "abi_checksum.h"
#include "errmsg.h"


/* dlopen maps whatever the ELF headers claim; a file cut short or a
 * foreign one could fault inside the loader. So the headers are checked
 * against the real file size first. */
static bool check_elf(const char *path, char *err, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return tlm_fail(err, n, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    Elf64_Ehdr eh;
    bool ok = false;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        tlm_fail(err, n, "%s is not a regular file", path);
    } else if (fread(&eh, 1, sizeof eh, f) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        tlm_fail(err, n, "%s is not a compiled model (not an ELF shared object)", path);
    } else if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
               eh.e_machine != EM_X86_64) {
        tlm_fail(err, n, "%s is built for another machine (not x86-64 little-endian)", path);
    } else if (eh.e_type != ET_DYN) {
        tlm_fail(err, n, "%s is not a shared object", path);
    } else {
        uint64_t size = (uint64_t)st.st_size;
        uint64_t ph_end = eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize;
        uint64_t sh_end = eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize;
        if (eh.e_phentsize != sizeof(Elf64_Phdr) || ph_end > size || sh_end > size) {
            tlm_fail(err, n, "%s is truncated or damaged (headers past the end of the file)", path);
        } else {
            ok = true;
            for (int i = 0; ok && i < eh.e_phnum; i++) {
                Elf64_Phdr ph;
                if (fseek(f, (long)(eh.e_phoff + (uint64_t)i * sizeof ph), SEEK_SET) != 0 ||
                    fread(&ph, 1, sizeof ph, f) != sizeof ph)
                    ok = tlm_fail(err, n, "%s is truncated (cannot read program header %d)", path, i);
                else if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > size)
                    ok = tlm_fail(err, n, "%s is truncated: a segment ends at byte %llu of %llu", path,
                              (unsigned long long)(ph.p_offset + ph.p_filesz), (unsigned long long)size);
            }
        }
    }
    fclose(f);
    return ok;
}

static bool in_bounds(uint64_t off, uint64_t count, uint64_t elem, uint64_t size) {
    if (elem && count > size / elem) return false;
    return off <= size && count * elem <= size - off && off % 8 == 0;
}

bool tlm_blob_validate(const uint8_t *blob, size_t size, char *err, size_t n) {
    if (size < sizeof(tlm_blob_header)) return tlm_fail(err, n, "model descriptor is truncated");
    const tlm_blob_header *h = (const tlm_blob_header *)blob;
    if (h->magic != TLM_ABI_MAGIC) return tlm_fail(err, n, "model descriptor has a wrong magic number");
    if (h->version != TLM_ABI_VERSION)
        return tlm_fail(err, n, "model descriptor is version %u; this runtime reads version %u (recompile the "
                    "model with this tlmc)", h->version, TLM_ABI_VERSION);
    if (h->size != size) return tlm_fail(err, n, "model descriptor size %llu does not match %zu",
                                     (unsigned long long)h->size, size);
    if (tlm_abi_checksum(blob + sizeof *h, size - sizeof *h) != h->checksum)
        return tlm_fail(err, n, "model descriptor is damaged (checksum mismatch)");
    if (!in_bounds(h->model_off, 1, sizeof(tlm_abi_config), size) ||
        !in_bounds(h->train_off, 1, sizeof(tlm_abi_train), size) ||
        !in_bounds(h->layers_off, h->nlayers, sizeof(tlm_abi_layer), size) ||
        !in_bounds(h->params_off, h->nparams, sizeof(tlm_abi_param), size) ||
        !in_bounds(h->kernels_off, h->nkernels, sizeof(tlm_abi_kernel), size) ||
        !in_bounds(h->buffers_off, h->nbuffers, sizeof(tlm_abi_buffer), size) ||
        !in_bounds(h->ops_off, h->nops, sizeof(tlm_abi_op), size) ||
        !in_bounds(h->plans_off, h->nplans, sizeof(tlm_abi_plan), size) ||
        !in_bounds(h->strings_off, h->strings_size, 1, size) || h->strings_size == 0)
        return tlm_fail(err, n, "model descriptor has a table outside its bounds");
    const char *strings = (const char *)blob + h->strings_off;
    if (strings[h->strings_size - 1] != '\0') return tlm_fail(err, n, "model descriptor's strings are unterminated");
    const tlm_abi_config *m = (const tlm_abi_config *)(blob + h->model_off);
#define STR_OK(off) ((off) < h->strings_size)
    if (!STR_OK(m->name)) return tlm_fail(err, n, "model descriptor: bad model name");
    if (m->layers != h->nlayers || m->layers < 1 || m->d_model < 1 || m->vocab < 2 || m->heads < 1 ||
        m->head_dim < 1 || m->context < 1 || m->param_floats < 1 || m->ncms > 8)
        return tlm_fail(err, n, "model descriptor: inconsistent model settings");
    const tlm_abi_layer *layers = (const tlm_abi_layer *)(blob + h->layers_off);
    for (uint32_t l = 0; l < h->nlayers; l++)
        if (layers[l].kernel >= h->nkernels || layers[l].width < 1)
            return tlm_fail(err, n, "model descriptor: layer %u is invalid", l);
    const tlm_abi_param *params = (const tlm_abi_param *)(blob + h->params_off);
    for (uint32_t i = 0; i < h->nparams; i++) {
        const tlm_abi_param *p = &params[i];
        if (!STR_OK(p->name) || p->role >= TLM_P_COUNT || p->ndim < 1 || p->ndim > 2 || p->offset < 0 ||
            p->count < 1 || p->count > m->param_floats - p->offset ||
            p->count != p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1) || p->layer < -1 ||
            p->layer >= (int32_t)h->nlayers || p->period < 1)
            return tlm_fail(err, n, "model descriptor: parameter %u is invalid", i);
    }
    const tlm_abi_kernel *kernels = (const tlm_abi_kernel *)(blob + h->kernels_off);
    for (uint32_t i = 0; i < h->nkernels; i++)
        if (!STR_OK(kernels[i].symbol) || kernels[i].mlp > TLM_MLP_GELU || kernels[i].d_model != m->d_model)
            return tlm_fail(err, n, "model descriptor: kernel %u is invalid", i);
    const tlm_abi_buffer *buffers = (const tlm_abi_buffer *)(blob + h->buffers_off);
    for (uint32_t i = 0; i < h->nbuffers; i++)
        if (!STR_OK(buffers[i].name) || buffers[i].role >= TLM_B_COUNT || buffers[i].per_token < 0 ||
            buffers[i].per_token_t < 0 || buffers[i].per_seq < 0)
            return tlm_fail(err, n, "model descriptor: buffer %u is invalid", i);
    const tlm_abi_op *ops = (const tlm_abi_op *)(blob + h->ops_off);
    for (uint32_t i = 0; i < h->nops; i++) {
        const tlm_abi_op *op = &ops[i];
        bool ok = op->kind < TLM_OP_COUNT && op->kernel >= -1 && op->kernel < (int32_t)h->nkernels;
        for (int j = 0; j < 4; j++) {
            ok &= op->in[j] >= -1 && op->in[j] < (int32_t)h->nbuffers;
            ok &= op->out[j] >= -1 && op->out[j] < (int32_t)h->nbuffers;
            ok &= op->param[j] >= -1 && op->param[j] < (int32_t)h->nparams;
        }
        if (!ok) return tlm_fail(err, n, "model descriptor: op %u is invalid", i);
    }
    const tlm_abi_plan *plans = (const tlm_abi_plan *)(blob + h->plans_off);
    for (uint32_t i = 0; i < h->nplans; i++) {
        if (plans[i].nops > h->nops || !in_bounds(plans[i].offsets_off, h->nbuffers, 8, size) ||
            plans[i].arena_bytes < 0)
            return tlm_fail(err, n, "model descriptor: memory plan %u is invalid", i);
        const int64_t *off = (const int64_t *)(blob + plans[i].offsets_off);
        for (uint32_t b = 0; b < h->nbuffers; b++)
            if (off[b] < -1 || off[b] > plans[i].arena_bytes)
                return tlm_fail(err, n, "model descriptor: memory plan %u places buffer %u outside its arena", i, b);
    }
#undef STR_OK
    return true;
}

bool tlm_so_open(const char *path, tlm_so *m, char *err, size_t n) {
    memset(m, 0, sizeof *m);
    if (!check_elf(path, err, n)) return false;
    /* A bare name would be looked up on the library path, not here. */
    char local[4096];
    snprintf(local, sizeof local, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *h = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    if (!h) return tlm_fail(err, n, "cannot load %s: %s", path, dlerror());
    m->handle = h;
    const uint32_t *magic = dlsym(h, TLM_SYM_MAGIC);
    const uint32_t *version = dlsym(h, TLM_SYM_VERSION);
    if (!magic) { tlm_so_close(m); return tlm_fail(err, n, "%s is not a compiled tlm model (no %s)", path, TLM_SYM_MAGIC); }
    if (*magic != TLM_ABI_MAGIC) { tlm_so_close(m); return tlm_fail(err, n, "%s has a wrong magic number", path); }
    if (!version) { tlm_so_close(m); return tlm_fail(err, n, "%s lacks %s", path, TLM_SYM_VERSION); }
    if (*version != TLM_ABI_VERSION) {
        uint32_t v = *version;
        tlm_so_close(m);
        return tlm_fail(err, n, "%s was compiled for model ABI version %u; this tlm-run reads version %u "
                    "(recompile it with this tlmc)", path, v, TLM_ABI_VERSION);
    }
    const uint8_t *blob = dlsym(h, TLM_SYM_BLOB);
    const uint64_t *blob_size = dlsym(h, TLM_SYM_BLOB_SIZE);
    const tlm_kernel_fns *fns = dlsym(h, TLM_SYM_KERNELS);
    const char *cuda = dlsym(h, TLM_SYM_CUDA);
    const char *missing = !blob ? TLM_SYM_BLOB : !blob_size ? TLM_SYM_BLOB_SIZE : !fns ? TLM_SYM_KERNELS
                        : !cuda ? TLM_SYM_CUDA : NULL;
    if (missing) { tlm_so_close(m); return tlm_fail(err, n, "%s lacks the symbol %s", path, missing); }
    char why[256];
    if (!tlm_blob_validate(blob, (size_t)*blob_size, why, sizeof why)) {
        tlm_so_close(m);
        return tlm_fail(err, n, "%s: %s", path, why);
    }
    const tlm_blob_header *hd = (const tlm_blob_header *)blob;
    m->header = hd;
    m->config = (const tlm_abi_config *)(blob + hd->model_off);
    m->train = (const tlm_abi_train *)(blob + hd->train_off);
    m->layers = (const tlm_abi_layer *)(blob + hd->layers_off);
    m->params = (const tlm_abi_param *)(blob + hd->params_off);
    m->kernels = (const tlm_abi_kernel *)(blob + hd->kernels_off);
    m->buffers = (const tlm_abi_buffer *)(blob + hd->buffers_off);
    m->ops = (const tlm_abi_op *)(blob + hd->ops_off);
    m->plans = (const tlm_abi_plan *)(blob + hd->plans_off);
    m->strings = (const char *)blob + hd->strings_off;
    m->kernel_fns = fns;
    m->cuda_source = cuda;
    for (uint32_t k = 0; k < hd->nkernels; k++) {
        if (!fns[k].fwd || !fns[k].bwd_data || !fns[k].bwd_weight) {
            tlm_so_close(m);
            return tlm_fail(err, n, "%s: kernel %u has a missing entry point", path, k);
        }
    }
    return true;
}

void tlm_so_close(tlm_so *m) {
    if (m->handle) dlclose(m->handle);
    memset(m, 0, sizeof *m);
}

const char *tlm_so_str(const tlm_so *m, uint32_t offset) { return m->strings + offset; }

const int64_t *tlm_so_plan_offsets(const tlm_so *m, int plan) {
    return (const int64_t *)((const uint8_t *)m->header + m->plans[plan].offsets_off);
}
