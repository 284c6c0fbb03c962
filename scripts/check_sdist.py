"""Checks that a gpuprobe source archive carries every file the build embeds.

    python3 scripts/check_sdist.py dist/gpuprobe-VERSION.tar.gz

The build reads the knowledge base, the probe package, the presets and the tolerance table
through symlinks inside the crates (docs/packaging.md); maturin stores them as plain files
under those paths. Each must be in the archive, file for file, as in this checkout. Exits 1
with the list of what is missing.
"""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def expected_files() -> dict[str, str]:
    """Archive path (below the top directory) -> the checkout file it must come from."""
    want: dict[str, str] = {}

    def add_tree(source: Path, target: str, suffixes: tuple[str, ...]) -> None:
        for path in sorted(source.rglob("*")):
            if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts:
                want[f"{target}/{path.relative_to(source).as_posix()}"] = str(path.relative_to(REPO))

    add_tree(REPO / "kb", "crates/gpuprobe-kb/kb", (".toml",))
    add_tree(REPO / "simulate" / "presets", "crates/gpuprobe-runner/presets", (".toml",))
    add_tree(REPO / "python" / "gpuprobe", "crates/gpuprobe-runner/python-package", (".py", ".typed", ".json"))
    add_tree(REPO / "python" / "gpuprobe", "python/gpuprobe", (".py", ".typed", ".json"))
    want["crates/gpuprobe-doctor/tolerances.json"] = "python/gpuprobe/worker/tolerances.json"
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        want[name] = name
    want["crates/gpuprobe-kb/BUILD_COMMIT"] = "(written by scripts/build-sdist.sh)"
    return want


def missing_from(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name}
    return [f"{path} (from {source})" for path, source in expected_files().items() if path not in names]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    missing = missing_from(Path(argv[0]))
    if missing:
        print(f"{argv[0]} lacks {len(missing)} file(s) the build needs:", file=sys.stderr)
        for line in missing:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"{argv[0]}: carries all {len(expected_files())} embedded files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
