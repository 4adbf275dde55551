"""Counts the package computes the same way every time, kept on disk per version of the package's code.

A room of chapter 6 (the capstone), for its own use: its book rows (every configuration's counts with the book's fixes) take
tens of seconds to count, and every process that checks Exercise 6.3 or draws the lab's rows for a fix not
written yet needs them. They are counted, not timed: the same on any machine, a function of the package's
code alone. So a process counts them once per version of that code (a digest of every ``.py`` file of
``synclab``), writes them to a folder of this user's, and every later process with the same code reads them
back. A changed line anywhere in the package is a new digest, and a new count.

The folder is this user's own (mode 0700 under the system's temporary folder); one that another user could
write to is not used, and a file that cannot be read back as JSON is counted again.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable

from synclab import package_digest, private_folder

def counted_once(name: str, count: Callable[[], Any]) -> Any:
    """``count()``'s JSON-able result, counted once per version of the package's code and read back after."""
    folder = private_folder("synclab-counts")
    path = folder / f"{name}-{package_digest()}.json" if folder is not None else None
    if path is not None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    value = count()
    if path is not None:
        try:  # written whole, then renamed: a reader never sees half a file
            with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".part") as part:
                json.dump(value, part)
            os.replace(part.name, path)
        except OSError:
            pass
    return value
