"""What every replica writes the same way."""
from __future__ import annotations

from pathlib import Path


def describe(public: Path, title: str, *lines: str) -> None:
    """description.md, as MLE-bench puts one in every public folder: the title, what to predict, the metric."""
    (public / "description.md").write_text(f"# {title} (synthetic replica)\n\n" + "\n".join(lines) + "\n",
                                           encoding="utf-8")
