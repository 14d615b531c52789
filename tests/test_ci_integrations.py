"""The GitHub Actions composite action and the pre-commit hook (docs/ci.md), exercised for real:
the action's shell steps run as a script with their inputs, the hook's entry runs on spec files."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION_DIR = ROOT / ".github/actions/conformance"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


# ---------------------------------------------------------------- the action


class _Action:
    """Runs the composite action's `run:` steps the way a GitHub runner does (bash -eo pipefail,
    inputs through env, GITHUB_OUTPUT), and evaluates the `with:` of its `uses:` steps."""

    def __init__(self, workspace: Path, path_prefix: Path, inputs: dict):
        self.definition = yaml.safe_load((ACTION_DIR / "action.yml").read_text())
        unknown = set(inputs) - set(self.definition["inputs"])
        assert not unknown, f"the action has no input(s) {unknown}"
        self.inputs = {name: str(spec.get("default", "")) for name, spec in self.definition["inputs"].items()}
        self.inputs.update(inputs)
        self.workspace, self.path_prefix = workspace, path_prefix
        self.outputs: dict[str, dict] = {}
        self.uses: dict[str, dict] = {}
        self.summary = workspace / "step-summary.md"

    def expand(self, text: str) -> str:
        def value(match):
            name = match.group(1)
            if name.startswith("inputs."):
                return self.inputs[name.removeprefix("inputs.")]
            if name == "github.action_path":
                return str(ACTION_DIR)
            step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", name)
            if step:
                return self.outputs.get(step.group(1), {}).get(step.group(2), "")
            raise AssertionError(f"the test does not know expression {name!r}; teach it deliberately")

        return EXPRESSION.sub(value, str(text))

    def run(self, *, skip: tuple[str, ...] = ()) -> int:
        """Every step in order; returns the exit code of the first failing run step (0 if none)."""
        for step in self.definition["runs"]["steps"]:
            if "uses" in step:
                self.uses[step["uses"].split("@")[0]] = {k: self.expand(v) for k, v in step.get("with", {}).items()}
                continue
            if step.get("id") in skip or step["name"] in skip:
                continue
            assert step["shell"] == "bash"
            output = self.workspace / "github-output"
            output.write_text("")
            env = {
                **os.environ,
                "PATH": f"{self.path_prefix}{os.pathsep}{os.environ['PATH']}",
                "GITHUB_OUTPUT": str(output),
                "GITHUB_STEP_SUMMARY": str(self.summary),
                **{k: self.expand(v) for k, v in step.get("env", {}).items()},
            }
            env.pop("VIRTUAL_ENV", None)
            assert "${{" not in step["run"], "inputs reach scripts through env, never spliced into them"
            cwd = self.workspace / self.expand(step.get("working-directory", "."))
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            self.log = getattr(self, "log", "") + proc.stdout + proc.stderr
            if step.get("id"):
                self.outputs[step["id"]] = parse_github_output(output.read_text(encoding="utf-8"))
            if proc.returncode != 0:
                return proc.returncode
        return 0


def parse_github_output(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT read as the Actions runner reads it: ``name=value`` lines
    and ``name<<DELIMITER`` blocks ending at a line that is the delimiter;
    empty lines skipped; a later value of a name replaces an earlier one."""
    outputs: dict[str, str] = {}
    lines = iter(re.split("\r\n|\r|\n", text))  # .NET's ReadLine: \r, \n and \r\n end a line
    for line in lines:
        if not line:
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            name, value = line[:equals], line[equals + 1 :]
        else:
            assert heredoc >= 0, f"invalid GITHUB_OUTPUT line {line!r}"
            name, delimiter = line[:heredoc], line[heredoc + 2 :]
            block = []
            for value_line in lines:
                if value_line == delimiter:
                    break
                block.append(value_line)
            else:
                raise AssertionError(f"GITHUB_OUTPUT: no line {delimiter!r} ends {name}")
            value = "\n".join(block)
        assert name, f"invalid GITHUB_OUTPUT line {line!r}"
        outputs[name] = value
    return outputs


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory):
    """What actions/setup-python gives: a Python with nothing installed, first on PATH."""
    venv = tmp_path_factory.mktemp("runner") / "python"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin"


