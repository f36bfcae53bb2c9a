#!/usr/bin/env python3
"""References for tests/study (study.sh calls one check per case):

  check.py stats STATS.json      tlm's t quantiles, incomplete beta, means, sds and
                                 paired intervals against mpmath (arbitrary precision)
  check.py fixtures DIR          writes fixture runs (train log, eval and probe JSON
                                 lines) for aggregate: 3 variants x 3 seeds
  check.py collected DIR         result.json of every fixture run holds the numbers
                                 its lines said
  check.py aggregate DIR         results.json (statistics recomputed here), results.md
                                 and the SVG plots (well-formed XML, every series)

Exit 0 when everything matches, 1 with a line per mismatch. mpmath missing is a
failure, not a skip."""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

try:
    import mpmath
except ImportError:
    print("FAIL: mpmath is not installed for", sys.executable, "(python3-mpmath): the reference cannot run")
    sys.exit(1)

mpmath.mp.dps = 40
bad = []


def close(what, got, want, rel=1e-10, abs_=1e-12):
    if got is None or want is None:
        if got is not want:
            bad.append(f"{what}: {got} != {want}")
        return
    if abs(got - want) > abs_ + rel * abs(want):
        bad.append(f"{what}: tlm {got!r}, reference {float(want)!r}")


def t_cdf(t, dof):
    # P(T <= t) through mpmath's incomplete beta (its own hypergeometric
    # series, not tlm's continued fraction): P(|T| > t) = I_{v/(v+t^2)}(v/2, 1/2).
    dof = mpmath.mpf(dof)
    tail = mpmath.betainc(dof / 2, mpmath.mpf(1) / 2, 0, dof / (dof + mpmath.mpf(t) ** 2), regularized=True) / 2
    return 1 - tail if t >= 0 else tail


def t_quantile(p, dof):
    p = mpmath.mpf(p)
    if p < 0.5:
        return -t_quantile(1 - p, dof)
    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    while t_cdf(hi, dof) < p:
        lo, hi = hi, hi * 2
    return mpmath.findroot(lambda t: t_cdf(t, dof) - p, (lo, hi), solver="anderson")


# Two-sided 95% quantiles as printed in the usual tables (NIST/SEMATECH
# e-Handbook of Statistical Methods, 1.3.6.7.2, to three decimals): a check
# of the reference itself.
TABLE_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 10: 2.228, 30: 2.042}


def mean(x):
    return sum(mpmath.mpf(v) for v in x) / len(x)


def sd(x):
    m = mean(x)
    return mpmath.sqrt(sum((mpmath.mpf(v) - m) ** 2 for v in x) / (len(x) - 1))


# docs/studies.md: the differences' sd at most 1e-12 of the largest |value|
# is "no spread" (equal differences, to rounding): no verdict
NO_SPREAD = 1e-12


def paired(var, base):
    d = [mpmath.mpf(a) - mpmath.mpf(b) for a, b in zip(var, base)]
    m = mean(d)
    if len(d) < 2:
        return m, None, None, None
    h = t_quantile(0.975, len(d) - 1) * sd(d) / mpmath.sqrt(len(d))
    return m, m - h, m + h, h


def spread(var, base):
    """False when every paired difference is the same, to rounding."""
    d = [mpmath.mpf(a) - mpmath.mpf(b) for a, b in zip(var, base)]
    return len(d) < 2 or sd(d) > NO_SPREAD * max(abs(v) for v in list(var) + list(base))


def verdict(low, high, lower_better, has_spread=True):
    if low is not None and not (mpmath.isfinite(low) and mpmath.isfinite(high)):
        return "not finite (a run diverged?)"
    if low is None:
        return "no interval (1 seed)"
    if not has_spread:
        return "no spread (equal differences)"
    if low <= 0 <= high:
        return "within noise"
    return "better" if (high < 0) == lower_better else "worse"


