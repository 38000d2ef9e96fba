"""The files below an image folder (or where its archive was extracted), found by the path a listing gives them:
by its longest tail that names a file there (a COCO `file_name` such as inaturalist's `train_val2019/Plants/400/
x.jpg` is `Plants/400/x.jpg` inside a tar whose members lack that first folder), or by a file name alone wherever
it lies below (an id plus its suffix)."""
from __future__ import annotations

from pathlib import Path, PurePosixPath

from runner.data.reading import image_files, image_folder


class FileIndex:
    """Every file below `folder` of the public folder (extracted once under `work_dir` when it is an archive), by
    its '/'-separated path there and by its name."""

    def __init__(self, data_dir: Path, folder: str, work_dir: Path):
        root = Path(image_folder(data_dir, folder, work_dir))
        files = image_files(data_dir, folder, work_dir)
        self.by_path = {p.relative_to(root).as_posix(): p for p in files}
        self.by_name = {p.name: p for p in files}

    def find(self, listed: str) -> Path | None:
        """The file a listing's path names: the path itself, else its longest tail that names a file."""
        parts = PurePosixPath(listed).parts
        for start in range(len(parts)):
            found = self.by_path.get("/".join(parts[start:]))
            if found is not None:
                return found
        return None

    def named(self, names, suffix: str = "") -> list[Path | None]:
        """The file named each of `names` plus `suffix`, wherever it lies below the folder (None: not there)."""
        return [self.by_name.get(f"{name}{suffix}") for name in map(str, names)]