@pytest.mark.slow
def test_action_runs_a_bundled_spec_and_gates_on_the_verdict(tmp_path, fresh_python):
    # The action's default: a plain (not editable) install of the action's own repository.
    action = _Action(
        tmp_path,
        fresh_python,
        {"spec": "thread-jobs", "profile": "quick", "adapter-opts": "  profile=runtime-code\n\n"},
    )
    assert action.run() == 0, action.log
    out = action.outputs["run"]
    assert (out["exit-code"], out["verdict"]) == ("0", "pass")
    report_dir = Path(out["report-dir"])
    assert report_dir == tmp_path / "conformance-reports"
    report = json.loads((report_dir / "report.json").read_text())
    assert report["spec"]["id"] == "thread-jobs" and report["implementation"]["profile"] == "runtime-code"
    assert "thread-jobs" in action.summary.read_text()  # summary.md went to the job summary

    # The uses: steps get what exists: Python version, the reports directory, the JUnit file.
    assert action.uses["actions/setup-python"] == {"python-version": "3.11"}
    assert Path(action.uses["actions/upload-artifact"]["path"]) == report_dir
    junit = Path(action.uses["mikepenz/action-junit-report"]["report_paths"])
    assert ET.parse(junit).getroot().tag in ("testsuites", "testsuite")

    # A failing implementation: reports written, outputs set, and the last step fails the job.
    (tmp_path / "project").mkdir()
    (tmp_path / "project/mutant_adapter.py").write_text(
        "from lifecycle_references.thread_jobs.mutants import MUTANTS\n"
        "def Adapter(**options):\n    return MUTANTS['evict_at_limit'].factory(**options)\n"
    )
    action = _Action(
        tmp_path,
        fresh_python,
        {
            "spec": "thread-jobs",
            "profile": "quick",
            "adapter": "mutant_adapter:Adapter",
            "working-directory": "project",
            "report-dir": "out",
        },
    )
    assert action.run(skip=("Install the conformance kit",)) == 1, action.log
    assert action.outputs["run"]["verdict"] == "fail"
    assert json.loads((tmp_path / "project/out/report.json").read_text())["verdict"] == "fail"
    assert "::error title=conformance::verdict fail (exit code 1)" in action.log


@pytest.mark.slow
def test_action_installs_the_project_into_the_python_the_kit_runs_with(tmp_path, fresh_python):
    # A src layout: the adapter is importable only once the project is installed.
    package = tmp_path / "project" / "src" / "my_runtime"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "conformance.py").write_text(
        "from lifecycle_references.thread_jobs import ReferenceAdapter as Adapter\n"
    )
    (tmp_path / "project" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "my-runtime"\nversion = "0.1.0"\n'
        '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
    )
    inputs = {
        "spec": "thread-jobs",
        "profile": "quick",
        "adapter": "my_runtime.conformance:Adapter",
        "working-directory": "project",
        "args": "--no-stateful --scenario N1",
    }
    without = _Action(tmp_path, fresh_python, inputs)
    assert without.run() == 2, without.log  # the kit's Python has no my_runtime
    assert without.outputs["run"]["exit-code"] == "2"

    action = _Action(tmp_path, fresh_python, {**inputs, "install": "-e ."})
    assert action.run() == 0, action.log
    assert (action.outputs["run"]["exit-code"], action.outputs["run"]["verdict"]) == ("0", "pass")


def _recording_conformance(tmp_path: Path) -> Path:
    """A directory to put first on PATH: a `conformance` that writes the arguments it got
    (one JSON list) and exits 0, and the Python the action's steps call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    recorder = bin_dir / "conformance"
    recorder.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    recorder.chmod(0o755)
    return bin_dir


def test_action_args_deviations_and_min_coverage_reach_conformance_run(tmp_path):
    action = _Action(
        tmp_path,
        _recording_conformance(tmp_path),
        {
            "spec": "thread-jobs",
            "deviations": "ci/deviations.yaml",
            "min-coverage": "transitions=90\nerror-kinds=80",
            "args": "--max-failures 3 --timeout 10 --adapter-opt 'label=two words' $HOME;`id`",
        },
    )
    assert action.run(skip=("Install the conformance kit", "Gate on the verdict")) == 0, action.log
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[:2] == ["run", "thread-jobs"]
    assert argv[argv.index("--deviations") + 1] == "ci/deviations.yaml"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--min-coverage"] == ["transitions=90", "error-kinds=80"]
    # args come last, split into words as a shell would, with nothing expanded or run
    assert argv[-7:] == ["--max-failures", "3", "--timeout", "10", "--adapter-opt", "label=two words", "$HOME;`id`"]


def test_action_args_that_cannot_be_split_are_an_error_not_a_run(tmp_path):
    action = _Action(tmp_path, _recording_conformance(tmp_path), {"spec": "thread-jobs", "args": "--seed 'unclosed"})
    action.run(skip=("Install the conformance kit", "Gate on the verdict"))
    assert not (tmp_path / "argv.json").exists()
    assert action.outputs["run"]["exit-code"] == "2"
    assert "the args input cannot be split into words" in action.log


def _failing_conformance(tmp_path: Path, verdict: str = "fail") -> Path:
    """A `conformance` that writes a report with ``verdict`` into its --report-dir and exits 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    tool = bin_dir / "conformance"
    tool.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "out = sys.argv[sys.argv.index('--report-dir') + 1]\n"
        "os.makedirs(out, exist_ok=True)\n"
        f"open(os.path.join(out, 'report.json'), 'w').write(json.dumps({{'verdict': {verdict!r}}}))\n"
        "sys.exit(1)\n"
    )
    tool.chmod(0o755)
    return bin_dir


