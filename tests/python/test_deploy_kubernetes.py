"""``deploy/kubernetes/``: gpuprobe's node health check as node-problem-detector's custom
plugin in a DaemonSet, checked offline (no cluster, no image build).

- Every manifest parses and validates, strictly (unknown fields rejected), against the
  Kubernetes API's JSON schemas of each version the manifests claim (1.29 to 1.37), bundled
  by PyPI's ``kubernetes-validate`` (installed by ``scripts/python-test-env.sh`` from
  ``tests/python/requirements.txt``; under ``CI=true`` its absence fails, elsewhere the
  schema test skips and says why).
- The custom plugin monitor configuration in the ConfigMap keeps node-problem-detector's
  contract, as a checker written here from its documentation and configuration types:
  https://github.com/kubernetes/node-problem-detector/blob/master/docs/custom_plugin_monitor.md
  (the ``pluginConfig`` fields and the rules' ``type``/``condition``/``reason``/``path``/
  ``args``/``timeout``),
  https://github.com/kubernetes/node-problem-detector/blob/master/pkg/custompluginmonitor/types/config.go
  (the defaults: timeout 5s, invoke_interval 30s, max_output_length 80, concurrency 3; what
  ``Validate`` refuses: a plugin other than ``custom``, a rule timeout above the global one,
  a permanent rule whose condition has no default),
  https://github.com/kubernetes/node-problem-detector/blob/master/pkg/custompluginmonitor/types/types.go
  (the rule's fields and the plugin statuses 0 OK, 1 NonOK, 2 Unknown), and
  https://github.com/kubernetes/node-problem-detector/blob/master/pkg/custompluginmonitor/plugin/plugin.go
  (how a rule runs: its path executed with its args and no shell, at most 4096 bytes of
  stdout read, trimmed of white space and cut at max_output_length; exit 0 OK, 1 NonOK, any
  other Unknown). On top of the contract, gpuprobe's own bounds: the rules ask for
  ``--health --health-format npd`` (the line fits the default 80 bytes), and each
  ``--budget`` ends well before the rule's timeout.
- Each rule runs as node-problem-detector runs it, in a model of the pod: the ConfigMap's
  items written where the DaemonSet mounts them (with its file mode), host paths and empty
  directories as temporary directories, the container's environment, and the options an
  operator adds through ``GPUPROBE_EXTRA_ARGS`` (here ``--device cpu``, two copy probes and
  this interpreter): healthy is exit 0 and ``OK:``, a simulated fault exit 1 within
  max_output_length, a broken Python and a missing binary exit 2.
- The wiring: the DaemonSets mount what the configuration names, use the ServiceAccount the
  binding grants, select their own pods, and run the paths the Dockerfile installs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, gpuprobe_binary

DEPLOY = REPO / "deploy" / "kubernetes"
MANIFESTS = ("namespace.yaml", "rbac.yaml", "configmap.yaml", "daemonset-nvidia.yaml", "daemonset-amd.yaml")
DAEMONSETS = ("daemonset-nvidia.yaml", "daemonset-amd.yaml")
#: The Kubernetes versions the manifests are written for (docs/fleet.md says the same).
KUBERNETES_VERSIONS = ("1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
CONFIG_KEY = "gpuprobe-monitor.json"

#: gpuprobe's bound on its line under --health-format npd (docs/exit-codes.md).
GPUPROBE_NPD_LINE_MAX = 80
#: What node-problem-detector reads of a plugin's stdout (plugin.go).
NPD_STDOUT_READ = 4096
#: Time a check needs after its budget to stop its workers and write its report.
REPORT_MARGIN_S = 30.0

ON_CI = os.environ.get("CI", "") not in ("", "false", "0")


def load(name: str) -> list[dict[str, Any]]:
    with open(DEPLOY / name, encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def all_objects() -> list[dict[str, Any]]:
    return [obj for name in MANIFESTS for obj in load(name)]


def find(kind: str, name: str) -> dict[str, Any]:
    found = [o for o in all_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"one {kind} {name}: {len(found)}"
    return found[0]


def npd_config() -> dict[str, Any]:
    (configmap,) = load("configmap.yaml")
    return json.loads(configmap["data"][CONFIG_KEY])


# --- the Kubernetes schemas ---------------------------------------------------------------


def kubernetes_validate() -> Any:
    try:
        import kubernetes_validate as validator
    except ImportError:
        message = (
            "kubernetes-validate (PyPI) is not installed: scripts/python-test-env.sh installs it "
            "from tests/python/requirements.txt"
        )
        if ON_CI:
            pytest.fail(message)
        pytest.skip(message)
    return validator


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_manifests_validate_against_the_kubernetes_schemas(manifest: str) -> None:
    validator = kubernetes_validate()
    objects = load(manifest)
    assert objects, manifest
    for obj in objects:
        for version in KUBERNETES_VERSIONS:
            try:
                # It answers with the schemas' version it used: each one is there.
                assert validator.validate(obj, version, strict=True) == version
            except validator.ValidationError as e:
                path = "/".join(str(p) for p in e.absolute_path)
                pytest.fail(
                    f"{manifest}: {obj['kind']} {obj['metadata']['name']} at {path} (Kubernetes {version}): {e.message}"
                )


def test_the_validator_rejects_a_misspelt_field_and_a_wrong_type() -> None:
    """The schemas really are checked field by field, offline."""
    validator = kubernetes_validate()
    (daemonset,) = load("daemonset-nvidia.yaml")
    for key, value in (("volumeMount", []), ("name", 3)):
        broken = json.loads(json.dumps(daemonset))
        broken["spec"]["template"]["spec"]["containers"][0][key] = value
        with pytest.raises(validator.ValidationError):
            validator.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_kustomization_applies_every_manifest_and_names_the_image() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(MANIFESTS)
    on_disk = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(MANIFESTS), "every manifest is applied by kubectl apply -k"
    (image,) = kustomization["images"]
    for name in DAEMONSETS:
        (daemonset,) = load(name)
        for container in daemonset["spec"]["template"]["spec"]["containers"]:
            assert container["image"].rsplit(":", 1)[0] == image["name"], container["image"]


def tool(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        message = f"{name} is not installed: scripts/python-test-env.sh installs Debian's {package}"
        if ON_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_kustomize_builds_it_and_renames_both_images(tmp_path: Path) -> None:
    """``kubectl apply -k`` renders the manifests, and the image name set in an overlay (as
    ``kustomize edit set image`` writes it) reaches both DaemonSets."""
    kubectl = tool("kubectl", "kubernetes-client")
    overlay = tmp_path / "site"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # `bases`, deprecated for `resources` since kustomize 2.1 but still read, is
                # what the kustomize 2.0 inside Debian's kubectl 1.20 reads.
                "bases": [os.path.relpath(DEPLOY, overlay)],
                "images": [{"name": "registry.example.com/gpuprobe/gpuprobe-npd", "newName": "registry.test/ml/npd"}],
            }
        )
    )
    built: dict[str, list[dict[str, Any]]] = {}
    for name, directory in (("base", DEPLOY), ("overlay", overlay)):
        done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        built[name] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    expected = sorted((o["kind"], o["metadata"]["name"]) for o in all_objects())
    for objects in built.values():
        assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == expected
    images = sorted(
        c["image"]
        for o in built["overlay"]
        if o["kind"] == "DaemonSet"
        for c in o["spec"]["template"]["spec"]["containers"]
    )
    assert images == ["registry.test/ml/npd:cuda", "registry.test/ml/npd:rocm"]


def test_the_plugin_script_passes_shellcheck(tmp_path: Path) -> None:
    shellcheck = tool("shellcheck", "shellcheck")
    (configmap,) = load("configmap.yaml")
    script = tmp_path / "gpuprobe-npd-plugin.sh"
    script.write_text(configmap["data"]["gpuprobe-npd-plugin.sh"])
    done = subprocess.run([shellcheck, "--shell=sh", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --- node-problem-detector's custom plugin contract ----------------------------------------

_GO_DURATION = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_seconds(text: Any) -> float | None:
    """Seconds of a Go ``time.ParseDuration`` string ("6h", "1m30s"), None when it is none."""
    if not isinstance(text, str):
        return None
    if text == "0":
        return 0.0
    if not _GO_DURATION.fullmatch(text):
        return None
    return sum(float(n) * _GO_UNITS[unit] for n, unit in _GO_DURATION_PART.findall(text))


NPD_TOP_KEYS = {"plugin", "pluginConfig", "source", "conditions", "rules", "metricsReporting"}
NPD_PLUGIN_CONFIG_TYPES: dict[str, type] = {
    "invoke_interval": str,
    "timeout": str,
    "max_output_length": int,
    "concurrency": int,
    "enable_message_change_based_condition_update": bool,
    "skip_initial_status": bool,
}
NPD_DEFAULTS = {"invoke_interval": "30s", "timeout": "5s", "max_output_length": 80, "concurrency": 3}
NPD_RULE_KEYS = {"type", "condition", "reason", "path", "args", "timeout", "invoke_interval"}
NPD_CONDITION_KEYS = {"type", "reason", "message"}
CAMEL_CASE = re.compile(r"[A-Z][A-Za-z0-9]*")


def option(args: list[str], name: str) -> str | None:
    """The value after the last ``name`` in ``args``."""
    values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return values[-1] if values else None


def npd_contract_problems(config: Any) -> list[str]:
    """What in a custom plugin monitor configuration breaks node-problem-detector's contract
    (or makes it cut or kill gpuprobe's answer); empty when nothing does."""
    problems: list[str] = []
    if not isinstance(config, dict):
        return ["the configuration is not a JSON object"]
    # Go's JSON decoding drops unknown fields silently: a misspelt one would be a default.
    problems += [f"unknown field {k!r}" for k in sorted(set(config) - NPD_TOP_KEYS)]
    if config.get("plugin") != "custom":
        problems.append(f"plugin is {config.get('plugin')!r}, not 'custom'")
    if not isinstance(config.get("source"), str) or not config["source"]:
        problems.append("source is not a non-empty string")
    if "metricsReporting" in config and not isinstance(config["metricsReporting"], bool):
        problems.append("metricsReporting is not a boolean")

    plugin_config = config.get("pluginConfig", {})
    if not isinstance(plugin_config, dict):
        problems.append("pluginConfig is not an object")
        plugin_config = {}
    problems += [f"unknown pluginConfig field {k!r}" for k in sorted(set(plugin_config) - set(NPD_PLUGIN_CONFIG_TYPES))]
    for key, kind in NPD_PLUGIN_CONFIG_TYPES.items():
        if key in plugin_config:
            value = plugin_config[key]
            # bool is an int in Python, not in Go's JSON.
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                problems.append(f"pluginConfig.{key} is {value!r}, not of type {kind.__name__}")
    effective = {**NPD_DEFAULTS, **plugin_config}
    interval = go_duration_seconds(effective["invoke_interval"])
    global_timeout = go_duration_seconds(effective["timeout"])
    if interval is None or interval <= 0:
        problems.append(f"invoke_interval {effective['invoke_interval']!r} is not a positive Go duration")
    if global_timeout is None or global_timeout <= 0:
        problems.append(f"timeout {effective['timeout']!r} is not a positive Go duration")
    if isinstance(effective["concurrency"], int) and effective["concurrency"] < 1:
        problems.append("concurrency is below 1")
    max_output = effective["max_output_length"]
    if isinstance(max_output, int) and max_output < GPUPROBE_NPD_LINE_MAX:
        problems.append(
            f"max_output_length {max_output} would cut gpuprobe's line (up to {GPUPROBE_NPD_LINE_MAX} bytes)"
        )

    conditions = config.get("conditions", [])
    declared: set[str] = set()
    if not isinstance(conditions, list):
        problems.append("conditions is not a list")
        conditions = []
    for condition in conditions:
        if not isinstance(condition, dict) or set(condition) != NPD_CONDITION_KEYS:
            problems.append(f"condition {condition!r} does not have exactly {sorted(NPD_CONDITION_KEYS)}")
            continue
        if not all(isinstance(condition[k], str) and condition[k] for k in NPD_CONDITION_KEYS):
            problems.append(f"condition {condition!r} has a field that is not a non-empty string")
            continue
        for key in ("type", "reason"):
            if not CAMEL_CASE.fullmatch(condition[key]):
                problems.append(f"condition {key} {condition[key]!r} is not UpperCamelCase")
        if condition["type"] in declared:
            problems.append(f"condition {condition['type']!r} is declared twice")
        declared.add(condition["type"])

    rules = config.get("rules")
    if not isinstance(rules, list) or not rules:
        return problems + ["rules is not a non-empty list"]
    rule_timeouts: list[float] = []
    for index, rule in enumerate(rules):
        where = f"rule {index}"
        if not isinstance(rule, dict):
            problems.append(f"{where} is not an object")
            continue
        problems += [f"{where}: unknown field {k!r}" for k in sorted(set(rule) - NPD_RULE_KEYS)]
        kind = rule.get("type")
        if kind not in ("temporary", "permanent"):
            problems.append(f"{where}: type {kind!r} is neither 'temporary' nor 'permanent'")
        reason = rule.get("reason")
        if not isinstance(reason, str) or not CAMEL_CASE.fullmatch(reason):
            problems.append(f"{where}: reason {reason!r} is not an UpperCamelCase string")
        if kind == "permanent" and rule.get("condition") not in declared:
            problems.append(
                f"{where}: permanent rule's condition {rule.get('condition')!r} has no default in conditions"
            )
        if kind == "temporary" and "condition" in rule:
            problems.append(f"{where}: a temporary rule's condition is ignored")
        path = rule.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            problems.append(f"{where}: path {path!r} is not an absolute path")
        args = rule.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append(f"{where}: args is not a list of strings")
            args = []
        timeout = global_timeout
        if "timeout" in rule:
            timeout = go_duration_seconds(rule["timeout"])
            if timeout is None or timeout <= 0:
                problems.append(f"{where}: timeout {rule['timeout']!r} is not a positive Go duration")
            elif global_timeout is not None and timeout > global_timeout:
                problems.append(f"{where}: timeout {rule['timeout']} exceeds the global timeout {effective['timeout']}")
        if timeout is not None and global_timeout is not None:
            rule_timeouts.append(min(timeout, global_timeout))
        # gpuprobe's side: one short line in node-problem-detector's format, and a budget
        # that leaves the report time to be written before the rule's timeout kills it.
        if args[:2] != ["check", "--health"] or option(args, "--health-format") != "npd":
            problems.append(f"{where}: args do not start with check --health and ask for --health-format npd")
        budget = option(args, "--budget")
        if budget is None or not budget.isdigit():
            problems.append(f"{where}: no --budget SECONDS")
        elif timeout is not None and int(budget) + REPORT_MARGIN_S > min(timeout, global_timeout or timeout):
            problems.append(f"{where}: --budget {budget} leaves less than {REPORT_MARGIN_S:.0f} s before the timeout")
    if global_timeout is not None and interval is not None and global_timeout > interval:
        problems.append("the global timeout exceeds invoke_interval")
    if effective["concurrency"] == 1 and interval is not None and sum(rule_timeouts) > interval:
        problems.append("the rules, run one after another, may take longer than invoke_interval")
    return problems


def test_the_plugin_configuration_keeps_the_contract() -> None:
    config = npd_config()
    assert npd_contract_problems(config) == []
    assert config["pluginConfig"]["concurrency"] == 1, "two checks never share the GPUs"
    permanent = [r for r in config["rules"] if r["type"] == "permanent"]
    assert [r["condition"] for r in permanent] == ["GpuprobeProblem"]
    assert option(permanent[0]["args"], "--tier") == "quick"
    assert any(r["type"] == "temporary" for r in config["rules"])
    # The probes a rule names are probes of the catalog (a misspelt id would select nothing
    # on a GPU node, and the rule would answer UNKNOWN forever).
    catalog = (REPO / "docs" / "native.md").read_text() + (REPO / "docs" / "probes.md").read_text()
    for rule in config["rules"]:
        only = [rule["args"][i + 1] for i, a in enumerate(rule["args"][:-1]) if a == "--only"]
        for probe in only:
            assert f"`{probe}`" in catalog, probe


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        (lambda c: c.update(plugin="journald"), "not 'custom'"),
        (lambda c: c["pluginConfig"].update(invoke_intreval="1h"), "unknown pluginConfig field"),
        (lambda c: c["pluginConfig"].update(max_output_length="80"), "not of type int"),
        (lambda c: c["pluginConfig"].update(max_output_length=60), "would cut gpuprobe's line"),
        (lambda c: c["pluginConfig"].update(timeout="1m"), "exceeds the global timeout"),
        (lambda c: c["pluginConfig"].update(invoke_interval="4m", timeout="5m"), "exceeds invoke_interval"),
        (lambda c: c["pluginConfig"].update(timeout="5 minutes"), "not a positive Go duration"),
        (lambda c: c["conditions"].clear(), "has no default in conditions"),
        (lambda c: c["rules"][0].update(type="permanant"), "neither 'temporary' nor 'permanent'"),
        (lambda c: c["rules"][0].update(path="gpuprobe"), "not an absolute path"),
        (lambda c: c["rules"][0]["args"].remove("npd"), "--health-format npd"),
        (
            lambda c: c["rules"][0]["args"].__setitem__(c["rules"][0]["args"].index("--budget") + 1, "290"),
            "leaves less than",
        ),
    ],
)
def test_the_contract_checker_finds_each_breakage(breakage: Any, problem: str) -> None:
    config = npd_config()
    breakage(config)
    problems = npd_contract_problems(config)
    assert any(problem in p for p in problems), problems


