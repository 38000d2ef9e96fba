"""The competition runner: an MLE-bench competition and a time budget in, a valid submission out."""
__version__ = "0.1.0"

from pathlib import Path

# The package's own folder, for the anchors that must not move when a module moves between subpackages: the code
# fingerprint a resumed run compares, the folders a container mounts, the competitions beside the package.
PACKAGE = Path(__file__).resolve().parent
