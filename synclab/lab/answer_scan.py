"""What an instructor may want to read in an answer: the constructs that could reach into the grader.

Used by the grader (:mod:`synclab.lab.judge`; the instructors' page, "What the grades are good for"). The checks
run the reader's code in their own process, so code that walks up the call stack, rewrites the package's state or
answers every comparison with ``True`` could change a verdict from inside. Each way in needs a construct this
module names; an honest answer may use some of them too, so a finding never changes a score:

* frames, code objects and tracebacks (``f_back``, ``tb_frame``, ``co_consts``, ...) and most dunder attributes;
* reflection with a computed name (``getattr(x, "f_" + "back")``), ``exec``/``eval``/``compile``, ``globals()``;
* modules an answer has no use for (``sys``, ``os``, ``inspect``, ``gc``, ``types``, ``ctypes``, ...);
* the package's private names, and any change to the package's objects (``primer.CHECKS_0_1.clear()``);
* values that compare their own way: a class defining ``__eq__``, ``__bool__``, ``__torch_function__``, ...;
* memory and files reached below Python (numpy's ``as_strided``, ``torch.from_file``), which no audit event shows;
* torch's transforms and autograd (``torch.vmap``, ``.backward()``), whose results escape the simulated device's marks.

Each finding is one line naming the construct and its line: a review line in the grader's report, for the instructor.
"""

from __future__ import annotations

import ast
import re

# Python's computing modules, torch and numpy, and the package: what an answer may import.
ALLOWED_MODULES = {"torch", "numpy", "math", "cmath", "itertools", "functools", "operator", "collections", "logging",
                   "sys", "string", "textwrap", "fractions", "decimal", "pprint", "weakref",
                   "dataclasses", "typing", "typing_extensions", "enum", "bisect", "heapq", "contextlib", "copy",
                   "random", "statistics", "numbers", "abc", "array", "re", "time", "warnings", "__future__",
                   "synclab"}
GRADER_PARTS = ("synclab.checks", "synclab.lab", "synclab.answer_keys")
# `import os` left in an answer is harmless: it may stay, and these of its parts may be used. Any other use of os (a
# process, a file, the environment the grader reads) is named.
OS_HARMLESS = {"path", "cpu_count", "getpid", "sep", "linesep", "getenv", "environ"}  # environ written: audit event
# The checks' machinery, by the names a chapter's checks module also exports it under.
MACHINERY = {"Check", "CheckReport", "Outcome", "run_checks", "expect", "checking", "answer_key", "answer_in",
             "EXERCISE_STATUS", "ready"}
# The ways from a value to the frames, code and namespaces around it.
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "f_lasti", "f_trace", "f_lineno",
               "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
               "co_consts", "co_code", "co_names", "co_filename", "co_varnames", "cell_contents"}
ALLOWED_DUNDERS = {"__init__", "__post_init__", "__name__", "__qualname__", "__doc__", "__call__", "__enter__",
                   "__exit__", "__version__", "__len__", "__getitem__", "__setitem__", "__iter__", "__next__",
                   "__repr__", "__str__", "__contains__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__",
                   "__slots__", "__reversed__", "__add__", "__radd__", "__index__", "__int__", "__float__"}
# Names that hand out namespaces or run text as code.
REFLECTIVE = {"globals", "locals", "exec", "eval", "compile", "__import__", "open", "breakpoint", "input",
              "__builtins__", "memoryview"}
NAMED_ACCESS = {"getattr", "setattr", "delattr", "hasattr"}  # fine with a plain name: getattr(self, "cache")
# The simulated device's bookkeeping (which tensors count as the device's), and torch's switches for the modes
# that count syncs and calls.
SIMULATION = {"mark_device", "unmark_device", "DisableTorchFunction", "DisableTorchFunctionSubclass",
              "_DisableTorchDispatch", "TorchFunctionMode", "TorchDispatchMode", "overrides", "no_dispatch",
              "_python_dispatch", "set_default_device", "to_dlpack", "from_dlpack", "dlpack", "__dlpack__"}