def check_stats(path):
    got = json.load(open(path))
    n = 0
    for key, value in got.items():
        parts = key.split()
        if parts[0] == "t":
            p, dof = float(parts[1]), float(parts[2])
            close(key, value, t_quantile(p, dof), rel=1e-9)
            n += 1
        elif parts[0] == "beta":
            a, b, x = map(float, parts[1:])
            close(key, value, mpmath.betainc(a, b, 0, x, regularized=True), rel=1e-11)
            n += 1
    for dof, t in TABLE_975.items():
        close(f"the reference's t(0.975, {dof}) against the printed table", float(t_quantile(0.975, dof)), t,
              rel=0, abs_=0.0005)
        close(f"t(0.975, {dof}) against the printed table", got[f"t 0.975 {dof}"], t, rel=0, abs_=0.0005)
    base = [2.3456, 2.3391, 2.3512, 2.3470, 2.3403]
    var = [2.3301, 2.3342, 2.3395, 2.3288, 2.3350]
    for k in range(1, 6):
        m, low, high, h = paired(var[:k], base[:k])
        close(f"mean {k}", got[f"mean {k}"], mean(var[:k]))
        close(f"diff {k}", got[f"diff {k}"], m)
        if k > 1:
            close(f"sd {k}", got[f"sd {k}"], sd(var[:k]))
            close(f"low {k}", got[f"low {k}"], low, rel=1e-9, abs_=1e-11)
            close(f"high {k}", got[f"high {k}"], high, rel=1e-9, abs_=1e-11)
            close(f"half {k}", got[f"half {k}"], h, rel=1e-9)
        want = verdict(low, high, True, spread(var[:k], base[:k]))
        if got[f"verdict {k}"] != want:
            bad.append(f"verdict {k}: {got[f'verdict {k}']!r}, reference {want!r}")
        n += 1
    # equal differences on both seeds: no verdict, whichever side of 0
    for key, var2, base2, lower in (("accuracy", [0.5, 0.25], [0.75, 0.5], False),
                                    ("loss", [2.3323, 1.3258], [2.3456, 1.3391], True)):
        m, low, high, h = paired(var2, base2)
        want = verdict(low, high, lower, spread(var2, base2))
        if want != "no spread (equal differences)" or got[f"verdict equal {key}"] != want:
            bad.append(f"verdict equal {key}: {got[f'verdict equal {key}']!r}, reference {want!r}")
    # a diverged run (an infinite perplexity, a NaN loss): no verdict
    for key in ("inf", "nan"):
        if got[f"verdict diverged {key}"] != "not finite (a run diverged?)":
            bad.append(f"verdict diverged {key}: {got[f'verdict diverged {key}']!r}")
    if n < 150:
        bad.append(f"only {n} numbers compared")
    return n


# ---- fixture runs ----

VARIANTS = ["uniform", "early", "late"]
SEEDS = [1, 2, 3]
LAYERS = 4


def fixture_numbers(v, s):
    """Numbers chosen so the verdicts differ: `early` is better than uniform on
    every seed by about 0.05 (clearly resolved), `late` differs by noise only."""
    base = 2.0 + 0.01 * s
    shift = {"uniform": 0.0, "early": -0.05 - 0.002 * s, "late": 0.004 * (-1) ** s}[v]
    val = base + shift
    return {
        "val": val,
        "kjv": val + 0.4 + 0.003 * s,
        "acc": 0.30 + 0.01 * s + (0.04 if v == "early" else 0.0),
        "acc_norm": 0.32 + 0.01 * s,
        "cloze": 0.10 + 0.02 * s - (0.05 if v == "late" else 0.0),
        "rho": [0.1 * (l + 1) + 0.01 * s + (0.02 if v == "early" else 0.0) for l in range(LAYERS)],
        "curve": [(step, 5.5 - 0.3 * step / 4 + shift + 0.01 * s) for step in range(0, 13, 4)],
        "tps": [1000.0 + 10 * s, 1100.0 + 10 * s, 1200.0],
    }


