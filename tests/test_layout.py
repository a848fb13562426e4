"""Dependencies point one way, in the order the README's layout section draws: each package
imports only from its own layer and the ones below, never at function level (where an import
hides a cycle), and no two packages import each other."""

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
    ["dataset_optimization", "codec", "services", "review", "client", "worker", "starter"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules() -> dict[str, list[Path]]:
    """Each top-level package or module of the project, with its source files."""
    found: dict[str, list[Path]] = {}
    for name in LAYER:
        package, module = ROOT / name, ROOT / f"{name}.py"
        found[name] = sorted(package.rglob("*.py")) if package.is_dir() else [module]
    return found


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level name, line, inside a function) for each import of a project module."""
    tree = ast.parse(path.read_text(), str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    in_function.add(id(inner))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
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
