#!/usr/bin/env python3
"""The include rule of docs/architecture.md, checked on every #include "..."
of the tree: each folder may include only its own headers and those of the
folders it is allowed to see. The compiler and the runtime meet only in abi/.
Exit 0 when every include is allowed, 1 with one line per violation."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
root = os.path.abspath(root)

CORE = ["runtime/include", "runtime/ops", "runtime/optim", "runtime/io"]
ALLOWED = {
    "abi": [],
    "lang": [],
    "compiler": ["lang", "abi", "codegen"],
    # the `tokenizer` setting reads tokenizers with the runtime's library
    "compiler/tokenizer": ["lang", "abi", "compiler", "runtime/tokenizer"],
    "codegen": ["abi"],
    **{f: CORE + ["abi"] for f in CORE},
    "runtime/device": ["abi"],
    "runtime/tokenizer": CORE + ["abi"],
    "runtime/gpu": CORE + ["abi", "runtime/device"],
    "runtime/model": CORE + ["abi", "runtime/device", "runtime/gpu"],
    "runtime/train": CORE + ["abi", "runtime/device", "runtime/gpu", "runtime/model"],
    "runtime/export": CORE + ["abi", "runtime/device", "runtime/gpu", "runtime/model", "runtime/train",
                              "runtime/tokenizer"],
    "runtime/study": CORE + ["abi", "runtime/device", "runtime/gpu", "runtime/model", "runtime/train"],
    "runtime/dist": CORE + ["abi", "runtime/device", "runtime/gpu", "runtime/model", "runtime/train"],
    "runtime/cli": CORE + ["abi", "runtime/device", "runtime/gpu", "runtime/model", "runtime/train",
                           "runtime/tokenizer", "runtime/export", "runtime/study", "runtime/dist"],
}

def folder_of(path):
    rel = os.path.relpath(path, root)
    for f in sorted(ALLOWED, key=len, reverse=True):
        if rel == f or rel.startswith(f + "/"):
            return f
    return None

# where each header lives: its path relative to the folder's include root
headers = {}
for f in ALLOWED:
    base = os.path.join(root, f)
    for dirpath, _, files in os.walk(base):
        for name in files:
            if name.endswith(".h"):
                rel = os.path.relpath(os.path.join(dirpath, name), base)
                headers.setdefault(rel, set()).add(f)
                headers.setdefault(name, set()).add(f)

# lang's build products: the parser's header is lang's to share
for name in ("parser.h", "lexer.h"):
    headers.setdefault(name, set()).add("lang")
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
bad = []
checked = 0
for f in ALLOWED:
    for dirpath, _, files in os.walk(os.path.join(root, f)):
        for name in files:
            if not name.endswith((".c", ".h", ".re", ".y")):
                continue
            path = os.path.join(dirpath, name)
            if folder_of(path) != f:
                continue                          # a deeper folder with its own rule
            with open(path, encoding="utf-8", errors="replace") as src:
                for lineno, line in enumerate(src, 1):
                    m = include.match(line)
                    if not m:
                        continue
                    checked += 1
                    target = m.group(1)
                    if os.path.exists(os.path.join(dirpath, target)):
                        continue
                    homes = headers.get(target, set())
                    if not homes:
                        bad.append(f"{os.path.relpath(path, root)}:{lineno}: includes \"{target}\", which no source folder has")
                    elif not homes & set(ALLOWED[f] + [f]):
                        bad.append(f"{os.path.relpath(path, root)}:{lineno}: {f}/ may not include \"{target}\" "
                                   f"(from {', '.join(sorted(homes))}/); allowed: {', '.join(ALLOWED[f]) or 'the C library only'}")
for b in bad:
    print(b)
print(f"{checked} includes checked, {len(bad)} outside the rule")
minimum = int(sys.argv[2]) if len(sys.argv) > 2 else 100     # a tree this small was not found
sys.exit(1 if bad or checked < minimum else 0)
