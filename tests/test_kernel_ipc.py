"""The book build's kernels talk over IPC sockets in a private temp folder (book/_ext/kernel_ipc.py).

A page's code cells run as ``make book`` runs them: jupyter-cache's ``single_nb_execution``, which
hands the notebook to nbclient with no kernel manager and no config. The cell reads its own kernel's
connection file, so what is checked is what the kernel was really started with.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest
import yaml
from jupyter_cache.executors.utils import single_nb_execution
from nbclient import NotebookClient
from nbformat import v4
from traitlets.config import Config

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]
KERNELSPEC = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}

# Run in the kernel: its connection info and the socket files beside its ip, with their types.
REPORT_CELL = """\
import json, os, stat
from ipykernel.connect import get_connection_info
info = json.loads(get_connection_info())
folder, prefix = os.path.split(info["ip"]) if info["transport"] == "ipc" else (None, None)
sockets = sorted(name for name in os.listdir(folder) if name.startswith(prefix + "-")) if folder else []
info["sockets"] = {name: stat.S_ISSOCK(os.stat(os.path.join(folder, name)).st_mode) for name in sockets}
print(json.dumps({key: info[key] for key in ("transport", "ip", "sockets")}))
"""


class StubApp:
    """What setup() uses of a Sphinx app: connect(); finish() emits build-finished."""

    def __init__(self) -> None:
        self.handlers: dict[str, list[Callable[..., Any]]] = {}

    def connect(self, event: str, handler: Callable[..., Any], priority: int = 500) -> int:
        self.handlers.setdefault(event, []).append(handler)
        return len(self.handlers[event])

    def finish(self) -> None:
        for handler in self.handlers.get("build-finished", []):
            handler(self, None)


@pytest.fixture
def kernel_ipc(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    sys.modules.pop("kernel_ipc", None)
    import kernel_ipc

    return kernel_ipc


@pytest.fixture
def built(kernel_ipc: ModuleType) -> Iterator[StubApp]:
    """The extension set up as the build sets it up; build-finished emitted afterwards."""
    app = StubApp()
    kernel_ipc.setup(app)
    try:
        yield app
    finally:
        app.finish()


def test_a_page_cell_runs_in_a_kernel_on_ipc_sockets_in_a_private_temp_dir(built: StubApp, tmp_path: Path) -> None:
    nb = v4.new_notebook(cells=[v4.new_code_cell(REPORT_CELL), v4.new_code_cell("1 + 1")],
                         metadata=KERNELSPEC)
    result = single_nb_execution(nb, cwd=str(tmp_path), timeout=120, allow_errors=False)
    assert result.err is None, result.exc_string
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "2"
    info = json.loads(nb.cells[0].outputs[0]["text"])

    assert info["transport"] == "ipc"
    folder = Path(info["ip"]).parent
    assert folder.is_absolute() and folder.parent == Path(tempfile.gettempdir())
    assert not folder.is_relative_to(ROOT) and not folder.is_relative_to(tmp_path)  # not the repo, not the page's folder
    assert len(info["sockets"]) == 5 and all(info["sockets"].values()), info["sockets"]  # shell, iopub, stdin, control, hb

    built.finish()
    assert not folder.exists(), "build-finished removes the socket folder"
    assert "_config_default" not in NotebookClient.__dict__, "build-finished takes the default back"


def test_two_kernels_of_a_build_name_different_sockets_in_one_private_folder(built: StubApp) -> None:
    nb = v4.new_notebook(metadata=KERNELSPEC)
    first, second = (NotebookClient(nb).create_kernel_manager() for _ in range(2))
    assert first.transport == second.transport == "ipc"
    assert first.ip != second.ip and Path(first.ip).parent == Path(second.ip).parent
    assert Path(first.ip).parent.stat().st_mode & 0o077 == 0, "the socket folder is private"
    # A client given a config of its own keeps it.
    assert NotebookClient(nb, config=Config()).create_kernel_manager().transport == "tcp"


def test_the_book_loads_the_extension() -> None:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]
    assert config["local_extensions"].get("kernel_ipc") == "book/_ext"
    assert "kernel_ipc" in config["config"]["extensions"]
