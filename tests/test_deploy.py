"""The deployment files, checked as far as a machine without Docker or a cluster allows
(issue 16, part 1): they parse; every command, flag, port, variable and probe path they name
exists in the code; the Kubernetes manifests validate against the schemas, offline."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
import yaml

from a2a_agent.cli import _parser
from a2a_agent.settings import Settings
from tests.support.processes import REPO

DEPLOY = REPO / "deploy"
KUBERNETES = "1.30.0"
# Variables the service reads besides its own A2A_AGENT_* settings.
OTHERS = {"DATABASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "PYTHONUNBUFFERED", "PATH"}
SOURCE = "\n".join(p.read_text() for p in (REPO / "a2a_agent").rglob("*.py"))


def known_variable(name: str) -> bool:
    return name in OTHERS or name.startswith("OTEL_") or f'"{name}"' in SOURCE


def command_parses(argv: list[str]) -> None:
    """`a2a-agent ARGV` is a command the CLI takes (argparse exits on anything else)."""
    _parser().parse_args(argv)


def routes() -> set[str]:
    return set(re.findall(r'Route\("(/[a-z./]+)"', (REPO / "a2a_agent" / "app.py").read_text()))


def test_the_dockerfile_names_what_exists() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line for line in text.replace("\\\n", " ").splitlines() if line and line[0] != "#"]
    found = {line.split()[0]: line.split(None, 1)[1] for line in lines if " " in line}
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert json.loads(found["ENTRYPOINT"]) == ["a2a-agent"] and "a2a-agent" in scripts
    command_parses(json.loads(found["CMD"]))
    env = dict(re.findall(r"(\w+)=(\S+)", next(v for k, v in found.items() if k == "ENV")))
    assert all(known_variable(name) for name in env), env
    assert found["EXPOSE"] == env["A2A_AGENT_PORT"] == str(Settings().server.port)
    health = json.loads(found["HEALTHCHECK"].split("CMD", 1)[1])
    assert "/healthz" in health[-1] and "/healthz" in routes()
    assert "USER 10001" in text and "bubblewrap" in text and "a2a-build install" in text


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_compose_file_names_what_exists() -> None:
    services = compose()["services"]
    assert {"postgres", "migrate", "api-1", "api-2", "worker-1", "worker-2"} <= set(services)
    for name, service in services.items():
        if service.get("image") != "a2a-agent:latest":
            continue
        command_parses(service["command"])
        assert all(known_variable(v) for v in service["environment"]), name
        for port in service.get("ports", []):
            assert port.split(":")[1] == "8000"
        test = (service.get("healthcheck") or {}).get("test")
        if test and test[0] == "CMD":
            assert test[1] == "a2a-agent"
            command_parses(test[2:])
    workers = [s for n, s in services.items() if n.startswith("worker")]
    ids = [s["command"][s["command"].index("--executor-id") + 1] for s in workers]
    assert len(set(ids)) == len(ids) == 2  # a stable, unique executor id each


def manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        for document in yaml.safe_load_all((DEPLOY / "k8s" / resource).read_text()):
            if document:
                yield resource, document


@pytest.mark.parametrize("resource", sorted({r for r, _ in manifests()}))
def test_each_manifest_validates_against_the_kubernetes_schemas(resource: str) -> None:
    for name, document in manifests():
        if name == resource:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


def containers() -> Iterator[tuple[str, dict[str, Any]]]:
    for _, document in manifests():
        spec = document.get("spec") or {}
        template = (spec.get("template") or (spec.get("jobTemplate") or {}).get("template")) or {}
        for container in (template.get("spec") or {}).get("containers", []):
            yield document["metadata"]["name"], container


def test_the_manifests_name_what_exists() -> None:
    config = next(d for _, d in manifests() if d["kind"] == "ConfigMap")
    secret = next(d for _, d in manifests() if d["kind"] == "Secret")
    for name in [*config["data"], *secret["stringData"]]:
        assert known_variable(name), name
    seen = set()
    for owner, container in containers():
        seen.add(owner)
        command_parses(container["args"])
        for env in container.get("env", []):
            assert known_variable(env["name"]), env
        for probe in ("readinessProbe", "livenessProbe"):
            found = container.get(probe)
            if found is None:
                continue
            if "httpGet" in found:
                assert found["httpGet"]["path"] in routes()
            else:
                command = found["exec"]["command"]
                assert command[0] == "a2a-agent"
                command_parses(command[1:])
        for port in container.get("ports", []):
            args = container["args"]
            assert str(port["containerPort"]) == args[args.index("--port") + 1]
        assert container["resources"]["requests"]
    assert seen == {"a2a-agent-migrate", "a2a-agent-api", "a2a-agent-worker"}
    workers = next(d for _, d in manifests() if d["kind"] == "StatefulSet")
    (worker,) = workers["spec"]["template"]["spec"]["containers"]
    executor = next(e for e in worker["env"] if e["name"] == "A2A_AGENT_EXECUTOR_ID")
    assert executor["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"  # pod name = id
    kinds = {d["kind"] for _, d in manifests()}
    assert {"PodDisruptionBudget", "Job", "Deployment", "StatefulSet", "Service"} <= kinds


# What the agent card says of a deployment: where it answers and who runs it, the settings
# docs/operations.md ("Deploying") tells an operator to set.
CARD_SETTINGS = {
    "A2A_AGENT_PUBLIC_URL",
    "A2A_AGENT_PROVIDER_ORGANIZATION",
    "A2A_AGENT_PROVIDER_URL",
}


def test_the_deployment_files_carry_what_the_card_says_of_the_deployment() -> None:
    config = next(d for _, d in manifests() if d["kind"] == "ConfigMap")["data"]
    for variables in (config, compose()["x-agent"]["environment"]):
        missing = CARD_SETTINGS - set(variables)
        assert not missing, missing
    # Shipped empty, they read as unset: the card names no provider (half of one is refused).
    server = Settings.from_env(config, role="serve").server
    assert server.provider_organization is None and server.provider_url is None


def test_the_runbook_covers_what_an_operator_meets() -> None:
    runbook = (DEPLOY / "RUNBOOK.md").read_text()
    for section in (
        "Upgrades with tasks in flight",
        "A lost worker",
        "A database failover",
        "Retention",
        "Key rotation",
        "Dead-lettered pushes",
        "Restoring a workspace",
    ):
        assert f"## {section}" in runbook
    assert "shared volume" in runbook
    for command in re.findall(r"`a2a-agent ([a-z][^`]*)`", runbook):
        words = [w for w in shlex.split(command) if not w.isupper()]
        with pytest.raises(SystemExit) as shown:  # `--help` of a command that exists: exit 0
            command_parses([words[0], "--help"])
        assert shown.value.code == 0, command
