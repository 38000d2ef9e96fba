"""Prints the options that make `uv pip install` read the package indexes and wheel folders this Python's pip reads.

pip takes its indexes from pip.conf files and PIP_* variables (`pip config list` shows both); uv reads neither, so
without these options it would ask only the public index. pip weighs every index alike and picks the best wheel
among all of them; uv's nearest strategy is `unsafe-best-match` (the best version across indexes)."""
import ast
import subprocess
import sys

# pip's option -> uv's; a pip option given at several levels lists its values once each, the first level first
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links"}
SINGLE = {"index-url"}  # one default index: the first level pip lists (its variables) wins


def pip_settings() -> list[tuple[str, str]]:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True).stdout
    settings = []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in OPTIONS and value:
            settings += [(name, item) for item in ast.literal_eval(value).split()]
    return settings


def uv_args(settings: list[tuple[str, str]]) -> list[str]:
    args, seen = [], set()
    for name, value in settings:
        if (name, value) in seen or (name in SINGLE and any(n == name for n, _ in seen)):
            continue
        seen.add((name, value))
        args.append(f"{OPTIONS[name]}={value}")
    if any(name == "extra-index-url" for name, _ in seen):
        args.append("--index-strategy=unsafe-best-match")
    return args


if __name__ == "__main__":
    print(" ".join(uv_args(pip_settings())))
