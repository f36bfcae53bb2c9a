/* tlm-run tokenize: pre-tokenized shards (runtime/tokenizer/shard.h,
 * docs/data.md). Writes one shard from text files, each file a document
 * followed by the end-of-text token; describes, checks and dumps a shard. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "atomic_file.h"
#include "commands.h"
#include "regular_file.h"
#include "shard.h"
#include "tlm_rt/data.h"
#include "tlm_rt/memory_limit.h"
#include "tokenizer.h"

#define MAX_DOCUMENT ((uint64_t)1 << 32)

static void usage(FILE *out) {
    fputs("usage: tlm-run tokenize --tokenizer PATH [--eot TEXT | --no-eot] [--threads N] DATA... -o CORPUS.bin\n"
          "       tlm-run tokenize --info SHARD [--tokenizer PATH]\n"
          "       tlm-run tokenize --dump SHARD\n"
          "\n"
          "Writes the token ids of DATA (files, or folders of .txt files read in name order;\n"
          "each file is a document) into one shard, atomically, each document followed by the\n"
          "end-of-text token. Special tokens' text in DATA is plain text; no BOS is added.\n"
          "  --tokenizer PATH   the tokenizer (see `tlm-run tokenizer --help`)\n"
          "  --eot TEXT         the token after each document (default: <|endoftext|> or\n"
          "                     <|end_of_text|>, whichever is a special token; else none)\n"
          "  --no-eot           no token between documents\n"
          "  --threads N        threads that encode, 1 to 64 (default: all cores, at most\n"
          "                     64); the shard is the same for any N\n"
          "  -o, --output PATH  the shard to write\n"
          "  --info SHARD       prints the header after checking the whole shard; with\n"
          "                     --tokenizer, also that the shard was made with it\n"
          "  --dump SHARD       prints the token ids, space-separated\n"
          "\n"
          "Exit status: 0 ok, 1 error (tokenizer, data, shard), 2 bad usage.\n",
          out);
}

/* ---- writing ---- */

typedef struct shard_out {
    int fd;
    const char *path;
    uint32_t width;
    uint64_t count, bytes; /* tokens; the documents' text bytes */
    uint8_t buf[1 << 16];
    size_t used;
    bool failed;
    int error;
} shard_out;

static void flush_out(shard_out *o) {
    for (size_t done = 0; done < o->used && !o->failed;) {
        ssize_t w = write(o->fd, o->buf + done, o->used - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) o->failed = true, o->error = w < 0 ? errno : EIO;
        else done += (size_t)w;
    }
    o->used = 0;
}

static void put_tokens(shard_out *o, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (o->used + 4 > sizeof o->buf) flush_out(o);
        uint32_t v = (uint32_t)ids[i];
        for (uint32_t k = 0; k < o->width; k++) o->buf[o->used++] = (uint8_t)(v >> (8 * k));
    }
    o->count += n;
}

/* ---- the documents: files, or a folder's *.txt files in name order ---- */

typedef struct doc_list {
    char **path;
    size_t n, cap;
} doc_list;

static bool doc_add(doc_list *l, const char *path) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **p = realloc(l->path, cap * sizeof *p);
        if (!p) return false;
        l->path = p, l->cap = cap;
    }
    return (l->path[l->n] = strdup(path)) && ++l->n;
}

static void doc_list_free(doc_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->path[i]);
    free(l->path);
}

/* path itself, or a folder's texts (tlm_data_texts: training's rule) */
static int list_data(doc_list *l, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return doc_add(l, path) ? 0 : cli_error("tokenize", "out of memory");
    tlm_err err = {""};
    char **names;
    int n;
    if (tlm_data_texts(path, &names, &n, &err) != 0) return cli_error("tokenize", "%s", err.msg);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (!doc_add(l, names[i])) rc = cli_error("tokenize", "out of memory");
    tlm_data_texts_free(names, n);
    return rc;
}

/* ---- encoding on threads ----
 * Documents are read a batch at a time and cut into parts at
 * tlm_tok_split_point, where the parts' ids joined are the whole text's;
 * the threads take parts in turn, each through its own encoder, and the
 * parts are written in order, so the shard is the same for any --threads. */

enum { PART_BYTES = 256 << 10, BATCH_BYTES = 64 << 20 };

typedef struct part {
    const uint8_t *text;
    size_t n;
    tlm_tok_ids ids;
    bool ok;
    tlm_err err;
} part;

typedef struct encode_job {
    const tlm_tokenizer *t;
    part *parts;
    size_t nparts;
    atomic_size_t next;
} encode_job;