# Memory and files reached below Python, where no audit event is raised: numpy's as_strided views any byte of the
# process (reads and writes; byte_bounds gives an array's address), torch.from_file maps any file the user can read.
RAW_ACCESS = {"as_strided", "stride_tricks", "byte_bounds", "array_utils", "ctypeslib", "DummyArray", "from_file"}
# torch's transforms and autograd, which no exercise needs: their results come back through C++ (vmap's batched
# outputs, a .grad), where the simulated device's marks do not follow, so a read of them is counted by nothing.
TRANSFORMS = {"vmap", "functorch", "autograd", "backward", "grad", "requires_grad", "requires_grad_",
              "register_hook", "jacrev", "jacfwd", "hessian", "jvp", "vjp"}
# torch's compilers and its op registries: code they run calls torch's ops below the modes that count them.
COMPILERS = {"jit", "compile", "library", "fx", "export", "ops"}
# Functions that look attributes up, or evaluate text, from a string: getattr by another name.
STRING_ACCESS = {"get_field", "vformat", "get_type_hints", "ForwardRef", "_eval_type", "evaluate_forward_ref",
                 "getattr_static", "methodcaller", "import_module", "literal_eval"}  # attrgetter: a sort key
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "sort",
            "reverse", "add", "discard", "__setitem__", "__delitem__"}
# Methods that decide how a value compares, converts or dispatches: an answer that defines one can agree with
# any expected value.
OWN_RULES = {"__eq__", "__ne__", "__bool__", "__hash__", "__index__",  # orderings (__lt__, sorting helpers) are honest
             "__int__", "__float__", "__complex__", "__torch_function__", "__torch_dispatch__", "__instancecheck__",
             "__subclasscheck__", "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__del__",
             "__init_subclass__", "__set_name__", "__class_getitem__", "__reduce__", "__reduce_ex__",
             # arithmetic: abs(got - want) <= tolerance holds for a number whose __sub__ says 0
             "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
             "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__",
             "__abs__", "__round__", "__trunc__", "__floor__", "__ceil__"}
# Numbers of the answer's own kind: a subclass of one passes isinstance(x, float) and answers its own way.
NUMBER_TYPES = {"int", "float", "complex", "bool"}


