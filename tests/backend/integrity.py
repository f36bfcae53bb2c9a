#!/usr/bin/env python3
"""tlm-run against damaged model.so files: one byte flipped in every ELF
section of a compiled model, in its headers, its descriptor and its
integrity trailer; four zero bytes in its code; the file cut short and
extended; a trailer recomputed over bytes that are not a whole model. For
each, `tlm-run info` and `tlm-run eval` must exit 1 with a one-line message
that says what is wrong, and never die by a signal or hang. The positions
come from a seeded generator and are printed, so a failure can be rerun.

    integrity.py TLM_RUN MODEL.so WORK_DIR [SEED]
"""
import os
import random
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_file  # noqa: E402

run, model, work = sys.argv[1], sys.argv[2], sys.argv[3]
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 20261202
rng = random.Random(seed)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def command(args, timeout=60):
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, errors='replace')
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 'timeout', '', ''


data = open(model, 'rb').read()
try:
    image, seal = model_file.split(data)   # tlmc's SHA-256 agrees with hashlib's
except ValueError as e:
    sys.exit(f'FAIL: {model}: {e}')
print(f'ok: {model} ends in the trailer of its {len(image)}-byte image (seed {seed})')

# A checkpoint and a text, so that eval runs the model's code.
text = os.path.join(work, 'text.txt')
with open(text, 'w') as f:
    f.write(''.join(rng.choice('abcdefghij klmnop.\n') for _ in range(4000)))
ckpt = os.path.join(work, 'ckpt')
small = ['--threads', '1', '--batch', '1', '--context', '16']
rc, out, err = command([run, 'train', model, '--data', text, '--steps', '1', '--ckpt', ckpt, *small])
if rc != 0:
    sys.exit(f'FAIL: training one step: exit {rc}: {err.strip()}')
evaluate = ['--ckpt', ckpt, '--data', text, '--max-tokens', '32', *small]
for args in (['info'], ['eval']):
    rc, out, err = command([run, args[0], model, *args[1:], *(evaluate if args[0] == 'eval' else [])])
    if rc != 0:
        sys.exit(f'FAIL: {args[0]} on the intact model: exit {rc}: {err.strip()}')
print('ok: info and eval run the intact model')

DAMAGED = r'is damaged: its SHA-256'
NO_TRAILER = r'has no integrity trailer: .*recompile it with this tlmc'
cases = []   # (description, bytes, expected message)


def flip(what, pos, expected=DAMAGED):
    b = bytearray(data)
    b[pos] ^= rng.randrange(1, 256)
    cases.append((f'{what}: byte {pos} flipped', bytes(b), expected))


secs = model_file.sections(image)
for name, type_, off, size, _ in secs:
    if type_ != 8 and size > 0:   # SHT_NOBITS has no bytes in the file
        flip(f'section {name} [{off}, {off + size})', off + rng.randrange(size))
gnu_hash = next(s for s in secs if s[0] == '.gnu.hash')
flip('.gnu.hash, the reviewer\'s byte (5 into it)', gnu_hash[2] + 5)
text_sec = next(s for s in secs if s[0] == '.text')
while True:
    pos = text_sec[2] + rng.randrange(text_sec[3] - 4)
    if data[pos:pos + 4] != b'\0\0\0\0':
        break
cases.append((f'.text: 4 zero bytes at {pos}', data[:pos] + b'\0' * 4 + data[pos + 4:], DAMAGED))
flip('ELF header', rng.randrange(64))
off, size = model_file.program_headers(image)
flip('program headers', off + rng.randrange(size))
off, size = model_file.section_headers(image)
flip('section headers', off + rng.randrange(size))
off, size = model_file.symbol(image, 'tlm_model_blob')
flip('descriptor header', off + rng.randrange(64))
flip('descriptor tables', off + 64 + rng.randrange(size - 64))
n = len(image)
flip('trailer magic', n + rng.randrange(8), NO_TRAILER)
flip('trailer length', n + 8 + rng.randrange(8), r'is damaged: its integrity trailer records')
flip('trailer digest', n + 16 + rng.randrange(32), DAMAGED)

for cut in (0, 16, 64, 1000, n // 2, n, len(data) - 1):
    expected = {0: r'is empty \(0 bytes\): compile the model with tlmc',
                16: r'is truncated: 16 bytes, shorter than an ELF header; recompile it with this tlmc',
                64: r'truncated or damaged .*; recompile it with this tlmc',
                1000: r'truncated or damaged .*; recompile it with this tlmc',
                n // 2: r'truncated or damaged .*; recompile it with this tlmc'}.get(cut, NO_TRAILER)
    what = 'cut to the image alone (as an older tlmc wrote it)' if cut == n else f'cut to {cut} of {len(data)} bytes'
    cases.append((what, data[:cut], expected))
cases.append(('one byte appended', data + b'\n', r'is damaged: 1 bytes follow its integrity trailer'))
cases.append(('4096 zero bytes appended', data + bytes(4096), r'is damaged: 4096 bytes follow'))
cases.append(('its trailer appended again', data + seal, r'is damaged: its integrity trailer records'))
# A trailer that matches bytes which are not a whole model: the ELF checks
# that follow the hash (on the same bytes) still refuse them.
junk = b'just text\n'
cases.append(('a text file with a valid trailer', junk + model_file.trailer(junk), r'not an ELF'))
half = image[:n // 2]
cases.append(('half the image with a valid trailer', half + model_file.trailer(half), r'truncated or damaged'))

for what, content, expected in cases:
    path = os.path.join(work, 'damaged.so')
    with open(path, 'wb') as f:
        f.write(content)
    for cmd in ('info', 'eval'):
        rc, out, err = command([run, cmd, path, *(evaluate if cmd == 'eval' else [])])
        lines = err.splitlines()
        problem = ('hung' if rc == 'timeout' else
                   f'died by signal {-rc}' if rc < 0 else
                   f'exit {rc}, wanted 1' if rc != 1 else
                   f'{len(lines)} lines on stderr, wanted 1' if len(lines) != 1 else
                   f'no /{expected}/ in the message' if not re.search(expected, err) else None)
        if problem:
            failures.append(f'{what}: {cmd}: {problem}')
            print(f'FAIL: {what}: {cmd}: {problem}: {err.strip()[:300]}')
        else:
            print(f'ok: {what}: {cmd}: {lines[0]}')

print(f'{len(cases)} damaged files, {len(failures)} failure(s)')
sys.exit(1 if failures else 0)
