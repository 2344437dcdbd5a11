"""Nothing outside `tasks/` names a task (issue 31 §1, CONTRIBUTING's
"A new task"): a task owns everything about itself, and the rest of the
service reaches it through `Task` fields.

Read from the code (Python's `ast`), not grepped: a module outside
`kg_service/tasks/` imports no task's own module (only `tasks.base`, the
registry, and `tasks`, which registers the built-in ones); no string in
its code is a built-in task's name or a path into a task's folder; no
identifier is a task's name or one of its modules' own names. Comments,
docstrings and help text may name the shipped configs and experiments
(`configs/moons.yaml`, `moons-relu-vs-gelu`): they are the user's words,
not a branch on a task. "digits" is also the English word for a
number's figures (`digits=4`): it counts as a task name in a string
only. The paper reruns (`kg_service/papers/`, and until they move there
`analysis/papers.py` and `analysis/results_*.py`) name the studies they
rerun, by their study tags (`digits` among them), as docs/results.md
does: they are left out.
"""

import ast
import pathlib

from kg_service.tasks import base as tasks

PACKAGE = pathlib.Path(tasks.__file__).parents[1]  # service/kg_service
TASKS = PACKAGE / "tasks"
PAPER_RERUNS = ("papers/", "analysis/papers.py", "analysis/results_")
BUILT_IN = ("moons", "circles", "digits", "python_code")
WORDS = ("digits",)  # a task name that is also a word of the code


def task_folders():
    return sorted(p.name for p in TASKS.iterdir() if (p / "__init__.py").exists())


def own_module_names():
    """The language task's modules whose names are its own: not `data`,
    `model` or `train`, `stacked` or `entropy`, words every room uses
    (an import of any task module is caught as an import)."""
    return {"lm_layers", "corpus", "probes"}


def docstrings(tree):
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}


def identifiers(node):
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.asname or node.name.split(".")[-1]]
    return []


def task_names_in(path, names, modules, folders):
    """`[(line, what)]` of every place `path`'s code names a task."""
    tree = ast.parse(path.read_text())
    skip = docstrings(tree)
    found = []
    paths = [f"tasks/{f}" for f in folders] + [f"tasks.{f}" for f in folders]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kg_service.tasks"):
            mine = [node.module] if node.module != "kg_service.tasks" else [
                f"kg_service.tasks.{a.name}" for a in node.names]
            found += [(node.lineno, f"imports {m}") for m in mine
                      if m != "kg_service.tasks.base"]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"imports {a.name}") for a in node.names
                      if a.name.startswith("kg_service.tasks.")
                      and a.name != "kg_service.tasks.base"]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if node.value in names or any(p in node.value for p in paths):
                found.append((node.lineno, repr(node.value)))
        for name in identifiers(node):
            if (name in names and name not in WORDS) or name in modules:
                found.append((getattr(node, "lineno", 0), name))
    return found


def outside_tasks():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not relative.startswith(("tasks/",) + PAPER_RERUNS):
            yield relative, path


def test_the_built_in_tasks_are_the_names_looked_for():
    assert set(BUILT_IN) <= set(tasks.names())
    assert {"classification", "language"} <= set(task_folders())
    language = {p.stem for p in (TASKS / "language").glob("*.py")}
    assert own_module_names() <= language


def test_no_module_outside_tasks_names_a_task():
    names = set(tasks.names()) | set(BUILT_IN)
    modules, folders = own_module_names(), task_folders()
    found = [f"{relative}:{line}: {what}"
             for relative, path in outside_tasks()
             for line, what in task_names_in(path, names, modules, folders)]
    assert not found, "a task named outside tasks/ (ask the Task instead):\n" + "\n".join(found)


def test_the_check_finds_a_branch_on_a_task_and_an_import_of_its_module(tmp_path):
    path = tmp_path / "branch.py"
    path.write_text('"""Docstrings may say moons."""\n'
                    "from kg_service.tasks.language import lm_layers\n"
                    "def f(cfg, digits=4):  # comments may say python_code\n"
                    '    return cfg.data.dataset in ("moons", "circles"), digits\n')
    found = task_names_in(path, set(BUILT_IN), own_module_names(), task_folders())
    assert sorted(found) == [(2, "imports kg_service.tasks.language"), (2, "lm_layers"),
                             (4, "'circles'"), (4, "'moons'")]
