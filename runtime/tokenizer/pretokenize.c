/* The pre-tokenizers: GPT-2's and Llama 3's regular expressions, matched by
 * hand over code points (unicode.h gives the classes). Each function
 * returns where the leftmost-first match starting at s[i] ends, trying the
 * alternatives in the pattern's order, with the backtracking the patterns
 * imply worked out:
 *   \s+(?!\S)  a run of white space followed by a non-space stops one code
 *              point short of it (so the last space goes with the next
 *              word); a run of one such code point falls to \s+;
 *   \s*[\r\n]+ a run of white space holding CR or LF ends after its last
 *              CR or LF. */
#include "tok_internal.h"
#include "unicode.h"

const char tok_gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char tok_llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* The class of the code point at s[i] (i < n), its length in *len. */
static int class_at(const uint8_t *s, size_t n, size_t i, int *len) {
    if (s[i] < 0x80) { /* ASCII fast path */
        *len = 1;
        uint8_t c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return TOK_LETTER;
        if (c >= '0' && c <= '9') return TOK_NUMBER;
        if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return TOK_SPACE;
        return TOK_OTHER;
    }
    uint32_t cp;
    *len = tok_utf8_next(s + i, n - i, &cp);
    return tok_class(cp);
}

/* The end of the run of code points of class k from s[i]. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int k) {
    int len;
    while (i < n && class_at(s, n, i, &len) == k) i += (size_t)len;
    return i;
}

static bool is_crlf(uint8_t c) { return c == '\r' || c == '\n'; }

/* 's 't 're 've 'm 'll 'd at s[i] == '\'': the match's length, or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i, bool fold) {
    if (i + 1 >= n) return 0;
    uint8_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
    if (fold) {
        if (a >= 'A' && a <= 'Z') a = (uint8_t)(a + 32);
        if (b >= 'A' && b <= 'Z') b = (uint8_t)(b + 32);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S) then \s+, from the white space at s[i]. */
static size_t space_run(const uint8_t *s, size_t n, size_t i) {
    size_t j = i, last = i;
    int len;
    while (j < n && class_at(s, n, j, &len) == TOK_SPACE) last = j, j += (size_t)len;
    if (j == n || last == i) return j;
    return last;
}

static size_t gpt2(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'') {
        size_t c = contraction(s, n, i, false);
        if (c) return i + c;
    }
    int len, k = class_at(s, n, i, &len);
    if (s[i] == ' ' && i + 1 < n) {
        int len1, k1 = class_at(s, n, i + 1, &len1);
        if (k1 != TOK_SPACE) return run_end(s, n, i + 1, k1);
    }
    if (k != TOK_SPACE) return run_end(s, n, i, k);
    return space_run(s, n, i);
}

static size_t llama3(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'') {
        size_t c = contraction(s, n, i, true);
        if (c) return i + c;
    }
    int len, k = class_at(s, n, i, &len);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (k == TOK_LETTER) return run_end(s, n, i, TOK_LETTER);
    if (k != TOK_NUMBER && !is_crlf(s[i]) && i + (size_t)len < n) {
        int len1;
        if (class_at(s, n, i + (size_t)len, &len1) == TOK_LETTER) return run_end(s, n, i + (size_t)len, TOK_LETTER);
    }
    /* \p{N}{1,3} */
    if (k == TOK_NUMBER) {
        size_t j = i;
        for (int d = 0; d < 3 && j < n && class_at(s, n, j, &len) == TOK_NUMBER; d++) j += (size_t)len;
        return j;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    size_t j = 0;
    if (k == TOK_OTHER) j = run_end(s, n, i, TOK_OTHER);
    else if (s[i] == ' ' && i + 1 < n && class_at(s, n, i + 1, &len) == TOK_OTHER) j = run_end(s, n, i + 1, TOK_OTHER);
    if (j) {
        while (j < n && is_crlf(s[j])) j++;
        return j;
    }
    /* \s*[\r\n]+ : white space up to its last CR or LF */
    size_t end = i, after_crlf = 0;
    while (end < n && class_at(s, n, end, &len) == TOK_SPACE) {
        if (is_crlf(s[end])) after_crlf = end + 1;
        end += (size_t)len;
    }
    if (after_crlf) return after_crlf;
    return space_run(s, n, i);
}

size_t tok_pretoken_end(int pattern, const uint8_t *s, size_t n, size_t i) {
    return pattern == TOK_PAT_LLAMA3 ? llama3(s, n, i) : gpt2(s, n, i);
}

static bool ascii_alnum(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Why a newline after a letter or digit is a boundary: the pre-token that
 * holds the letter or digit is a contraction (ends at a letter), a letter
 * run (optionally after one other or space character), a number run or
 * group; none of them takes a newline, and no white-space or punctuation
 * alternative holds a letter or digit. So it ends right at the newline in
 * GPT-2's and Llama 3's patterns, and what follows starts a match there as
 * it would in the split text. */
size_t tlm_tok_split_point(const uint8_t *text, size_t n, size_t from) {
    for (size_t j = from ? from : 1; j < n; j++)
        if (text[j] == '\n' && ascii_alnum(text[j - 1])) return j;
    return n;
}
