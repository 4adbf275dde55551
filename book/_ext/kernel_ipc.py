"""The book build's kernels talk over IPC sockets in a private temporary folder, not TCP ports.

myst-nb runs the pages' code cells through jupyter-cache and nbclient, whose kernels use
jupyter_client's default TCP transport: the free ports are found by binding and releasing them
before the kernel binds them again, and on a shared machine another process took one in between
(``ZMQError: Address already in use``). The lab's own runner (``run_notebook`` in
``synclab/lab/notebook_runner.py``) starts its kernels with ``transport="ipc"`` and a socket path in
a private temporary folder for that reason; this extension does the same for the book build.

``setup`` gives nbclient's ``NotebookClient`` a traitlets config default (used when nbclient is given
no config, as jupyter-cache gives none) whose ``KernelManager`` section says ``transport="ipc"`` and an
``ip`` (the socket files' path prefix) of its own in a folder made for this build by
``tempfile.mkdtemp``: never the repository or the notebook's folder, and two builds at once, or two
kernels of one build, cannot name the same socket. ``build-finished`` takes the default back and
removes the folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from typing import TYPE_CHECKING, Any

from traitlets.config import Config

if TYPE_CHECKING:
    from sphinx.application import Sphinx

CONFIG_DEFAULT = "_config_default"  # traitlets' name for a dynamic default of the ``config`` trait


def ipc_config(socket_dir: str) -> Config:
    """A kernel manager config: IPC transport, socket files ``<socket_dir>/<fresh name>-<n>``."""
    return Config({"KernelManager": {"transport": "ipc",
                                     "ip": os.path.join(socket_dir, f"kernel-{uuid.uuid4().hex[:12]}")}})


def setup(app: Sphinx) -> dict[str, Any]:
    from nbclient import NotebookClient

    socket_dir = tempfile.mkdtemp(prefix="synclab-kernels-")  # mode 0700: private to this user and build

    def config_default(client: NotebookClient) -> Config:
        return ipc_config(socket_dir)

    def build_finished(app: Sphinx, exception: BaseException | None) -> None:
        if NotebookClient.__dict__.get(CONFIG_DEFAULT) is config_default:
            delattr(NotebookClient, CONFIG_DEFAULT)
        shutil.rmtree(socket_dir, ignore_errors=True)

    setattr(NotebookClient, CONFIG_DEFAULT, config_default)
    app.connect("build-finished", build_finished)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