static void *encode_parts(void *arg) {
    encode_job *job = arg;
    tlm_err err = {""};
    tlm_tok_encoder *e = tlm_tok_encoder_new(job->t, &err);
    for (size_t i; (i = atomic_fetch_add(&job->next, 1)) < job->nparts;) {
        part *p = &job->parts[i];
        p->ok = e && tlm_tok_encoder_run(e, p->text, p->n, NULL, &p->ids, &p->err);
        if (!e) p->err = err;
    }
    tlm_tok_encoder_free(e);
    return NULL;
}

/* Runs job on `threads` threads (the caller's among them). */
static void run_job(encode_job *job, int threads) {
    pthread_t tid[64];
    int started = 0;
    for (int i = 1; i < threads && i < 64 && (size_t)i < job->nparts; i++)
        if (pthread_create(&tid[started], NULL, encode_parts, job) == 0) started++;
    encode_parts(job);
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
}

typedef struct batch_doc {
    const char *path;
    uint8_t *text;
    size_t n, first, nparts; /* its parts: parts[first .. first + nparts) */
} batch_doc;

/* Encodes docs[0..n) (read, cut, encoded on threads) and appends them, each
 * followed by eot, to o. */
static int add_batch(const tlm_tokenizer *t, shard_out *o, batch_doc *docs, size_t n, int threads, int32_t eot) {
    size_t nparts = 0;
    for (size_t d = 0; d < n; d++) nparts += docs[d].n / PART_BYTES + 1;
    encode_job job = {.t = t, .parts = calloc(nparts, sizeof(part))};
    if (!job.parts) return cli_error("tokenize", "out of memory");
    for (size_t d = 0; d < n; d++) {
        batch_doc *doc = &docs[d];
        doc->first = job.nparts;
        size_t at = 0; /* an empty document is one empty part */
        do {
            size_t end = doc->n - at <= PART_BYTES ? doc->n : tlm_tok_split_point(doc->text, doc->n, at + PART_BYTES);
            job.parts[job.nparts++] = (part){.text = doc->text + at, .n = end - at};
            at = end;
        } while (at < doc->n);
        doc->nparts = job.nparts - doc->first;
    }
    atomic_init(&job.next, 0);
    run_job(&job, threads);
    int rc = 0;
    for (size_t d = 0; d < n && !rc; d++) {
        for (size_t k = docs[d].first; k < docs[d].first + docs[d].nparts && !rc; k++) {
            if (!job.parts[k].ok) rc = cli_error("tokenize", "%s: %s", docs[d].path, job.parts[k].err.msg);
            else put_tokens(o, job.parts[k].ids.ids, job.parts[k].ids.n);
        }
        o->bytes += docs[d].n;
        if (!rc && eot >= 0) put_tokens(o, &eot, 1);
    }
    for (size_t k = 0; k < job.nparts; k++) tlm_tok_ids_free(&job.parts[k].ids);
    free(job.parts);
    return rc;
}

/* Every document of l, a batch of about BATCH_BYTES at a time. */
static int add_documents(const tlm_tokenizer *t, shard_out *o, const doc_list *l, int threads, int32_t eot) {
    tlm_memory_budget budget;
    tlm_err berr = {""};
    if (!tlm_memory_budget_read(&budget, &berr)) return cli_error("tokenize", "%s", berr.msg);
    batch_doc *docs = calloc(l->n ? l->n : 1, sizeof *docs);
    if (!docs) return cli_error("tokenize", "out of memory");
    int rc = 0;
    for (size_t next = 0; next < l->n && !rc;) {
        size_t n = 0, bytes = 0;
        while (next < l->n && bytes < BATCH_BYTES && !rc) {
            tlm_err err = {""};
            batch_doc *doc = &docs[n];
            doc->path = l->path[next++];
            if (!tlm_output_not_input(o->path, doc->path, "a document to tokenize", &err)) {
                rc = cli_error("tokenize", "%s", err.msg);
                break;
            }
            /* A document is read whole: one larger than the memory left
             * (with the batch's) was read until the OOM killer ended the
             * process. */
            struct stat st;
            if (stat(doc->path, &st) == 0 && (int64_t)(bytes + (size_t)st.st_size) > budget.bytes) {
                char size[32], room[32];
                tlm_fmt_bytes(size, sizeof size, (int64_t)st.st_size);
                tlm_fmt_bytes(room, sizeof room, budget.bytes);
                rc = cli_error("tokenize", "%s: the document (%s) does not fit in memory (%s available, %s): split it",
                               doc->path, size, room, budget.source);
                break;
            }
            doc->text = tlm_read_regular(doc->path, MAX_DOCUMENT, "a document", &doc->n, &err);
            if (!doc->text) rc = cli_error("tokenize", "%s", err.msg);
            else bytes += doc->n, n++;
        }
        if (!rc) rc = add_batch(t, o, docs, n, threads, eot);
        for (size_t d = 0; d < n; d++) free(docs[d].text);
    }
    free(docs);
    return rc;
}

