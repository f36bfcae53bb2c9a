/* tlm-run tokenize: pre-tokenized shards (runtime/tokenizer/shard.h,
 * docs/data.md). Writes one shard from text files, each file a document
 * followed by the end-of-text token; describes, checks and dumps a shard. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "commands.h"
#include "regular_file.h"
#include "shard.h"
#include "tokenizer.h"

#define MAX_DOCUMENT ((uint64_t)1 << 32)

static void usage(FILE *out) {
    fputs("usage: tlm-run tokenize --tokenizer PATH [--eot TEXT | --no-eot] DATA... -o CORPUS.bin\n"
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

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Encodes the document at path and appends it (and eot) to o. */
static int add_document(tlm_tokenizer *t, shard_out *o, const char *path, int32_t eot) {
    tlm_err err = {""};
    size_t n;
    uint8_t *text = tlm_read_regular(path, MAX_DOCUMENT, "a document", &n, &err);
    if (!text) return cli_error("tokenize", "%s", err.msg);
    tlm_tok_ids ids = {0};
    bool ok = tlm_tok_encode(t, text, n, NULL, &ids, &err);
    free(text);
    if (!ok) {
        tlm_tok_ids_free(&ids);
        return cli_error("tokenize", "%s: %s", path, err.msg);
    }
    put_tokens(o, ids.ids, ids.n);
    o->bytes += n;
    if (eot >= 0) put_tokens(o, &eot, 1);
    tlm_tok_ids_free(&ids);
    return 0;
}

/* DATA: a file, or a folder's *.txt files in name order. */
static int add_data(tlm_tokenizer *t, shard_out *o, const char *path, int32_t eot) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return add_document(t, o, path, eot);
    DIR *d = opendir(path);
    if (!d) return cli_error("tokenize", "%s: cannot list the folder: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                rc = cli_error("tokenize", "out of memory");
                break;
            }
            names = p;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = cli_error("tokenize", "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (!rc && n == 0) rc = cli_error("tokenize", "%s: the folder has no .txt files", path);
    if (!rc) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && !rc; i++) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        rc = add_document(t, o, file, eot);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

static int write_shard(tlm_tokenizer *t, const char *const *data, int ndata, int32_t eot, const char *path) {
    tlm_err err = {""};
    char tmp[4200];
    shard_out *o = calloc(1, sizeof *o);
    if (!o) return cli_error("tokenize", "out of memory");
    o->fd = tlm_temp_create(path, tmp, sizeof tmp, &err);
    if (o->fd < 0) {
        free(o);
        return cli_error("tokenize", "%s", err.msg);
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(o->fd, 0666 & ~mask);
    o->path = path;
    o->width = tlm_tok_vocab_size(t) <= 65536 ? 2 : 4;
    memset(o->buf, 0, TLM_SHARD_HEADER_SIZE); /* the header goes in at the end */
    o->used = TLM_SHARD_HEADER_SIZE;
    int rc = 0;
    for (int i = 0; i < ndata && !rc; i++) rc = add_data(t, o, data[i], eot);
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
    if (!rc && !o->failed && fsync(o->fd) != 0) o->failed = true, o->error = errno;
    if (close(o->fd) != 0 && !rc && !o->failed) o->failed = true, o->error = errno;
    if (!rc && o->failed) rc = cli_error("tokenize", "%s: cannot write: %s", path, strerror(o->error));
    if (!rc && rename(tmp, path) != 0)
        rc = cli_error("tokenize", "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    else {
        tlm_sync_dir_of(path);
        fprintf(stderr, "tlm-run tokenize: %s: %" PRIu64 " tokens of %u bytes\n", path, o->count, o->width);
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

enum { OPT_TOKENIZER = 256, OPT_EOT, OPT_NO_EOT, OPT_INFO, OPT_DUMP };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"eot", required_argument, NULL, OPT_EOT},
    {"no-eot", no_argument, NULL, OPT_NO_EOT},
    {"output", required_argument, NULL, 'o'},
    {"info", required_argument, NULL, OPT_INFO},
    {"dump", required_argument, NULL, OPT_DUMP},
    {NULL, 0, NULL, 0},
};

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path = NULL, *eot_text = NULL, *out = NULL, *info = NULL, *dump = NULL;
    bool no_eot = false;
    const char **data = calloc((size_t)argc + 1, sizeof *data);
    int ndata = 0;
    if (!data) return cli_error("tokenize", "out of memory");
    cli_args a = {.cmd = "tokenize", .argc = argc, .argv = argv};
    int opt, rc = 0;
    while (!rc && (opt = cli_getopt(&a, "ho:", long_options)) != -1) {
        switch (opt) {
        case 'h':
            usage(stdout);
            free(data);
            return 0;
        case OPT_TOKENIZER: tok_path = a.val; break;
        case OPT_EOT: eot_text = a.val; break;
        case OPT_NO_EOT: no_eot = true; break;
        case 'o': out = a.val; break;
        case OPT_INFO: info = a.val; break;
        case OPT_DUMP: dump = a.val; break;
        case 1: data[ndata++] = a.val; break;
        default: rc = 2; /* reported by cli_getopt */
        }
    }
    if (!rc && (info || dump)) {
        if ((info && dump) || ndata || out || eot_text || no_eot || (dump && tok_path))
            rc = cli_usage_error("tokenize", "--info SHARD takes only --tokenizer; --dump SHARD nothing else");
    } else if (!rc) {
        if (!tok_path) rc = cli_usage_error("tokenize", "--tokenizer PATH is required");
        else if (!out) rc = cli_usage_error("tokenize", "-o CORPUS.bin is required");
        else if (!ndata) rc = cli_usage_error("tokenize", "no DATA given");
        else if (eot_text && no_eot) rc = cli_usage_error("tokenize", "--eot and --no-eot exclude each other");
    }
    tlm_tokenizer *t = NULL;
    tlm_err err = {""};
    if (!rc && tok_path && !(t = tlm_tok_load(tok_path, &err))) rc = cli_error("tokenize", "%s", err.msg);
    if (!rc && (info || dump)) rc = read_shard(info ? info : dump, t, dump != NULL);
    else if (!rc) {
        int32_t eot = -1;
        bool special = false;
        if (eot_text) {
            eot = tlm_tok_find(t, eot_text, strlen(eot_text), &special);
            if (eot < 0) rc = cli_error("tokenize", "--eot `%s` is not a token of this tokenizer", eot_text);
        } else if (!no_eot) {
            eot = tlm_tok_find(t, "<|endoftext|>", 13, &special);
            if (!special) eot = tlm_tok_find(t, "<|end_of_text|>", 15, &special);
            if (!special) eot = -1;
        }
        if (!rc) rc = write_shard(t, data, ndata, eot, out);
    }
    tlm_tok_free(t);
    free(data);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout))) rc = cli_error("tokenize", "cannot write the output");
    return rc;
}
