"""Dependencies point one way, in the order the README's layout section draws: each package
imports only from its own layer and the ones below, never at function level (where an import
hides a cycle), and no two packages import each other. A module loaded on first use
(``lazy.load("store")``, lazy_loader) is an import like the others."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parent.parent
# bottom first; a package may import its own layer and any below
LAYERS = [
    ["domain"],
    ["runner", "rlm"],
    ["trainer"],
    ["store"],
    ["activities"],
    ["workflows"],
    ["dataset_optimization", "codec", "services", "review", "demo", "client", "worker", "starter"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules() -> dict[str, list[Path]]:
    """Each top-level package or module of the project, with its source files."""
    found: dict[str, list[Path]] = {}
    for name in LAYER:
        package, module = ROOT / name, ROOT / f"{name}.py"
        found[name] = sorted(package.rglob("*.py")) if package.is_dir() else [module]
    return found


def _lazy_load(node: ast.AST) -> bool:
    """``lazy.load("store")`` (lazy_loader): an import made on first use, checked as one."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "load"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "lazy"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level name, line, inside a function) for each import of a project module."""
    tree = ast.parse(path.read_text(), str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)) or _lazy_load(inner):
                    in_function.add(id(inner))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif _lazy_load(node):
            names = [node.args[0].value]  # type: ignore[attr-defined]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in LAYER:
                found.append((top, node.lineno, id(node) in in_function))
    return found


def test_the_readme_draws_the_same_order():
    readme = (ROOT / "README.md").read_text()
    drawn = " ← ".join(" · ".join(f"`{n}`" for n in names) for names in LAYERS[:-1])
    assert drawn in readme, drawn


def test_dependencies_point_one_way():
    upward, nested = [], []
    graph: dict[str, set[str]] = defaultdict(set)
    for name, files in modules().items():
        for path in files:
            where = path.relative_to(ROOT)
            for target, line, in_function in imports(path):
                if target == name:
                    if in_function:
                        nested.append(f"{where}:{line} imports {target} inside a function")
                    continue
                graph[name].add(target)
                if LAYER[target] > LAYER[name]:
                    upward.append(
                        f"{where}:{line}: {name} (layer {LAYER[name]}) imports "
                        f"{target} (layer {LAYER[target]})"
                    )
                if in_function:
                    nested.append(f"{where}:{line} imports {target} inside a function")
    assert upward == [], "\n".join(upward)
    assert nested == [], "\n".join(nested)
    mutual = sorted(
        {tuple(sorted((a, b))) for a in list(graph) for b in graph[a] if a in graph.get(b, ())}
    )
    assert mutual == [], mutual


def test_each_view_reads_on_its_own():
    """The store's read side: each read model's queries in a module of their own
    (``store/views/*_view.py``), standing on the shared reader (and on the lineage view, whose
    agent versions the others look up), never on another view or on the write side; only
    ``store/views/queries.py`` joins them."""
    shared = {"store.views.reader", "store.views.lineage_view"}
    crossing = []
    for path in sorted((ROOT / "store" / "views").glob("*_view.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            module = node.module
            other_view = module.startswith("store.views.") and module not in shared
            if other_view or module.startswith("store.records"):
                crossing.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {module}")
    assert crossing == [], "\n".join(crossing)


# Activities that only record: what they write was decided elsewhere (the trainer, the
# reviewer, the workflow), so they reach neither the trainer nor a model.
RECORDING_ACTIVITIES = ["cycle_records", "insight_sharing", "feedback", "lineage_registry"]


def test_recording_activities_decide_nothing():
    reaching = []
    for name in RECORDING_ACTIVITIES:
        path = ROOT / "activities" / f"{name}.py"
        for target, line, _ in imports(path):
            if target in ("trainer", "runner"):
                reaching.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert reaching == [], "\n".join(reaching)


def test_the_trainer_activity_records_nothing():
    """``take_cycle_step`` decides; ``record_cycle_step`` records what it decided in the
    training-signal log. (A long trajectory's credit, fanned out RLM-style, keeps its working
    findings in the findings store its workers merge into.)"""
    path = ROOT / "activities" / "trainer.py"
    writes = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr == "recorder"
    ]
    assert writes == [], "\n".join(writes)


def _imported_modules(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.module, node.lineno)]
            found += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
    return found