static int write_shard(const tlm_tokenizer *t, const char *const *data, int ndata, int threads, int32_t eot,
                       const char *path) {
    tlm_err err = {""};
    shard_out *o = calloc(1, sizeof *o);
    if (!o) return cli_error("tokenize", "out of memory");
    tlm_atomic_file f;
    if (!tlm_atomic_open(&f, path, &err)) {
        free(o);
        return cli_error("tokenize", "%s", err.msg);
    }
    o->fd = f.fd;
    o->path = path;
    o->width = tlm_tok_vocab_size(t) <= 65536 ? 2 : 4;
    memset(o->buf, 0, TLM_SHARD_HEADER_SIZE); /* the header goes in at the end */
    o->used = TLM_SHARD_HEADER_SIZE;
    doc_list docs = {0};
    int rc = 0;
    for (int i = 0; i < ndata && !rc; i++) rc = list_data(&docs, data[i]);
    if (!rc) rc = add_documents(t, o, &docs, threads, eot);
    doc_list_free(&docs);
    /* as train and `tokenizer train` refuse it: a shard of end-of-text marks
     * alone would only fail later, at training */
    if (!rc && o->bytes == 0)
        rc = cli_error("tokenize", "no text to tokenize: %s %s none", ndata == 1 ? data[0] : "the inputs",
                       ndata == 1 ? "holds" : "hold");
    if (!rc) flush_out(o);
    tlm_shard s = {.version = TLM_SHARD_VERSION,
                   .width = o->width,
                   .count = o->count,
                   .vocab = (uint32_t)tlm_tok_vocab_size(t),
                   .eot = eot,
                   .bytes = o->bytes};
    memcpy(s.tokenizer, tlm_tok_hash(t), 32);
    uint8_t header[TLM_SHARD_HEADER_SIZE];
    tlm_shard_header(&s, header);
    if (!rc && !o->failed && pwrite(o->fd, header, sizeof header, 0) != (ssize_t)sizeof header)
        o->failed = true, o->error = errno;
    if (!rc && o->failed) rc = cli_error("tokenize", "%s: cannot write: %s", path, strerror(o->error));
    if (rc) tlm_atomic_abort(&f);
    else if (!tlm_atomic_commit(&f, &err)) rc = cli_error("tokenize", "%s", err.msg);
    if (!rc) {
        fprintf(stderr, "tlm-run tokenize: %s: %" PRIu64 " token%s, %u bytes each\n", path, o->count,
                o->count == 1 ? "" : "s", o->width);
    }
    free(o);
    return rc;
}

/* ---- reading ---- */

static int read_shard(const char *path, const tlm_tokenizer *t, bool dump) {
    tlm_err err = {""};
    int fd = tlm_open_regular(path, &err);
    if (fd < 0) return cli_error("tokenize", "%s", err.msg);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return cli_error("tokenize", "%s: %s", path, strerror(errno));
    }
    size_t size = (size_t)st.st_size;
    const uint8_t *data = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : (const uint8_t *)"";
    close(fd);
    if (data == MAP_FAILED) return cli_error("tokenize", "%s: cannot map the file: %s", path, strerror(errno));
    tlm_shard s;
    int rc = 0;
    if (!tlm_shard_parse(data, size, path, &s, &err) || !tlm_shard_check_ids(&s, path, &err))
        rc = cli_error("tokenize", "%s", err.msg);
    else if (t && memcmp(s.tokenizer, tlm_tok_hash(t), 32))
        rc = cli_error("tokenize", "%s was made with another tokenizer (its hash differs from --tokenizer's)", path);
    else if (dump) {
        for (uint64_t i = 0; i < s.count; i++) printf(i ? " %u" : "%u", tlm_shard_token(&s, i));
        putchar('\n');
    } else {
        printf("version   %u\nwidth     %u\ntokens    %" PRIu64 "\nvocab     %u\neot       %d\n", s.version, s.width,
               s.count, s.vocab, (int)s.eot);
        if (s.version >= 2) printf("bytes     %" PRIu64 "\n", s.bytes);
        printf("tokenizer ");
        for (int i = 0; i < 32; i++) printf("%02x", s.tokenizer[i]);
        putchar('\n');
    }
    if (size) munmap((void *)data, size);
    return rc;
}

