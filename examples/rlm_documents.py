"""A recursive language model analyses a folder of reports, offline.

    .venv/bin/python -m examples.rlm_documents [--shared] [--max-parallel 2] [--max-depth 2]

The root model (the offline scripted RLM model unless ``--model`` names a Claude model and
ANTHROPIC_API_KEY is set) reads the question and the hypotheses in ``question.yaml``, creates a
hypothesis object for each, starts one worker per report (child workflows, ``--max-parallel``
at once), and each worker links evidence to the hypotheses with ``supports`` / ``contradicts``
(with ``--max-depth 2`` a worker hands the second half of its report to a worker of its own).
The root merges the workers' commits, counts links and returns the winner with FINAL_VAR. With
``--shared`` the workers write to one shared store and see each other's findings as they run.

It starts what it needs (a Temporal dev server with its Web UI under .training-camp/rlm/ and a
worker) and prints the answer and where to see the run in the Web UI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from rlm.repl import OFFLINE_RLM_MODEL, ReplConfig, ReplRunInput, ReplRunResult

REPORTS = Path(__file__).with_name("pilot-reports")


def document_task(folder: Path, max_parallel: int) -> tuple[str, dict[str, Any]]:
    """The prompt and the ``context`` for a folder of Markdown reports and its question.yaml."""
    question = yaml.safe_load((folder / "question.yaml").read_text())
    documents = [
        {"name": path.stem, "text": path.read_text()} for path in sorted(folder.glob("*.md"))
    ]
    context = {
        "question": question["question"],
        "hypotheses": question["hypotheses"],
        "documents": documents,
        "max_parallel": max_parallel,
    }
    prompt = (
        f"{question['question']} Weigh the hypotheses in `context['hypotheses']` against the "
        f"{len(documents)} documents in `context['documents']`: one worker per document, "
        "evidence linked to the hypotheses, and the hypothesis with the most net support as "
        "your FINAL_VAR."
    )
    return prompt, context


async def main(args: argparse.Namespace) -> None:
    from client import connect
    from domain.settings import Settings
    from services.dev_server import DevServer
    from store import Store
    from worker import build_worker
    from workflows.rlm import RlmReplWorkflow

    data = Path(".training-camp/rlm")
    server = DevServer(data, port=7253, ui_port=8253)
    server.start()
    try:
        settings = Settings.from_env().model_copy(
            update={
                "temporal_address": server.address,
                "database_url": f"sqlite:///{data / 'rlm.db'}",
                "task_queue": "rlm-example",
            }
        )
        store = Store.open(settings.database_url)
        client = await connect(settings)
        prompt, context = document_task(Path(args.docs), args.max_parallel)
        run_id = f"pilot-{uuid.uuid4().hex[:8]}"
        workflow_id = f"rlm-{run_id}"
        config = ReplConfig(
            root_model=args.model,
            max_depth=args.max_depth,
            max_parallel=args.max_parallel,
            shared_store=args.shared,
        )
        async with build_worker(client, store, settings):
            print(f"Run {workflow_id}: {len(context['documents'])} documents, ", end="")
            print("shared store" if args.shared else "isolated stores and commits")
            result: ReplRunResult = await client.execute_workflow(
                RlmReplWorkflow.run,
                ReplRunInput(run_id=run_id, prompt=prompt, context=context, config=config),
                id=workflow_id,
                task_queue=settings.task_queue,
            )
        print(f"Answer after {result.turns} turns:")
        print(json.dumps(result.final, indent=2))
        if isinstance(result.final, dict) and "pending_proposals" in result.final:
            print(
                "(pending_proposals: findings workers proposed that no commit has accepted or "
                "rejected yet — the commit protocol's open items)"
            )
        print(f"Findings and spans: {settings.database_url} (store {run_id})")
        store.close()
        link = f"{server.ui_url}/namespaces/default/workflows/{workflow_id}"
        if args.keep:
            print(f"The run and its workers in the Web UI (Ctrl-C to stop):\n{link}")
            with contextlib.suppress(KeyboardInterrupt):
                await asyncio.Event().wait()
        else:
            print(
                "The dev server stops now; run again with --keep to browse the run in the Web UI."
            )
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default=str(REPORTS), help="folder of .md reports")
    parser.add_argument("--shared", action="store_true", help="one shared store for workers")
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument("--max-depth", type=int, default=2)
    parser.add_argument(
        "--keep", action="store_true", help="keep the dev server and its Web UI up afterwards"
    )
    parser.add_argument("--model", default=OFFLINE_RLM_MODEL)
    asyncio.run(main(parser.parse_args()))