HOSTILE_REPORT_DIRS = [
    "out\nexit-code=0\nverdict=pass",
    "out\rexit-code=0\rverdict=pass",
    "out\nexit-code<<EOF\n0\nEOF\nverdict<<EOF\npass\nEOF",
    "out\nreport-dir=/etc\nexit-code=0",
    "out\u2028exit-code=0",
    "exit-code=0",
    "out<<x\nexit-code=0",
]


@pytest.mark.parametrize("report_dir", HOSTILE_REPORT_DIRS)
def test_no_input_adds_or_overrides_an_output_of_the_action(tmp_path, report_dir):
    """Issue 64: a line break in report-dir appended exit-code=0 / verdict=pass
    to GITHUB_OUTPUT after the real values, and the gate passed a failed run."""
    action = _Action(tmp_path, _failing_conformance(tmp_path), {"spec": "thread-jobs", "report-dir": report_dir})
    assert action.run(skip=("Install the conformance kit",)) != 0, action.log  # the gate fails the job
    out = action.outputs["run"]
    assert set(out) <= {"exit-code", "verdict", "report-dir"}, out
    assert out["exit-code"] in ("1", "2") and out["verdict"] in ("fail", "error"), out
    assert "\n" not in out.get("report-dir", "") and "/etc" != out.get("report-dir")


def test_a_forged_verdict_in_the_report_is_no_output(tmp_path):
    action = _Action(
        tmp_path, _failing_conformance(tmp_path, verdict="fail\nexit-code=0\nverdict=pass"), {"spec": "thread-jobs"}
    )
    assert action.run(skip=("Install the conformance kit",)) == 1, action.log
    assert action.outputs["run"] == {
        "exit-code": "1",
        "verdict": "error",
        "report-dir": str(tmp_path / "conformance-reports"),
    }


def test_action_inputs_are_documented_and_used():
    definition = yaml.safe_load((ACTION_DIR / "action.yml").read_text())
    assert definition["runs"]["using"] == "composite"
    text = (ACTION_DIR / "action.yml").read_text()
    for name, spec in definition["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
        assert f"inputs.{name}" in text, f"input {name} is declared but never used"
    docs = (ROOT / "docs/ci.md").read_text()
    assert "uses: " in docs and ".github/actions/conformance@" in docs


# ---------------------------------------------------------------- the pre-commit hook


def _hook() -> dict:
    try:
        from pre_commit.clientlib import load_manifest
    except ImportError:  # pre-commit not installed: check the structure pre-commit needs
        hooks = yaml.safe_load(HOOKS.read_text())
        assert isinstance(hooks, list)
        for hook in hooks:
            assert {"id", "name", "entry", "language"} <= set(hook)
    else:
        hooks = load_manifest(str(HOOKS))  # pre-commit's own schema; raises on a bad manifest
    (hook,) = [h for h in hooks if h["id"] == "conformance-validate"]
    return hook


def _run_hook(hook: dict, files: list[str], cwd: Path):
    argv = shlex.split(hook["entry"]) + list(hook.get("args", []))
    assert argv[0] == "conformance"
    program = shutil.which("conformance", path=str(Path(sys.executable).parent))
    assert program, "the kit's conformance command is not installed next to this Python"
    selected = [f for f in files if re.search(hook["files"], f)]
    return selected, subprocess.run(
        [program, *argv[1:], *selected], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_hook_manifest_is_valid_and_selects_spec_files():
    hook = _hook()
    assert hook["language"] == "python" and hook.get("pass_filenames", True)
    assert re.search(hook["files"], "spec/thread-jobs.yaml") and re.search(hook["files"], "a/specs/x.yml")
    assert not re.search(hook["files"], "src/app.py") and not re.search(hook["files"], "config.yaml")


@pytest.mark.slow
def test_hook_entry_passes_good_specs_and_fails_bad_ones(tmp_path):
    hook = _hook()
    (tmp_path / "spec").mkdir()
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(ROOT / "spec" / name, tmp_path / "spec" / name)
    selected, proc = _run_hook(
        hook, ["spec/thread-jobs.yaml", "spec/thread-jobs.scenarios.yaml", "README.md"], tmp_path
    )
    assert selected == ["spec/thread-jobs.yaml", "spec/thread-jobs.scenarios.yaml"]
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # A broken scenario file alone is caught through the spec that includes it.
    fragment = tmp_path / "spec/thread-jobs.scenarios.yaml"
    fragment.write_text(fragment.read_text().replace("call: start_job", "call: start_jobb", 1))
    _, proc = _run_hook(hook, ["spec/thread-jobs.scenarios.yaml"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "start_jobb" in proc.stderr and "thread-jobs.scenarios.yaml:" in proc.stderr
    assert "Traceback" not in proc.stderr

    bad = tmp_path / "spec/broken.yaml"
    bad.write_text("format: lifecycle-spec/1\nid: broken\nversion: 1.0.0\n")
    _, proc = _run_hook(hook, ["spec/broken.yaml"], tmp_path)
    assert proc.returncode == 2 and "broken.yaml" in proc.stderr and "Traceback" not in proc.stderr
