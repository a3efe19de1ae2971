"""The build backend of mayfly-client (PEP 517, with PEP 660 editables):
standard library only, so that ``pip install ./clients/python`` works in a
plain virtual environment, offline and with no flags — no setuptools, no
wheel, nothing fetched. pyproject.toml points at it (``backend-path``).

The package is pure Python: the wheel is the ``mayfly`` directory plus its
dist-info (METADATA, WHEEL, entry_points.txt for the pytest plugin,
RECORD), written with zipfile, reproducibly (fixed timestamps, sorted)."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
NAME = "mayfly-client"
SUMMARY = "The official Python client of Mayfly, the temporary receive-only inbox service"
REQUIRES_PYTHON = ">=3.9"
LICENSE = "See the repository"
CLASSIFIERS = [
    "Programming Language :: Python :: 3",
    "Framework :: Pytest",
    "Topic :: Software Development :: Testing",
]
# pytest finds the mayfly_inbox fixture in an installed package by itself.
ENTRY_POINTS = "[pytest11]\nmayfly = mayfly.pytest_plugin\n"
PACKAGE = "mayfly"
TAG = "py3-none-any"
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the same bytes on every build


def _version() -> str:
    text = (ROOT / PACKAGE / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        raise RuntimeError(f"no __version__ in {PACKAGE}/__init__.py")
    return m.group(1)


def _dist() -> str:
    """The distribution's name as in file names: mayfly_client."""
    return re.sub(r"[-_.]+", "_", NAME).lower()


def _metadata() -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {_version()}",
        f"Summary: {SUMMARY}",
        f"License: {LICENSE}",
        f"Requires-Python: {REQUIRES_PYTHON}",
    ]
    lines += [f"Classifier: {c}" for c in CLASSIFIERS]
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _wheel_file() -> bytes:
    return f"Wheel-Version: 1.0\nGenerator: mayfly_build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()


def _package_files() -> List[Tuple[str, bytes]]:
    out = []
    for p in sorted((ROOT / PACKAGE).rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
            out.append((p.relative_to(ROOT).as_posix(), p.read_bytes()))
    return out


def _dist_info_files() -> List[Tuple[str, bytes]]:
    info = f"{_dist()}-{_version()}.dist-info"
    return [
        (f"{info}/METADATA", _metadata()),
        (f"{info}/WHEEL", _wheel_file()),
        (f"{info}/entry_points.txt", ENTRY_POINTS.encode()),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]


def _write_wheel(directory: str, files: List[Tuple[str, bytes]]) -> str:
    name = f"{_dist()}-{_version()}-{TAG}.whl"
    info = f"{_dist()}-{_version()}.dist-info"
    record = []
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files = files + [(f"{info}/RECORD", ("\n".join(record) + "\n").encode())]
    os.makedirs(directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            zi = zipfile.ZipInfo(path, _EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _write_metadata_dir(directory: str) -> str:
    info = f"{_dist()}-{_version()}.dist-info"
    for path, data in _dist_info_files():
        target = Path(directory) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return info


# PEP 517


def get_requires_for_build_wheel(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[Dict] = None) -> str:
    return _write_metadata_dir(metadata_directory)


def build_wheel(wheel_directory: str, config_settings: Optional[Dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, _package_files() + _dist_info_files())


def build_sdist(sdist_directory: str, config_settings: Optional[Dict] = None) -> str:
    base = f"{_dist()}-{_version()}"
    name = f"{base}.tar.gz"
    files = [("PKG-INFO", _metadata())]
    for rel in ("pyproject.toml", "README.md", "_build/mayfly_build.py"):
        files.append((rel, (ROOT / rel).read_bytes()))
    files += _package_files()
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for path, data in files:
            ti = tarfile.TarInfo(f"{base}/{path}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 315532800
            t.addfile(ti, io.BytesIO(data))
    return name


# PEP 660: pip install -e ./clients/python puts the clone on sys.path.


def get_requires_for_build_editable(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_editable(metadata_directory: str, config_settings: Optional[Dict] = None) -> str:
    return _write_metadata_dir(metadata_directory)


def build_editable(wheel_directory: str, config_settings: Optional[Dict] = None,
                   metadata_directory: Optional[str] = None) -> str:
    pth = (f"{_dist()}.pth", (str(ROOT) + "\n").encode())
    return _write_wheel(wheel_directory, [pth] + _dist_info_files())
