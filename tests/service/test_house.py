"""The house rules that a reader checks by eye, checked by the suite.

CONTRIBUTING's house rules (a module under 500 lines, a function at most
80, an import inside a function says why) and the maps a reader trusts
(each package's docstring lists its modules; every path README.md and
CONTRIBUTING.md cite exists). Pure reads of the source tree, no imports
of the code under test: each test lists every offender, so one run says
all that is left to mend.
"""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVICE = ROOT / "service" / "kg_service"
PLUGIN = ROOT / "keras_gelu"
PACKAGES = (SERVICE, PLUGIN, ROOT / "keras_gelu_names")

MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500


def _modules():
    for package in PACKAGES:
        yield from sorted(package.rglob("*.py"))


def _relative(path):
    return path.relative_to(ROOT).as_posix()


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_every_function_is_at_most_80_lines():
    # From `def` to the last line of the body: a click command's option
    # decorators are its arguments' declarations, not its length.
    offenders = []
    for path in _modules():
        for node in _functions(ast.parse(path.read_text())):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                offenders.append(f"{_relative(path)}:{node.lineno} {node.name} ({length} lines)")
    assert not offenders, "functions over 80 lines:\n" + "\n".join(offenders)


def test_every_module_is_under_500_lines():
    offenders = []
    for path in _modules():
        n = len(path.read_text().splitlines())
        if n >= MAX_MODULE_LINES:
            offenders.append(f"{_relative(path)} ({n} lines)")
    assert not offenders, "modules of 500 lines or more:\n" + "\n".join(offenders)


def _says_why(lines, node):
    # The reason sits on the import's own line (its first or, for a
    # parenthesised one, its last), or alone on the line above it.
    own = (lines[node.lineno - 1], lines[node.end_lineno - 1])
    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
    return any("#" in line for line in own) or above.startswith("#")


def test_every_function_level_import_says_why():
    # CONTRIBUTING: an import inside a function is for start-up time only
    # (TensorFlow, MLflow, scipy after the cheap checks) and says so.
    offenders = []
    for path in _modules():
        lines = path.read_text().splitlines()
        for function in _functions(ast.parse("\n".join(lines))):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and not _says_why(lines, node):
                    offenders.append(f"{_relative(path)}:{node.lineno} {lines[node.lineno - 1].strip()}")
    offenders = sorted(set(offenders))
    assert not offenders, "function-level imports with no reason beside them:\n" + "\n".join(offenders)


def _packages():
    for package in PACKAGES:
        yield package
        yield from sorted(p.parent for p in package.rglob("*/__init__.py"))


def _children(package):
    modules = {
        p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")
    }
    packages = {p.parent.name for p in package.glob("*/__init__.py")}
    return modules | packages


def _listed_modules(docstring):
    # A `Modules:` section, written as Keras writes `Args:`: one
    # `name: what it holds` line per module or sub-package.
    listed, inside = set(), False
    for line in (docstring or "").splitlines():
        if line.strip() == "Modules:":
            inside = True
        elif inside and re.match(r"^\s{4}(\w+)(/)?:", line):
            listed.add(re.match(r"^\s{4}(\w+)", line).group(1))
        elif inside and line.strip() and not line.startswith(" " * 8):
            inside = False
    return listed


def test_package_docstrings_list_their_modules():
    offenders = []
    for package in _packages():
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        listed, present = _listed_modules(docstring), _children(package)
        where = _relative(package / "__init__.py")
        for name in sorted(present - listed):
            offenders.append(f"{where}: `{name}` is not in its Modules: section")
        for name in sorted(listed - present):
            offenders.append(f"{where}: `{name}` is listed but is no module of the package")
    assert not offenders, "package docstrings out of step:\n" + "\n".join(offenders)


_CITED = re.compile(r"`([^`]+)`|\]\(([^)#]+)(?:#[^)]*)?\)")
# Where a doc's short path (`sweep/pipeline.run`) is read from.
_BASES = (ROOT, SERVICE, ROOT / "service")


def _cited_paths(text):
    for code, link in _CITED.findall(text):
        words = (code or link).split()
        if words and words[0] == "bash" and len(words) > 1:
            words = words[1:]
        if not words or "/" not in words[0] or "://" in words[0]:
            continue
        token = words[0].rstrip(".,")
        if any(c in token for c in "<>$~*:") or token.startswith(("/", "./", "-")):
            continue
        yield token


def _looks_like_a_repo_path(token):
    first = token.split("/")[0]
    rooms = {p.name for base in _BASES for p in base.iterdir() if p.is_dir()}
    return first in rooms or re.search(r"\.(py|md|ya?ml|sh|toml|png|txt)$", token)


def _exists(token):
    for base in _BASES:
        if (base / token).exists() or (base / f"{token}.py").exists():
            return True
        # `sweep/pipeline.run`, `tracking/mlflow_store.Tracker.register`:
        # a module and a name it defines.
        module, _, attribute = token.partition(".")
        name = attribute.split(".")[0]
        source = base / f"{module}.py"
        if name and source.exists() and re.search(
            rf"^(\s*(async\s+)?def|\s*class)\s+{name}\b|^{name}\s*[:=]",
            source.read_text(),
            re.M,
        ):
            return True
    return False


def test_paths_cited_by_readme_and_contributing_exist():
    offenders = []
    for doc in ("README.md", "CONTRIBUTING.md"):
        for token in _cited_paths((ROOT / doc).read_text()):
            if _looks_like_a_repo_path(token) and not _exists(token):
                offenders.append(f"{doc}: `{token}`")
    offenders = sorted(set(offenders))
    assert not offenders, "paths cited that do not exist:\n" + "\n".join(offenders)
