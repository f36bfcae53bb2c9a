"""The argument parsing of the Python tools in bench/ and scripts/, as
tlm's tools do it: a usage error is one line on stderr and exit 2
(argparse prints its usage block first), and counts are whole numbers of
at least 1 (0 steps would time nothing, a negative count give negative
tokens/s, a 0 batch fail later in a worker with a traceback). Shared by
train_bench.py, gpu_peer.py and attention_sass.py, and by
scripts/gen_shard.py and make_downstream.py."""
import argparse


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors in one line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def positive(text):
    """argparse type: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return n
