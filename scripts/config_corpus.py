"""The corpus of real training configs (tests/corpus): files taken byte for byte from the frameworks'
own public repositories at the commits pinned in tests/corpus/manifest.json.

    python scripts/config_corpus.py copy --mirrors DIR   # copy every manifest file out of local git mirrors
    python scripts/config_corpus.py check [--corpus DIR] # verify the files present against the manifest

`copy` expects one git directory per repository under DIR, named OWNER+NAME (either the git directory
itself or a `repo` folder inside it; bare or not), each holding the pinned commit. It writes
tests/corpus/files/OWNER+NAME/PATH and checks every file's sha256 before writing it. `check` reports
files missing, changed (size or sha256) or not in the manifest, and exits 1 if any file is missing or
changed; `--corpus` names the corpus folder (its `files` folder is read) or a files folder itself.
Only the standard library and the `git` command are used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "corpus"
MANIFEST = CORPUS / "manifest.json"


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    """The manifest: {"about", "repositories": {repo: {"commit", ...}}, "files": [{"repo", "path", ...}]}."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def folder_name(repo: str) -> str:
    """OWNER/NAME as one folder name, OWNER+NAME."""
    return repo.replace("/", "+")


def git_dir(mirrors: Path, repo: str) -> Path:
    """The git directory of `repo` among the mirrors."""
    base = mirrors / folder_name(repo)
    inner = base / "repo"
    return inner if inner.is_dir() else base


def files_folder(corpus: Path) -> Path:
    """The folder of OWNER+NAME trees: corpus/files, or `corpus` itself when it has no files folder."""
    inner = corpus / "files"
    return inner if inner.is_dir() or not corpus.is_dir() else corpus


def blob(directory: Path, commit: str, path: str) -> bytes:
    """The bytes of `path` at `commit` in the git directory `directory`."""
    done = subprocess.run(
        ["git", "-C", str(directory), "show", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"{directory}: cannot read {commit}:{path}: {message}")
    return done.stdout


def copy(mirrors: Path, corpus: Path) -> int:
    """Copy every manifest file out of the mirrors into corpus/files; the exit status."""
    manifest = load_manifest()
    commits = {repo: info["commit"] for repo, info in manifest["repositories"].items()}
    failures = 0
    copied = 0
    for entry in manifest["files"]:
        repo, path = entry["repo"], entry["path"]
        try:
            data = blob(git_dir(mirrors, repo), commits[repo], path)
        except RuntimeError as error:
            print(f"error: {error}", file=sys.stderr)
            failures += 1
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"] or len(data) != entry["bytes"]:
            print(f"error: {repo}/{path}: sha256 {digest} ({len(data)} bytes) is not the manifest's")
            failures += 1
            continue
        target = corpus / "files" / folder_name(repo) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        copied += 1
    print(f"copied {copied} files into {corpus / 'files'}; {failures} failed")
    return 1 if failures else 0


def check(corpus: Path) -> int:
    """Compare corpus/files with the manifest; the exit status."""
    manifest = load_manifest()
    root = files_folder(corpus)
    expected = {Path(folder_name(entry["repo"])) / entry["path"]: entry for entry in manifest["files"]}
    present = set()
    if root.is_dir():
        present = {path.relative_to(root) for path in root.rglob("*") if path.is_file()}
    missing = sorted(set(expected) - present)
    extra = sorted(present - set(expected))
    changed = []
    for relative in sorted(set(expected) & present):
        entry = expected[relative]
        data = (root / relative).read_bytes()
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            changed.append(relative)
    for label, paths in (("missing", missing), ("changed", changed), ("not in the manifest", extra)):
        for path in paths:
            print(f"{label}: {path}")
    good = len(expected) - len(missing) - len(changed)
    print(
        f"{good} of {len(expected)} files as the manifest says; {len(missing)} missing, "
        f"{len(changed)} changed, {len(extra)} not in the manifest"
    )
    return 1 if missing or changed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    copying = commands.add_parser("copy", help="copy the manifest's files out of local git mirrors")
    copying.add_argument("--mirrors", type=Path, required=True, help="folder of OWNER+NAME git directories")
    copying.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder (default: tests/corpus)")
    checking = commands.add_parser("check", help="verify the files present against the manifest")
    checking.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder (default: tests/corpus)")
    args = parser.parse_args(argv)
    if args.command == "copy":
        return copy(args.mirrors, args.corpus)
    return check(args.corpus)


if __name__ == "__main__":
    sys.exit(main())
