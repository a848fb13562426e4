"""Dataset optimization, offline: a prompt template tuned on 50 topics with an automatic reward.

    .venv/bin/python -m examples.lightning_topics [--iterations 4] [--clients 2]

Starts what it needs (a Temporal dev server under .training-camp/lightning/, a server worker,
N client workers), runs the OptimizationWorkflow and prints the reward curve and the best
template. The reward prefers short, bulleted answers that name the topic; its explanations
("way too long", "use bullet points") are the feedback the trainer reads.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

from dataset_optimization.client import AgentLightningClient, Resources
from domain.lightning import LLM, OptimizationInput, OptimizationResult, PromptTemplate
from domain.rollout_report import RolloutReport
from domain.templates import render

TOPICS = [
    "remote onboarding",
    "code review",
    "on-call rotations",
    "feature flags",
    "pair programming",
    "incident reviews",
    "technical debt",
    "release trains",
    "design documents",
    "mentoring",
    "estimation",
    "hiring loops",
    "test coverage",
    "monorepos",
    "service ownership",
    "runbooks",
    "sprint planning",
    "retrospectives",
    "API versioning",
    "data migrations",
    "load testing",
    "error budgets",
    "canary releases",
    "documentation",
    "knowledge sharing",
    "interview feedback",
    "career ladders",
    "budget planning",
    "vendor selection",
    "security reviews",
    "access control",
    "backup drills",
    "cost tracking",
    "accessibility",
    "localization",
    "dependency updates",
    "observability",
    "chaos testing",
    "style guides",
    "architecture reviews",
    "team rituals",
    "async standups",
    "meeting hygiene",
    "goal setting",
    "performance reviews",
    "offboarding",
    "open source policy",
    "tooling budgets",
    "platform teams",
    "developer surveys",
]
DATASET = [{"topic": t} for t in TOPICS]
START = PromptTemplate(
    template="Explain {topic} for a team. Provide comprehensive, detailed analysis."
)


def reward(topic: str, text: str) -> tuple[float, list[str]]:
    """1.0 for a short bulleted answer that names the topic; the logs say what is missing."""
    score, logs = 0.0, []
    words = len(text.split())
    if words <= 90:
        score += 0.4
    else:
        logs.append("way too long")
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and all(re.match(r"^\s*[-*•]\s", line) for line in lines):
        score += 0.3
    else:
        logs.append("use bullet points")
    if topic.lower() in text.lower():
        score += 0.3
    else:
        logs.append(f"does not mention {topic}")
    return round(score, 2), logs


async def agent(task: dict[str, Any], resources: Resources) -> RolloutReport:
    assert resources.llm is not None
    prompt = render(resources.template(), task)
    answer = await resources.llm.complete(prompt)
    value, logs = reward(task["topic"], answer)
    return RolloutReport(rollout_id="", final_reward=value, logs=logs)


def optimization_input(run_id: str, iterations: int, client_task_queue: str) -> OptimizationInput:
    return OptimizationInput(
        run_id=run_id,
        dataset=DATASET,
        template=START,
        llm=LLM(
            model="offline-lightning-1", sampling_params={"temperature": 0.5, "max_tokens": 1024}
        ),
        max_iterations=iterations,
        target_reward=0.95,
        max_parallel=10,
        client_task_queue=client_task_queue,
    )


def print_result(result: OptimizationResult) -> None:
    print("iteration  version  mean reward  change")
    for r in result.curve:
        print(f"{r.iteration:>9}  {r.resources_version:>7}  {r.mean_reward:>11.3f}  {r.change}")
    print(f"best: v{result.best_version} ({result.best_mean_reward:.3f}): {result.best_template!r}")


async def main(iterations: int, clients: int) -> None:
    from client import connect
    from domain.settings import Settings
    from services.dev_server import DevServer
    from store import Store
    from worker import build_worker
    from workflows.lightning import OptimizationWorkflow

    data = Path(".training-camp/lightning")
    server = DevServer(data, port=7243, ui_port=8243)
    server.start()
    settings = Settings.from_env().model_copy(
        update={
            "temporal_address": server.address,
            "task_queue": "lightning-server",
            "database_url": f"sqlite:///{data / 'store.db'}",
        }
    )
    try:
        store = Store.open(settings.database_url)
        client = await connect(settings)
        workers = [build_worker(client, store, settings)]
        for i in range(clients):  # each client its own connection, as on its own machine
            own = await connect(settings)
            lightning = AgentLightningClient(
                own, f"client-{i}", task_queue="lightning-topics", settings=settings
            )
            workers.append(lightning.worker(agent))
        for w in workers:
            await w.__aenter__()
        run_id = f"topics-{uuid.uuid4().hex[:6]}"
        print(
            f"optimization {run_id}: {len(DATASET)} tasks per iteration, {clients} clients "
            f"(Web UI http://localhost:8243)"
        )
        result = await client.execute_workflow(
            OptimizationWorkflow.run,
            optimization_input(run_id, iterations, "lightning-topics"),
            id=f"optimization-{run_id}",
            task_queue=settings.task_queue,
        )
        print_result(result)
        for w in workers:
            await w.__aexit__(None, None, None)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.iterations, args.clients))