enum { OPT_TOKENIZER = 256, OPT_EOT, OPT_NO_EOT, OPT_INFO, OPT_DUMP, OPT_THREADS };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"eot", required_argument, NULL, OPT_EOT},
    {"no-eot", no_argument, NULL, OPT_NO_EOT},
    {"output", required_argument, NULL, 'o'},
    {"info", required_argument, NULL, OPT_INFO},
    {"dump", required_argument, NULL, OPT_DUMP},
    {"threads", required_argument, NULL, OPT_THREADS},
    {NULL, 0, NULL, 0},
};

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path = NULL, *eot_text = NULL, *out = NULL, *info = NULL, *dump = NULL;
    bool no_eot = false;
    int64_t threads = 0;
    const char **data = calloc((size_t)argc + 1, sizeof *data);
    int ndata = 0;
    if (!data) return cli_error("tokenize", "out of memory");
    cli_args a = {.cmd = "tokenize", .argc = argc, .argv = argv};
    tlm_err err = {""};
    int opt, rc = 0;
    while (!rc && (opt = cli_getopt(&a, "ho:", long_options)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            free(data);
            return 0;
        case OPT_TOKENIZER:
            if (!cli_path(&a, &tok_path)) rc = 2;
            break;
        case OPT_EOT:
            if (!a.val[0]) rc = cli_usage_error("tokenize", "--eot is empty: it needs a token (or --no-eot)");
            eot_text = a.val;
            break;
        case OPT_NO_EOT: no_eot = true; break;
        case 'o':
            if (!cli_output_path(&a, &out)) rc = 2;
            break;
        case OPT_INFO:
            if (!cli_path(&a, &info)) rc = 2;
            break;
        case OPT_DUMP:
            if (!cli_path(&a, &dump)) rc = 2;
            break;
        case OPT_THREADS:
            if (!cli_int(&a, 1, 64, &threads)) rc = 2;
            break;
        case 1:
            /* a usage slip, not "cannot open : No such file or directory" */
            if (!a.val[0]) rc = cli_usage_error("tokenize", "DATA is empty: it needs a path");
            data[ndata++] = a.val;
            break;
        default: rc = 2; /* reported by cli_getopt */
        }
    }
    if (!rc && (info || dump)) {
        if ((info && dump) || ndata || out || eot_text || no_eot || threads || (dump && tok_path))
            rc = cli_usage_error("tokenize", "--info SHARD takes only --tokenizer; --dump SHARD nothing else");
    } else if (!rc) {
        if (!tok_path) rc = cli_usage_error("tokenize", "--tokenizer PATH is required");
        else if (!out) rc = cli_usage_error("tokenize", "-o CORPUS.bin is required");
        else if (!tlm_output_not_input(out, tok_path, "the tokenizer", &err)) rc = cli_error("tokenize", "%s", err.msg);
        else if (tlm_path_in_folder(out, tok_path)) /* a GPT-2 folder's encoder.json, vocab.bpe */
            rc = cli_error("tokenize", "-o %s is inside the tokenizer's folder %s: write the shard elsewhere", out,
                           tok_path);
        else if (!ndata) rc = cli_usage_error("tokenize", "no DATA given");
        else if (eot_text && no_eot) rc = cli_usage_error("tokenize", "--eot and --no-eot exclude each other");
        for (int i = 0; !rc && i < ndata; i++)
            if (!tlm_data_not_new_input("-o", out, data[i], &err)) rc = cli_error("tokenize", "%s", err.msg);
    }
    tlm_tokenizer *t = NULL;
    if (!rc && tok_path && !(t = tlm_tok_load(tok_path, &err))) rc = cli_error("tokenize", "%s", err.msg);
    if (!rc && (info || dump)) rc = read_shard(info ? info : dump, t, dump != NULL);
    else if (!rc) {
        int32_t eot = -1;
        bool special = false;
        if (eot_text) {
            eot = tlm_tok_find(t, eot_text, strlen(eot_text), &special);
            if (eot < 0) rc = cli_error("tokenize", "--eot `%s` is not a token of this tokenizer", eot_text);
        } else if (!no_eot) eot = tlm_tok_eot(t);
        if (!rc) rc = write_shard(t, data, ndata, threads ? (int)threads : cli_cores(), eot, out);
    }
    tlm_tok_free(t);
    free(data);
    /* a failed write of standard output is tlm-run's to report, once
     * (tlm_stdout_status, as it ends) */
    return rc;
}