_RAW_WORDS = "it reaches memory or files below Python, where the grader's audit sees nothing"
_TRANSFORM_WORDS = ("no exercise needs torch's transforms or autograd, whose results come back where the simulated "
                    "device's counts do not follow")


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[str] = []
        self.package_names: set[str] = set()  # names bound to the package's modules and objects
        self.scopes: list[set[str]] = []  # the locals of each function being read, innermost last
        self.overridden: set[str] = set()  # hooks the answer's own subclasses of the package's classes define
        self.os_names: set[str] = set()  # names the answer binds to the os module

    def _say(self, node: ast.AST, what: str) -> None:
        self.found.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    def _module(self, node: ast.AST, name: str) -> None:
        parts = name.split(".")
        if name in ("os", "os.path"):
            return  # harmless by itself: what it is used for is read at each use (OS_HARMLESS)
        if name.startswith(GRADER_PARTS) or ".checks" in name:  # synclab.primer.checks: a chapter's checks
            self._say(node, f"imports {name}, the grader's own machinery")
        elif any(part in SIMULATION or (part.startswith("_") and part != "__future__") for part in parts):
            self._say(node, f"imports {name}, which no exercise needs (a private module, or torch's modes)")
        elif any(part in RAW_ACCESS for part in parts):
            self._say(node, f"imports {name}: {_RAW_WORDS}")
        elif name in ("torch.func", "functorch") or any(part in TRANSFORMS for part in parts):
            self._say(node, f"imports {name}: {_TRANSFORM_WORDS}")
        elif name.split(".")[0] not in ALLOWED_MODULES:
            self._say(node, f"imports {name}, which no exercise needs")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            if alias.name == "os":
                self.os_names.add(alias.asname or "os")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._module(node, module)
        if module == "os":
            for alias in node.names:
                if alias.name not in OS_HARMLESS:
                    self._say(node, f"imports {alias.name} from os, which no exercise needs")
        for alias in node.names:
            if alias.name in SIMULATION:
                self._say(node, f"imports {alias.name}, which changes what the grader counts")
            elif alias.name in RAW_ACCESS:
                self._say(node, f"imports {alias.name}: {_RAW_WORDS}")
            elif alias.name in TRANSFORMS or module == "torch" and alias.name == "func":
                self._say(node, f"imports {alias.name}: {_TRANSFORM_WORDS}")
        if module.split(".")[0] != "synclab":
            return
        for alias in node.names:
            if module == "synclab" and f"synclab.{alias.name}".startswith(GRADER_PARTS):  # from synclab import checks
                self._module(node, f"synclab.{alias.name}")
            elif alias.name.startswith("_"):
                self._say(node, f"imports {alias.name} from {module}, a private part of the package")
            elif alias.name in MACHINERY or alias.name.startswith("check_"):
                self._say(node, f"imports {alias.name} from {module}: the checks' own machinery")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.os_names and not getattr(node, "_harmless_os", False) \
                and not any(node.id in scope for scope in self.scopes):
            self._say(node, f"uses {node.id} other than for {', '.join(sorted(OS_HARMLESS))}")
        elif node.id in SIMULATION:
            self._say(node, f"uses {node.id}, which changes what the grader counts (the device's tensors, torch's modes)")
        elif node.id in STRING_ACCESS:
            self._say(node, f"uses {node.id}, which looks attributes up or evaluates text from a string")
        elif node.id in RAW_ACCESS:
            self._say(node, f"uses {node.id}: {_RAW_WORDS}")
        elif node.id in TRANSFORMS:
            self._say(node, f"uses {node.id}: {_TRANSFORM_WORDS}")
        elif node.id in REFLECTIVE:
            self._say(node, f"uses {node.id}, which hands out namespaces or runs text as code")
        elif node.id in NAMED_ACCESS and not getattr(node, "_plain_call", False):
            self._say(node, f"uses {node.id} other than with a plain attribute name")

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "_synclab" in node.value:  # setattr(t, "_synclab_on_device", False)
            self._say(node, f"names {node.value[:40]!r}, the simulated device's own mark")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in NAMED_ACCESS and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self._attribute(node, node.args[0], name.value)
                if func.id in ("setattr", "delattr"):
                    self._changes(node, node.args[0], f"{func.id}(..., {name.value!r})")
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            self._changes(node, func.value, f".{func.attr}()")
        if isinstance(func, ast.Name) and func.id == "type" and len(node.args) == 3:
            self._say(node, "builds a class with type(name, bases, namespace)")
        self.generic_visit(node)

    def _attribute(self, node: ast.AST, value: ast.expr, attr: str) -> None:
        if attr.startswith("_synclab"):
            self._say(node, f"uses .{attr}, the simulated device's own mark")
        elif attr in STRING_ACCESS:
            self._say(node, f"uses .{attr}, which looks attributes up or evaluates text from a string")
        elif attr in RAW_ACCESS:
            self._say(node, f"uses .{attr}: {_RAW_WORDS}")
        elif attr in TRANSFORMS or attr == "func" and isinstance(root := _root(value), ast.Name) and root.id == "torch":
            self._say(node, f"uses .{attr}: {_TRANSFORM_WORDS}")
        elif attr in FRAME_ATTRS:
            self._say(node, f"reads .{attr}: frames, code objects and tracebacks lead into the grader")
        elif re.fullmatch(r"_[A-Za-z]\w*?__\w+", attr) and not attr.endswith("__"):
            self._say(node, f"reaches .{attr}, a class's private (name-mangled) attribute from outside it")
        elif attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self._say(node, f"uses .{attr}")
        elif attr.startswith("_") and not attr.startswith("__") and isinstance(root := _root(value), ast.Name) \
                and root.id in ("torch", "numpy", "np"):
            self._say(node, f"uses {ast.unparse(value)}.{attr}, a private part of {root.id}")
        elif self._of_package(value) and attr.startswith("_") and not attr.startswith("__") \
                and not (attr in self.overridden and isinstance(value, ast.Name)):
            # (Base._hook(self, ...) where the answer's subclass overrides _hook: the base's version, as super()
            # would call it, so it passes)
            self._say(node, f"uses {ast.unparse(value)}.{attr}, a private part of the package")
        elif self._of_package(value) and (attr == "checks" or attr.startswith(("check_", "CHECKS"))
                                          or attr in MACHINERY):
            self._say(node, f"reaches {ast.unparse(value)}.{attr}, the grader's own machinery")
        elif attr in COMPILERS and isinstance(root := _root(value), ast.Name) and root.id == "torch":
            self._say(node, f"uses torch.{attr}: compiled code runs torch's ops where the grader cannot count them")
        elif attr in SIMULATION:
            self._say(node, f"uses .{attr}, which changes what the grader counts (the device's tensors, torch's modes)")
        elif attr in ("sys", "os", "gc", "inspect", "ctypes", "builtins", "importlib", "modules", "_getframe",
                      "settrace", "setprofile", "_current_frames", "threading", "_thread", "multiprocessing",
                      "subprocess", "concurrent", "socket", "signal", "pickle", "marshal", "shutil", "io"):
            self._say(node, f"reaches .{attr}")

    def _of_package(self, value: ast.expr) -> bool:
        root = _root(value)
        return isinstance(root, ast.Name) and root.id in self.package_names \
            and not any(root.id in scope for scope in self.scopes)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.os_names and node.attr in OS_HARMLESS:
            node.value._harmless_os = True  # type: ignore[attr-defined]  # os.path.join(...), os.cpu_count()
        self._attribute(node, node.value, node.attr)
        self.generic_visit(node)

    def _changes(self, node: ast.AST, target: ast.expr, how: str) -> None:
        if self._of_package(target):
            self._say(node, f"changes the package's {ast.unparse(target)} ({how})")

    def _targets(self, node: ast.AST, targets: list[ast.expr]) -> None:
        for target in targets:
            for element in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                if isinstance(element, (ast.Attribute, ast.Subscript)):
                    self._changes(node, element, "assigned")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def _annotation(self, annotation: ast.expr | None) -> None:
        """A string annotation is evaluated by whoever asks for the type hints (typing, singledispatch): a forward
        reference names a class, anything else is code in a string."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) \
                and not re.fullmatch(r"[\w.\[\], |]*", annotation.value):
            self._say(annotation, f"annotates with code in a string ({annotation.value[:40]!r})")

    def visit_arg(self, node: ast.arg) -> None:
        self._annotation(node.annotation)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._annotation(node.returns)
        self.scopes.append(_locals(node))
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.scopes.append(_locals(node))
        self.generic_visit(node)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(k.arg == "metaclass" for k in node.keywords):
            self._say(node, f"class {node.name} has its own metaclass")
        if any(isinstance(b, ast.Name) and b.id in NUMBER_TYPES for b in node.bases):
            self._say(node, f"class {node.name} is a number of its own kind (a subclass of a built-in number)")
        for item in node.body:
            names = [item.name] if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
                [t.id for t in getattr(item, "targets", [getattr(item, "target", None)]) if isinstance(t, ast.Name)]
            for name in names:
                if name in OWN_RULES:
                    self._say(item, f"class {node.name} defines {name}: its values would compare, convert or "
                                    "dispatch their own way")
        self.generic_visit(node)


def package_names(sources: list[str]) -> set[str]:
    """The names ``sources`` (a notebook's cells) bind to the package's modules and objects, aliases included."""
    names: set[str] = set()
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            continue
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    module = node.module if isinstance(node, ast.ImportFrom) else alias.name
                    if (module or "").split(".")[0] == "synclab":
                        names.add(alias.asname or alias.name.split(".")[0])
    for _ in range(3):  # m = primer; c = m.CHECKS_0_1: aliases of aliases
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and isinstance(root := _root(node.value), ast.Name) \
                        and root.id in names:
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names - _own_names(trees, names)


def _own_names(trees: list[ast.Module], names: set[str]) -> set[str]:
    """Names a cell binds at its top level to something of its own (``finished = []``, a ``def``): the reader's from
    then on, so a change to one is not a change to the package. (Inside a function, its own locals shadow the
    package only there: :class:`_Scanner` keeps a scope for each.)"""
    own: set[str] = set()
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and not (isinstance(root := _root(node.value), ast.Name)
                                                     and root.id in names):
                own |= {t.id for target in node.targets for t in ast.walk(target)
                        if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
    return own


def _locals(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names a function binds for itself: its parameters and what its body assigns."""
    args = function.args
    found = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found


def suspicious(source: str, names: set[str] | None = None) -> list[str]:
    """What in ``source`` (a cell) reaches into the grader, one line each; empty for an honest answer.

    ``names``: the names the notebook binds to the package (:func:`package_names`); the cell's own by default.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the grader says so on its own
    scanner = _Scanner()
    scanner.package_names = set(names) if names is not None else package_names([source])
    scanner.overridden = {item.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                          and any(isinstance(b, ast.Name) and b.id in scanner.package_names for b in node.bases)
                          for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):  # calls first: getattr with a plain name is marked before its Name is seen
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in NAMED_ACCESS \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            node.func._plain_call = True  # type: ignore[attr-defined]
    scanner.visit(tree)
    return list(dict.fromkeys(scanner.found))
