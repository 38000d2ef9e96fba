"""The competition: its spec (from YAML or inferred with evidence), MLE-bench's folders, and grading."""