# --- the wiring between the manifests, the configuration and the image ---------------------


def container_of(daemonset: dict[str, Any]) -> dict[str, Any]:
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container


def mounts_of(daemonset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Mount path -> the volume mounted there."""
    volumes = {v["name"]: v for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container_of(daemonset)["volumeMounts"]}


def volume_at(daemonset: dict[str, Any], path: str) -> tuple[str, dict[str, Any]] | None:
    """The mount path holding ``path`` and its volume."""
    for mount_path, volume in mounts_of(daemonset).items():
        if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
            return mount_path, volume
    return None


def env_of(daemonset: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container_of(daemonset).get("env", []) if "value" in e}


def dockerfile_destination(source: str) -> str:
    text = (DEPLOY / "Dockerfile").read_text()
    match = re.search(rf"^COPY --from=npd {re.escape(source)} (\S+)$", text, re.MULTILINE)
    assert match, f"the Dockerfile copies {source} from node-problem-detector's image"
    return match.group(1)


@pytest.mark.parametrize("manifest", DAEMONSETS)
def test_the_daemonset_mounts_and_runs_what_the_configuration_names(manifest: str) -> None:
    (daemonset,) = load(manifest)
    spec = daemonset["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items(), "the selector selects the pod"
    assert daemonset["metadata"]["namespace"] == "gpuprobe"
    find("Namespace", "gpuprobe")

    account = find("ServiceAccount", pod["serviceAccountName"])
    assert account["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    subject = {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "gpuprobe"}
    (binding,) = [o for o in all_objects() if o["kind"] == "ClusterRoleBinding" and subject in o["subjects"]]
    role = find("ClusterRole", binding["roleRef"]["name"])
    granted = {
        (group, resource, verb)
        for r in role["rules"]
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
    }
    # What node-problem-detector's Kubernetes exporter does: read the node, patch its
    # status's conditions, record events.
    assert {
        ("", "nodes", "get"),
        ("", "nodes/status", "patch"),
        ("", "events", "create"),
        ("", "events", "patch"),
    } <= granted

    assert pod["nodeSelector"], "only GPU nodes"
    assert {t["effect"] for t in pod["tolerations"]} >= {"NoSchedule", "NoExecute"}
    container = container_of(daemonset)
    assert container["resources"]["requests"] and container["resources"]["limits"]
    for resources in container["resources"].values():
        assert not any(name.endswith("/gpu") for name in resources), "no GPU is taken from the jobs"

    # node-problem-detector: the binary the Dockerfile installs, the configuration mounted.
    command = container["command"]
    assert command[0] == dockerfile_destination("/node-problem-detector")
    (config_arg,) = [a for a in command if a.startswith("--config.custom-plugin-monitor=")]
    config_path = config_arg.split("=", 1)[1]
    mounted = volume_at(daemonset, config_path)
    assert mounted is not None, f"{config_path} is mounted"
    mount_path, volume = mounted
    (configmap,) = load("configmap.yaml")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    items = {i["path"]: i["key"] for i in volume["configMap"]["items"]}
    assert set(items.values()) <= set(configmap["data"]), "every item is a key of the ConfigMap"
    assert items[config_path[len(mount_path) + 1 :]] == CONFIG_KEY

    # The rules' plugin, executable where the DaemonSet mounts it; every path they name is
    # on a mounted volume; the binary they run is the one the Dockerfile installs.
    env = env_of(daemonset)
    for rule in npd_config()["rules"]:
        mounted = volume_at(daemonset, rule["path"])
        assert mounted is not None, f"{rule['path']} is mounted"
        mount_path, volume = mounted
        assert items[rule["path"][len(mount_path) + 1 :]] in configmap["data"]
        assert volume["configMap"]["defaultMode"] & 0o111 == 0o111, "the plugin is executable"
        for arg in rule["args"]:
            if arg.startswith("/"):
                mounted = volume_at(daemonset, arg)
                assert mounted is not None and "hostPath" in mounted[1], f"{arg} is on the node"
    assert env["GPUPROBE"] in (DEPLOY / "Dockerfile").read_text(), "the Dockerfile installs gpuprobe there"
    assert env["GPUPROBE_EXTRA_ARGS"] == ""
    assert volume_at(daemonset, env["XDG_STATE_HOME"]) is not None, "reports stay on the node"


# --- the rules, run as node-problem-detector runs them --------------------------------------


@dataclass
class Pod:
    """A model of the DaemonSet's container on this machine: each mount a directory."""

    daemonset: dict[str, Any]
    root: Path

    @classmethod
    def make(cls, manifest: str, root: Path) -> Pod:
        (daemonset,) = load(manifest)
        (configmap,) = load("configmap.yaml")
        pod = cls(daemonset, root)
        for mount_path, volume in mounts_of(daemonset).items():
            where = pod.host_path(mount_path)
            where.mkdir(parents=True)
            if "configMap" in volume:
                mode = volume["configMap"].get("defaultMode", 0o644)
                for item in volume["configMap"]["items"]:
                    target = where / item["path"]
                    target.write_text(configmap["data"][item["key"]])
                    target.chmod(mode)
        return pod

    def host_path(self, path: str) -> Path:
        """Where the container's ``path`` lies here (under its mount's directory)."""
        mounted = volume_at(self.daemonset, path)
        assert mounted is not None, f"{path} is not mounted"
        mount_path = mounted[0]
        return self.root / mount_path.strip("/").replace("/", "_") / path[len(mount_path) :].lstrip("/")

    def mapped(self, value: str) -> str:
        return str(self.host_path(value)) if value.startswith("/") and volume_at(self.daemonset, value) else value


@dataclass
class PluginResult:
    status: int
    message: str
    stdout: bytes
    stderr: str


def run_rule(pod: Pod, rule: dict[str, Any], env_overrides: dict[str, str]) -> PluginResult:
    """Runs ``rule`` the way node-problem-detector's plugin.go does: its path with its args,
    no shell, the container's environment, killed at the effective timeout; the message is at
    most 4096 bytes of stdout, trimmed and cut at max_output_length."""
    config = npd_config()
    global_timeout = go_duration_seconds(config["pluginConfig"]["timeout"])
    timeout = min(go_duration_seconds(rule.get("timeout", config["pluginConfig"]["timeout"])) or 0, global_timeout or 0)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update({name: pod.mapped(value) for name, value in env_of(pod.daemonset).items()})
    env.update(env_overrides)
    done = subprocess.run(
        [str(pod.host_path(rule["path"])), *(pod.mapped(a) for a in rule.get("args", []))],
        env=env,
        cwd=pod.root,
        capture_output=True,
        timeout=timeout,
        start_new_session=True,
        check=False,
    )
    stdout = done.stdout[:NPD_STDOUT_READ]
    message = stdout.decode("utf-8", "replace").strip()[: config["pluginConfig"]["max_output_length"]]
    status = done.returncode if done.returncode in (0, 1) else 2
    return PluginResult(status, message, done.stdout, done.stderr.decode("utf-8", "replace"))


def one_line(result: PluginResult) -> str:
    """The plugin's stdout: exactly one line that node-problem-detector does not cut."""
    text = result.stdout.decode("ascii")
    assert text.endswith("\n") and text.count("\n") == 1, text
    line = text.rstrip("\n")
    assert len(line.encode()) <= npd_config()["pluginConfig"]["max_output_length"], line
    assert result.message == line
    return line


@pytest.fixture(scope="module")
def gpuprobe_bin() -> str:
    binary = gpuprobe_binary()
    if binary is None:
        pytest.skip("the gpuprobe binary is not built and cargo could not build it (set GPUPROBE_BIN)")
    return binary


def rules() -> Iterator[dict[str, Any]]:
    yield from npd_config()["rules"]


def cpu_options(*more: str) -> str:
    """What an operator would put in GPUPROBE_EXTRA_ARGS to run the rules on this machine."""
    assert " " not in sys.executable, "GPUPROBE_EXTRA_ARGS splits at blanks"
    return " ".join(["--device", "cpu", "--only", "copy.h2d.*", "--python", sys.executable, *more])


def test_a_healthy_node_is_ok(gpuprobe_bin: str, tmp_path: Path) -> None:
    pod = Pod.make("daemonset-nvidia.yaml", tmp_path)
    # A file the extra options' pattern would match as a file name: the plugin must pass the
    # pattern to gpuprobe as it is (else it would select no probe).
    (tmp_path / "copy.h2d.decoy").touch()
    for rule in rules():
        result = run_rule(pod, rule, {"GPUPROBE": gpuprobe_bin, "GPUPROBE_EXTRA_ARGS": cpu_options()})
        line = one_line(result)
        assert result.status == 0, f"{line}\n{result.stderr}"
        assert line.startswith("OK: gpuprobe: ") and line.endswith("passed on cpu (quick tier)"), line
        assert result.stderr == ""
        prometheus = option(rule["args"], "--prometheus")
        if prometheus is not None:
            assert "gpuprobe_problems 0" in pod.host_path(prometheus).read_text()
    runs = pod.host_path("/var/lib/gpuprobe/state") / "gpuprobe" / "runs"
    assert len(list(runs.glob("check-*/report.json"))) == len(list(rules())), "the reports stay on the node"


def test_a_simulated_fault_is_a_problem_within_max_output_length(gpuprobe_bin: str, tmp_path: Path) -> None:
    pod = Pod.make("daemonset-amd.yaml", tmp_path)
    (permanent,) = [r for r in rules() if r["type"] == "permanent"]
    result = run_rule(
        pod, permanent, {"GPUPROBE": gpuprobe_bin, "GPUPROBE_EXTRA_ARGS": cpu_options("--simulate", "h2d-zeros")}
    )
    line = one_line(result)
    assert result.status == 1, f"{line}\n{result.stderr}"
    assert line.startswith("FAIL: SIMULATED gpuprobe: "), line


def test_a_broken_python_or_a_missing_binary_is_unknown(gpuprobe_bin: str, tmp_path: Path) -> None:
    pod = Pod.make("daemonset-nvidia.yaml", tmp_path)
    false = shutil.which("false") or "/bin/false"
    for rule in rules():
        result = run_rule(
            pod, rule, {"GPUPROBE": gpuprobe_bin, "GPUPROBE_EXTRA_ARGS": f"--device cpu --python {false}"}
        )
        line = one_line(result)
        assert result.status == 2, line
        assert line.startswith("UNKNOWN: gpuprobe: "), line
        assert "--python" in result.stderr, "the reason is in node-problem-detector's log"

        missing = run_rule(pod, rule, {"GPUPROBE": str(tmp_path / "nowhere" / "gpuprobe")})
        assert missing.status == 2
        assert one_line(missing).startswith("UNKNOWN: gpuprobe: ")


def test_the_plugin_is_executable_only_as_mounted(tmp_path: Path) -> None:
    """The ConfigMap's mode is what makes the plugin runnable; without it NPD cannot start it."""
    pod = Pod.make("daemonset-nvidia.yaml", tmp_path)
    (rule, *_) = rules()
    mode = pod.host_path(rule["path"]).stat().st_mode
    assert mode & stat.S_IXUSR and mode & stat.S_IXOTH
    assert pod.host_path(rule["path"]).read_text().startswith("#!/bin/sh\n")