def test_the_write_path_stands_alone():
    """The event store and the typed writers read nothing of the read side, the exports or the
    layers above: the store's write path works (and is tested) without them. The projections
    the writer folds events into are the write side's (``store/records/projections.py``)."""
    forbidden = ("store.views", "store.exports", "trainer", "runner", "rlm", "activities")
    crossing = []
    for package in ("eventstore", "records"):
        for path in sorted((ROOT / "store" / package).rglob("*.py")):
            for module, line in _imported_modules(path):
                if module.startswith(forbidden) and module.split(".")[0] in LAYER:
                    crossing.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert crossing == [], "\n".join(crossing)


def test_the_store_reads_no_trainer():
    """What the store's views need of the trainer's vocabulary (the reasons' prefixes, how a
    prompt splits into segments) lives in ``domain``."""
    reaching = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "store").rglob("*.py"))
        for module, line in _imported_modules(path)
        if module.split(".")[0] == "trainer"
    ]
    assert reaching == [], "\n".join(reaching)


_DIALECTS = {"sqlite", "postgresql"}


def _names_a_dialect(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value in _DIALECTS:
        return True
    # conn.dialect.name, engine.dialect.name
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "name"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "dialect"
    )


def test_dialect_differences_live_in_the_backends():
    """Only ``store/backends`` (and the migrations, which speak Alembic's per-dialect language)
    tell SQLite from PostgreSQL; everyone else asks ``store.backends.dialect.Backend`` for the
    SQL or the behaviour they need. A comparison with a dialect name, or a table keyed by one,
    anywhere else fails here."""
    allowed = ("store/backends/", "store/migrations/")
    branching = []
    for files in modules().values():
        for path in files:
            where = path.relative_to(ROOT).as_posix()
            if where.startswith(allowed):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Compare):
                    parts = [node.left, *node.comparators]
                elif isinstance(node, ast.Dict):
                    parts = [k for k in node.keys if k is not None]
                else:
                    continue
                if any(_names_a_dialect(part) for part in parts):
                    branching.append(f"{where}:{node.lineno}")
    assert branching == [], "\n".join(branching)


# Waiting for its owner to switch to the backend's capabilities (``reads_with_rules``,
# ``hands_over`` in trainer/backends.py); remove from this list when it has.
NAME_BRANCHES_PENDING: set[str] = set()


def test_the_trainer_knows_backends_by_what_they_do():
    """Trainer backends are told apart by the protocol's capabilities, never by comparing
    their ``name`` (which is for people); only ``trainer/backends.py`` maps the configured
    names to backends."""
    names = {"rules", "claude", "rules+claude"}
    branching = []
    for name in ("trainer", "activities", "store", "workflows"):
        for path in modules()[name]:
            where = path.relative_to(ROOT).as_posix()
            if where == "trainer/backends.py" or where in NAME_BRANCHES_PENDING:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Compare):
                    continue
                parts = [node.left, *node.comparators]
                by_name = any(isinstance(p, ast.Attribute) and p.attr == "name" for p in parts)
                if by_name and any(isinstance(p, ast.Constant) and p.value in names for p in parts):
                    branching.append(f"{where}:{node.lineno}")
    assert branching == [], "\n".join(branching)


# Not activities: how every activity's failures are classified (the worker's interceptor),
# and how a long one beats
ACTIVITY_INFRASTRUCTURE = {"activities.error_classification", "activities.heartbeat"}


def test_activities_import_no_other_activity():
    """Each activity module is an adapter over the layers below: what two of them share (a
    decision one makes and another records) lives in ``domain``, never in an activity module
    the other imports."""
    crossing = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "activities").rglob("*.py"))
        for module, line in _imported_modules(path)
        if module.split(".")[0] == "activities"
        and not any(module.startswith(shared) for shared in ACTIVITY_INFRASTRUCTURE)
    ]
    assert crossing == [], "\n".join(crossing)
