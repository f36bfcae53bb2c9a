"""`tlm-run eval --choices/--cloze` against PyTorch: the checkpoint in the
float64 reference model of tests/reference/tapered_llama.py, every
continuation scored there the way docs/runtime.md defines it (context and
continuation as bytes, cut from the left to T + 1 bytes, the
sum of log-softmax over the continuation's bytes; cloze: the last word with
the whitespace byte before it, right when each of its bytes is the argmax),
and compared with tlm-run's per-item lines (--json --items):

  - every log-likelihood within 1e-4 relative (+1e-6 absolute);
  - every item's verdict (the argmax choice, the argmax per byte, cloze's
    greedy match) the same, unless the reference's own margin is within
    that tolerance (a near tie float32 may break either way: counted and
    printed, and at most 2 % of the items);
  - the set's accuracy, accuracy per byte, chance and mean target
    log-likelihood recomputed from the reference equal tlm-run's summary
    line (up to the excused items).

  check_downstream.py CHECKPOINT CONTEXT EVAL_JSON_OUTPUT SET...

A missing torch or reference model is a failure (exit 1), not a skip.
"""
import json
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
sys.path.insert(0, os.path.join(here, "..", "run"))
try:
    import torch
    from check_llama import load_model
except ImportError as e:
    print(f"FAIL: the PyTorch reference cannot run: {e}")
    sys.exit(1)

REL, ABS = 1e-4, 1e-6


def close(a, b):
    return abs(a - b) <= REL * max(abs(a), abs(b)) + ABS


class Scorer:
    def __init__(self, model, T):
        self.model, self.T = model, T

    def score(self, context, continuation):
        """(sum log p, [margin per token: target logit - best other logit])"""
        seq = list(context) + list(continuation)
        if len(seq) > self.T + 1:
            seq = seq[len(seq) - (self.T + 1):]
        first = max(1, len(seq) - len(continuation))  # a continuation longer than T: its last T
        x = torch.tensor([seq[:-1]], dtype=torch.long)
        with torch.no_grad():
            logits = self.model(x)[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        total, margins = 0.0, []
        for t in range(first - 1, len(seq) - 1):
            target = seq[t + 1]
            total += logp[t, target].item()
            other = logits[t].clone()
            other[target] = -math.inf
            margins.append(logits[t, target].item() - other.max().item())
        return total, margins


def split_cloze(text):
    """The context and the target (the last word with the byte before it)."""
    b = text.encode("utf-8")
    end = len(b)
    while end and b[end - 1:end].isspace():
        end -= 1
    w = end
    while w and not b[w - 1:w].isspace():
        w -= 1
    return b[:w - 1], b[w - 1:end]


def argmax(v):
    return max(range(len(v)), key=lambda i: (v[i], -i))


def near_tie(v, best):
    return any(i != best and close(v[i], v[best]) for i in range(len(v)))


def main():
    ckpt, T, out, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    model, _ = load_model(ckpt)
    scorer = Scorer(model, T)
    lines = [json.loads(l) for l in open(out) if l.strip()]
    fail, excused, total = 0, 0, 0
    for path in sets:
        items = [json.loads(l) for l in open(path) if l.strip()]
        got = [l for l in lines if l.get("data") == path and l["kind"].endswith("_item")]
        summary = [l for l in lines if l.get("data") == path and not l["kind"].endswith("_item")]
        if len(got) != len(items) or len(summary) != 1:
            print(f"FAIL: {path}: {len(got)} item lines and {len(summary)} summaries for {len(items)} items")
            fail = 1
            continue
        summary = summary[0]
        right = right_norm = chance = loglik_sum = 0.0
        worst = 0.0
        for item, g in zip(items, got):
            total += 1
            if "choices" in item:
                ctx = item["context"].encode("utf-8")
                want = [scorer.score(ctx, c.encode("utf-8"))[0] for c in item["choices"]]
                nbytes = [len(c.encode("utf-8")) for c in item["choices"]]
                if g["bytes"] != nbytes:
                    print(f"FAIL: {path}:{g['line']}: bytes {g['bytes']}, want {nbytes}")
                    fail = 1
                for a, b in zip(g["loglik"], want):
                    worst = max(worst, abs(a - b) / max(abs(b), 1e-30))
                    if not close(a, b):
                        print(f"FAIL: {path}:{g['line']}: log-likelihood {a!r}, PyTorch {b!r}")
                        fail = 1
                norm = [w / n for w, n in zip(want, nbytes)]
                best, best_norm = argmax(want), argmax(norm)
                got_best = argmax(g["loglik"])
                got_norm = argmax([w / n for w, n in zip(g["loglik"], g["bytes"])])
                for name, mine, ref, v in (("choice", got_best, best, want), ("choice per byte", got_norm, best_norm, norm)):
                    if mine != ref:
                        if near_tie(v, ref):
                            excused += 1
                            print(f"note: {path}:{g['line']}: {name} {mine} vs {ref}, a near tie")
                        else:
                            print(f"FAIL: {path}:{g['line']}: {name} {mine}, PyTorch's {ref}")
                            fail = 1
                right += best == item["label"]
                right_norm += best_norm == item["label"]
                chance += 1 / len(item["choices"])
            else:
                ctx, target = split_cloze(item["text"])
                want, margins = scorer.score(ctx, target)
                worst = max(worst, abs(g["loglik"] - want) / max(abs(want), 1e-30))
                if not close(g["loglik"], want):
                    print(f"FAIL: {path}:{g['line']}: target log-likelihood {g['loglik']!r}, PyTorch {want!r}")
                    fail = 1
                greedy = all(m > 0 for m in margins)
                if g["correct"] != greedy:
                    if any(abs(m) <= REL * 10 for m in margins):
                        excused += 1
                        print(f"note: {path}:{g['line']}: greedy {g['correct']} vs {greedy}, a near tie")
                    else:
                        print(f"FAIL: {path}:{g['line']}: greedy {g['correct']}, PyTorch's {greedy}")
                        fail = 1
                right += greedy
                loglik_sum += want
        n = len(items)
        if summary["items"] != n:
            print(f"FAIL: {path}: items {summary['items']}, want {n}")
            fail = 1
        checks = [("accuracy", right / n)]
        if summary["kind"] == "choices":
            checks += [("accuracy_norm", right_norm / n), ("chance", chance / n)]
        else:
            checks += [("target_loglik", loglik_sum / n)]
        for key, want in checks:
            slack = excused / n if key.startswith("accuracy") else 0
            ok = (abs(summary[key] - want) <= slack + 1e-12) if key != "target_loglik" else close(summary[key], want)
            print(f"{'ok' if ok else 'FAIL'}: {path}: {key} {summary[key]!r}, PyTorch {want!r}")
            fail |= not ok
        print(f"    {n} items, largest relative difference of a log-likelihood {worst:.2e}")
    if excused > max(1, total // 50):
        print(f"FAIL: {excused} near ties of {total} items")
        fail = 1
    print("ok: the scores match PyTorch" if not fail else "FAIL: the scores differ from PyTorch")
    sys.exit(fail)


if __name__ == "__main__":
    main()
