"""The competition runner: an MLE-bench competition and a time budget in, a valid submission out."""
__version__ = "0.1.0"