def write_fixtures(dirname):
    plan = {"file": "/abs/fixture.tlm", "studies": [{
        "name": "fixture", "baseline": "uniform", "seeds": SEEDS,
        "train": {"steps": 12, "batch": 4, "context": 32},
        "data": "/abs/train.txt", "val": "/abs/persuasion.txt",
        "eval": ["/abs/kjv.txt"], "choices": ["/abs/next.jsonl"], "cloze": ["/abs/cloze.jsonl"],
        "variants": [{"name": v, "model": "m_" + v, "defines": {"ratio": "1.5"}, "params": 43168,
                      "mlp_params": 18432, "flops_per_token": 73856,
                      "widths": {"uniform": [96] * 4, "early": [128, 112, 80, 64], "late": [64, 80, 112, 128]}[v]}
                     for v in VARIANTS]}]}
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    for v in VARIANTS:
        for s in SEEDS:
            x = fixture_numbers(v, s)
            d = os.path.join(dirname, "runs", v, f"seed{s}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "log.jsonl"), "w") as f:
                # step 1 (warm-up: first touch of the memory) is left out of tokens/s
                f.write(json.dumps({"step": 1, "loss": 5.6, "lr": 0.001, "grad_norm": 1.0, "tokens_per_s": 5.0,
                                    "elapsed": 0.5}) + "\n")
                for i, (step, loss) in enumerate(x["curve"]):
                    f.write(json.dumps({"step": step, "val_loss": loss, "val_ppl": 2.718281828 ** loss,
                                        "val_bpb": loss / 0.6931471805599453}) + "\n")
                    if step:
                        f.write(json.dumps({"step": step, "loss": loss + 0.1, "lr": 0.001, "grad_norm": 0.5,
                                            "tokens_per_s": x["tps"][i - 1], "elapsed": 1.5 * step}) + "\n")
            import math
            with open(os.path.join(d, "eval.jsonl"), "w") as f:
                for data, loss in (("/abs/persuasion.txt", x["val"]), ("/abs/kjv.txt", x["kjv"])):
                    f.write(json.dumps({"kind": "text", "data": data, "tokens": 2048, "loss": loss,
                                        "ppl": math.exp(loss), "bpb": loss / math.log(2)}) + "\n")
                f.write(json.dumps({"kind": "choices", "data": "/abs/next.jsonl", "items": 50,
                                    "accuracy": x["acc"], "accuracy_norm": x["acc_norm"], "chance": 0.25}) + "\n")
                f.write(json.dumps({"kind": "cloze_item", "data": "/abs/cloze.jsonl", "index": 0}) + "\n")
                f.write(json.dumps({"kind": "cloze", "data": "/abs/cloze.jsonl", "items": 40,
                                    "accuracy": x["cloze"], "target_loglik": -3.5}) + "\n")
            with open(os.path.join(d, "probe.json"), "w") as f:
                f.write(json.dumps({"kind": "probe", "rho": x["rho"]}) + "\n")


def check_collected(dirname):
    import math
    for v in VARIANTS:
        for s in SEEDS:
            x = fixture_numbers(v, s)
            r = json.load(open(os.path.join(dirname, "runs", v, f"seed{s}", "result.json")))
            where = f"{v} seed {s}"
            if (r["variant"], r["seed"], r["steps"], r["val"]) != (v, s, 12, True):
                bad.append(f"{where}: identity {r['variant'], r['seed'], r['steps'], r['val']}")
            close(f"{where} tokens/s", r["timing"]["tokens_per_s"], sum(x["tps"]) / 3)  # step 1's left out
            close(f"{where} train seconds", r["timing"]["train_seconds"], 18.0)
            if [p[0] for p in r["curve"]] != [c[0] for c in x["curve"]]:
                bad.append(f"{where}: curve steps {[p[0] for p in r['curve']]}")
            for got, want in zip(r["curve"], x["curve"]):
                close(f"{where} curve", got[1], want[1], rel=0, abs_=0)
            kinds = [sc["kind"] for sc in r["scores"]]
            if kinds != ["text", "text", "choices", "cloze"]:
                bad.append(f"{where}: scores {kinds}")
                continue
            close(f"{where} val loss", r["scores"][0]["loss"], x["val"], rel=0, abs_=0)
            close(f"{where} kjv ppl", r["scores"][1]["ppl"], math.exp(x["kjv"]), rel=0, abs_=0)
            close(f"{where} accuracy", r["scores"][2]["accuracy"], x["acc"], rel=0, abs_=0)
            close(f"{where} cloze", r["scores"][3]["accuracy"], x["cloze"], rel=0, abs_=0)
            if r["rho"] != x["rho"]:
                bad.append(f"{where}: rho {r['rho']} != {x['rho']}")


def check_aggregate(dirname):
    import math
    res = json.load(open(os.path.join(dirname, "results.json")))
    keys = [m["key"] for m in res["metrics"]]
    want_keys = ["val_loss", "val_ppl", "val_bpb", "eval1_ppl", "eval1_bpb", "choices1_accuracy",
                 "choices1_accuracy_norm", "cloze1_accuracy"]
    if keys != want_keys:
        bad.append(f"metrics {keys}")
    pick = {"val_loss": lambda x: x["val"], "val_ppl": lambda x: math.exp(x["val"]),
            "val_bpb": lambda x: x["val"] / math.log(2), "eval1_ppl": lambda x: math.exp(x["kjv"]),
            "eval1_bpb": lambda x: x["kjv"] / math.log(2), "choices1_accuracy": lambda x: x["acc"],
            "choices1_accuracy_norm": lambda x: x["acc_norm"], "cloze1_accuracy": lambda x: x["cloze"]}
    lower = {k: not k.startswith(("choices", "cloze")) for k in want_keys}
    verdicts = {}
    for vr in res["variants"]:
        v = vr["name"]
        for k in want_keys:
            vals = [pick[k](fixture_numbers(v, s)) for s in SEEDS]
            m = vr["metrics"][k]
            close(f"{v} {k} mean", m["mean"], mean(vals))
            close(f"{v} {k} sd", m["sd"], sd(vals), rel=1e-8, abs_=1e-12)
            if v == "uniform":
                continue
            base = [pick[k](fixture_numbers("uniform", s)) for s in SEEDS]
            dm, low, high, h = paired(vals, base)
            d = vr["vs_baseline"][k]
            close(f"{v} {k} diff", d["mean"], dm)
            close(f"{v} {k} low", d["low"], low, rel=1e-8, abs_=1e-11)
            close(f"{v} {k} high", d["high"], high, rel=1e-8, abs_=1e-11)
            close(f"{v} {k} half width", d["half_width"], h, rel=1e-8, abs_=1e-12)
            want = verdict(low, high, lower[k], spread(vals, base))
            verdicts[v, k] = d["verdict"]
            if d["verdict"] != want:
                bad.append(f"{v} {k} verdict {d['verdict']!r}, reference {want!r}")
        close(f"{v} rho", vr["rho"][2], mean([fixture_numbers(v, s)["rho"][2] for s in SEEDS]))
        if vr["vs_baseline"] is None and v != "uniform":
            bad.append(f"{v}: no comparison")
    # the fixture's design: early resolved better, late within noise on val loss
    if verdicts.get(("early", "val_loss")) != "better" or verdicts.get(("late", "val_loss")) != "within noise":
        bad.append(f"fixture verdicts: {verdicts}")
    md = open(os.path.join(dirname, "results.md")).read()
    for text in ("| early | val loss |", "better", "within noise", "95% interval", "(baseline)", "43,168",
                 "![loss_curves.svg](loss_curves.svg)", "chance 0.2500"):
        if text not in md:
            bad.append(f"results.md lacks {text!r}")
    for name, series in (("loss_curves.svg", 3), ("widths.svg", 3), ("ppl.svg", 3), ("rho.svg", 3)):
        path = os.path.join(dirname, name)
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            bad.append(f"{name}: not well-formed XML: {e}")
            continue
        ns = "{http://www.w3.org/2000/svg}"
        if root.tag != ns + "svg":
            bad.append(f"{name}: the root is {root.tag}")
        groups = [g for g in root.iter(ns + "g") if g.get("class") == "series"]
        names = sorted({g.get("data-name") for g in groups})
        if names != sorted(VARIANTS):
            bad.append(f"{name}: series {names}")
        legend = [t.text for g in root.iter(ns + "g") if g.get("class") == "legend" for t in g.iter(ns + "text")]
        if sorted(legend) != sorted(VARIANTS):
            bad.append(f"{name}: legend {legend}")
        ticks = [t.text for g in root.iter(ns + "g") if g.get("class") == "ticks" for t in g.iter(ns + "text")]
        if len(ticks) < 4:
            bad.append(f"{name}: {len(ticks)} tick labels")
        # steps and layers are counted: their ticks are whole numbers
        x_ticks = [t.text for g in root.iter(ns + "g") if g.get("class") == "ticks" for t in g.iter(ns + "text")
                   if t.get("text-anchor") == "middle"]
        if name != "ppl.svg" and (not x_ticks or not all(re.fullmatch(r"-?[0-9]+", t or "") for t in x_ticks)):
            bad.append(f"{name}: x ticks not whole numbers: {x_ticks}")
        texts = [t.text or "" for t in root.iter(ns + "text")]
        if name == "loss_curves.svg":
            if not any("validation loss" in t for t in texts):
                bad.append(f"{name}: no axis label")
            if len([p for p in root.iter(ns + "polygon") if p.get("class") == "band"]) != 3:
                bad.append(f"{name}: not one band per variant")
            for g in groups:
                pts = g.find(ns + "polyline").get("points").split()
                if len(pts) != 4:
                    bad.append(f"{name}: {g.get('data-name')} has {len(pts)} points, not 4 validations")
        if name == "widths.svg":
            for g in groups:
                if len(list(g.iter(ns + "circle"))) != LAYERS:
                    bad.append(f"{name}: {g.get('data-name')} lacks a marker per layer")
        if name == "ppl.svg" and sorted(ticks[:3]) != sorted(VARIANTS):
            bad.append(f"{name}: the variants are not the x ticks: {ticks[:3]}")


def main():
    what, path = sys.argv[1], sys.argv[2]
    if what == "stats":
        n = check_stats(path)
        print(f"{n} numbers compared with mpmath")
    elif what == "fixtures":
        write_fixtures(path)
    elif what == "collected":
        check_collected(path)
    elif what == "aggregate":
        check_aggregate(path)
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
