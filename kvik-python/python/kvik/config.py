"""``kvik.config``: cufile.json, checked the way libcufile reads it."""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from kvik import _kvik


def validate(
    path: Optional[Union[str, "os.PathLike[str]"]] = None,
    library: str = "1.15",
    check_paths: bool = False,
) -> dict[str, Any]:
    """Validate a cufile.json and return its diagnostics.

    ``path`` defaults to the file cuFile would read here (``CUFILE_ENV_PATH_JSON``,
    else ``/etc/cufile.json``; ``FileNotFoundError`` when there is none). ``library``
    is the libcufile version whose keys and ranges apply ("1.15" or "1.20");
    ``check_paths`` also checks that paths named in the file exist here.

    Returns ``{"file", "library", "valid", "errors", "warnings", "diagnostics"}``;
    each diagnostic has ``severity`` ("error" or "warning"), ``kind``, ``path`` (the
    JSON path, such as ``execution.max_io_threads``), ``line``, ``column``,
    ``message``, and where known ``expected`` and ``help``. Comments are accepted
    (as libcufile accepts them); trailing commas, wrong types and values out of
    range are errors; unknown and duplicate keys are warnings.
    """
    return _kvik.validate_config(
        None if path is None else os.fspath(path), library, check_paths
    )


__all__ = ["validate"]
