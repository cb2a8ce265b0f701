"""The TUI's plain-Python half (model, fix scripts, active-test events, live sampling) and its CLI entry:
no terminal needed, and none of it imports Textual."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from doctor import cli
from doctor.examples import EXAMPLES, by_name
from doctor.host import Host
from doctor.model.findings import Finding, Fix, FixStep
from doctor.pipeline import diagnose, sample_gpus
from doctor.tui import active, fixes, model


@pytest.fixture(autouse=True)
def _bundled_matrix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


EXAMPLES_DIR = Path(__file__).parent.parent / "doctor" / "examples"


def report_of(name: str):  # type: ignore[no-untyped-def]
    example = by_name(name)
    assert example is not None
    return diagnose(example.facts())


def modules_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(','.join(sorted(m for m in ('textual', 'rich') if m in sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return [m for m in result.stdout.strip().split(",") if m]


# --- import hygiene ----------------------------------------------------------------------------------


def test_tui_model_fixes_active_live_and_examples_do_not_import_textual() -> None:
    assert modules_after("import doctor.tui.model, doctor.tui.fixes, doctor.tui.active, doctor.pipeline, "
                         "doctor.examples, doctor.commands.tui") == []


def test_engine_checks_and_probes_do_not_import_textual() -> None:
    assert "textual" not in modules_after("import doctor.engine, doctor.checks, doctor.probes, doctor.model.facts")


def test_help_lists_tui_and_demo_without_importing_textual() -> None:
    code = ("import contextlib, io\nfrom doctor.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            "assert 'tui' in buf.getvalue() and 'demo' in buf.getvalue()")
    assert "textual" not in modules_after(code)


# --- the command line -------------------------------------------------------------------------------


def _dispatch(monkeypatch: pytest.MonkeyPatch, tty: bool) -> list[str]:
    ran: list[str] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: tty, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty, raising=False)
    import doctor.commands.check as check_cmd
    import doctor.commands.tui as tui_cmd

    monkeypatch.setattr(tui_cmd, "run", lambda name, args: ran.append(name) or 0)
    monkeypatch.setattr(check_cmd, "run", lambda name, args: ran.append(name) or 0)
    assert cli.main([]) == 0
    return ran


def test_bare_command_on_a_terminal_opens_the_tui(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _dispatch(monkeypatch, tty=True) == ["tui"]


def test_bare_command_piped_runs_check(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _dispatch(monkeypatch, tty=False) == ["check"]


def test_the_tui_runs_with_a_short_thread_switch_interval_and_gives_the_callers_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each frame reaches the terminal about a millisecond after it is drawn (Textual's writer thread waits for
    the interpreter at most that long; Python's default is 5 ms, the first frame's included): set for the app's
    run, the caller's interval back afterwards, and the collector too."""
    import gc

    import doctor.commands.tui as tui_cmd

    during: list[tuple[float, bool]] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(tui_cmd, "end_on_hangup", lambda app: None)
    monkeypatch.setattr(tui_cmd, "terminal_hung_up", lambda: False)
    monkeypatch.setattr(tui_cmd, "run_app", lambda app: during.append((sys.getswitchinterval(), gc.isenabled())))
    before = sys.getswitchinterval()
    assert cli.main(["demo"]) == cli.EXIT_OK
    assert during == [(tui_cmd.SWITCH_INTERVAL, False)] and tui_cmd.SWITCH_INTERVAL <= 0.001
    assert sys.getswitchinterval() == before and gc.isenabled()


def test_tui_without_a_terminal_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    path = Path(__file__).parent.parent / "doctor" / "examples" / "healthy-8x-h100.json"
    assert cli.main(["tui", "--facts", str(path)]) == cli.EXIT_USAGE
    assert "needs a terminal; `gpu-doctor check` prints the report instead" in capsys.readouterr().err
    assert cli.main(["demo"]) == cli.EXIT_USAGE


@pytest.mark.parametrize(("argv", "message"), [
    (["tui", "--facts", "-"], "the TUI reads the keyboard on standard input"),
    (["tui", "--facts", "/nonexistent/facts.json"], "--facts /nonexistent/facts.json:"),
    (["tui", "--root", "/nonexistent/root"], "--root /nonexistent/root: not a directory"),
])
def test_tui_input_errors_are_one_line_before_the_screen_opens(argv: list[str], message: str,
                                                               capsys: pytest.CaptureFixture) -> None:
    assert cli.main(argv) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_demo_list_names_every_example(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "r470-geforce-cu124-torch" in out and "CUDA 12 PyTorch on an R470 driver" in out
    assert len(out.splitlines()) == 6


# --- the model ------------------------------------------------------------------------------------


def test_areas_come_in_report_order_with_problems_first() -> None:
    areas = model.areas(report_of("debian12-535-no-gpu"))
    assert [a.name for a in areas] == ["Driver", "GPUs", "CUDA toolkit", "cuDNN", "Python & frameworks",
                                       "Environment"]
    driver = areas[0]
    assert driver.status == "fail" and [f.code for f in driver.problems] == ["driver.not_loaded",
                                                                            "driver.too_old_for_cuda_runtime",
                                                                            "driver.branch_eol"]  # R535: June 2026
    assert driver.counts_text() == "2✗ 1! 3✓"  # driver.missing, secure boot and loader.libcuda_stub pass
    assert areas[1].status == "none" and areas[1].counts_text() == "not checked"
    assert all(c.status in ("skipped", "not_applicable") for c in areas[1].not_checked)


def test_status_and_host_lines_quote_the_report() -> None:
    report = report_of("module-userspace-mismatch")
    assert model.status_line(report) == "✗ NOT READY: 1 failure, 1 warning, 12 ok"
    assert model.host_line(report).startswith(
        "Ubuntu 22.04.5 LTS · kernel 5.15.0-122-generic · module 535.104.05 / user space 535.129.03 · "
        "CUDA API 12.2 · 1 NVIDIA GPU(s) on PCI only")


def test_evidence_splits_into_facts_and_matrix_rows_with_their_links() -> None:
    report = report_of("r470-geforce-cu124-torch")
    f = next(x for x in report.findings if x.code == "framework.cuda_newer_than_driver")
    facts_ev, rules = model.split_evidence(f)
    assert [e.fact for e in facts_ev][:1] == ["driver.kernel_module"]
    assert rules and all(e.source.startswith("https://") for e in rules)  # type: ignore[union-attr]


def test_gpu_rows_and_memory_bar() -> None:
    facts = by_name("shared-p100-memory-held").facts()  # type: ignore[union-attr]
    row = model.gpu_row(facts.gpus[0])
    # used and total at the same precision: never "11.1/11 GiB", which reads as more used than there is
    assert row == ("0", "Tesla P100-PCIE-12GB", "6.0", "██████ 11.1/11.3 GiB", "33%", "31°C", "25 W", "0 unc.",
                   "gen3 x16")
    assert model.memory_bar(None, 100) == "?"
    assert model.memory_bar(0, 8192, width=4) == "░░░░ 0.0/8.0 GiB"
    degraded = replace(facts.gpus[0], pcie_gen_current=1, pcie_width_current=8, temperature_c=None)
    assert model.gpu_row(degraded)[8] == "gen1 x8 (max gen3 x16)" and model.gpu_row(degraded)[5] == "–"
    assert model.gpu_row(replace(facts.gpus[0], utilization_pct=87))[4] == "87%"


def test_no_table_reason_quotes_nvml_and_the_pci_bus() -> None:
    mismatch = by_name("module-userspace-mismatch").facts()  # type: ignore[union-attr]
    assert model.driver_gpus(mismatch) == []
    reason = model.no_table_reason(mismatch)
    assert "On the PCI bus: 00000000:01:00.0 (device 0x20B210DE)." in reason
    assert "NVML: Driver/library version mismatch." in reason


def test_markdown_export_has_problems_in_full_and_passes_in_one_line() -> None:
    report = report_of("debian12-535-no-gpu")
    text = model.export_text("report.md", report, "no GPU")
    assert text.startswith("## gpu-doctor report: no GPU\n")
    assert "#### ✗ NVIDIA driver 535.309.01 is installed but its kernel module is not loaded" in text
    assert "```bash\nlspci -nn\n```" in text
    assert "| ✓ | CUDA toolkit found: 13.0 at /usr/local/cuda-13.0 | `toolkit.missing` |" in text


def test_the_markdown_export_is_the_registered_markdown_renderer() -> None:
    """One Markdown of a report (issue 19): the TUI's export is `check --format markdown`, named by the source."""
    from doctor.pipeline import render

    report = report_of("debian12-535-no-gpu")
    assert model.export_text("report.md", report, "no GPU") == render(report, "markdown", title="no GPU")
    assert not hasattr(model, "report_markdown")
    with pytest.raises(ValueError):
        model.export_text("report.xml", report_of("debian12-535-no-gpu"))


def test_export_offers_every_registered_report_format_as_the_cli_renders_it() -> None:
    from doctor.pipeline import FORMATS, render

    report = report_of("debian12-535-no-gpu")
    labels = " ".join(model.EXPORTS.values())
    assert "JSON" in labels and "Markdown" in labels  # json and markdown: the report.json / report.md entries
    for name in FORMATS:
        if name not in ("json", "markdown"):
            assert f"({name}: " in labels, f"the TUI's export does not offer --format {name}"
    texts = {kind: model.export_text(kind, report) for kind in model.EXPORTS}
    assert texts["report.txt"] == render(report, "text", colour=False)
    assert texts["report.junit.xml"] == render(report, "junit")
    assert texts["report.github.txt"] == render(report, "github")
    assert "gpu_doctor_ready 0.0" in texts["report.prom"]
    assert "gpu-doctor.ready=false" in texts["report.nfd"]
    assert all(text and "\x1b" not in text for text in texts.values())  # a file: no terminal escapes


def test_json_exports_are_the_public_schemas() -> None:
    report = report_of("healthy-8x-h100")
    assert json.loads(model.export_text("report.json", report))["schema"] == "gpu-doctor.report/v1"
    assert json.loads(model.export_text("facts.json", report))["schema"] == "gpu-doctor.facts/v1"


# --- fix scripts: the fix plan's formats and the findings' own steps ------------------------------


HOSTILE = Finding("x.y", "fail", "title $(reboot)\nsecond line", fix=Fix(
    "do it; rm -rf /\nthen check",
    [FixStep(["apt-get", "install", "nvidia-driver-550; rm -rf /"], root=True, note="the driver"),
     FixStep(["reboot"], root=True, risk="reboot"),
     FixStep(["rm", "-rf", "/var/cache/x"], risk="destructive")]))


def test_a_fix_the_plan_cannot_automate_is_printed_never_run() -> None:
    # The view has no script writer of its own: a finding without intents becomes the plan's manual step.
    script = fixes.fix_script(report_of("healthy-8x-h100"), [HOSTILE])
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    assert "  #   $ sudo apt-get install 'nvidia-driver-550; rm -rf /'   # the driver" in lines
    assert "  #   $ sudo reboot" in lines
    code = [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    assert not [ln for ln in code if "rm -rf" in ln and not ln.strip().startswith("say ")]
    assert not [ln for ln in code if "reboot" in ln and "rm -rf" in ln]


def test_fix_script_is_valid_bash() -> None:
    script = fixes.fix_script(report_of("module-userspace-mismatch"),
                              [f for f in report_of("module-userspace-mismatch").findings if f.fix] + [HOSTILE])
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    if shutil.which("shellcheck"):
        assert subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, check=False).returncode == 0


def test_plan_formats_come_first_and_only_where_the_renderer_knows_the_distribution() -> None:
    report = report_of("healthy-8x-h100")  # Ubuntu 22.04
    assert [f.id for f in fixes.script_formats(report, [HOSTILE])] == ["apt", "pip", "conda"]
    assert fixes.script_formats(report, [Finding("a.b", "ok", "fine")]) == []  # nothing to plan, no steps
    rhel = replace(report, facts=replace(report.facts, host=replace(report.facts.host, os_id="rocky",
                                                                    os_version="9.4")))
    assert [f.id for f in fixes.script_formats(rhel, [HOSTILE])] == ["dnf", "pip", "conda"]
    arch = replace(report, facts=replace(report.facts, host=replace(report.facts.host, os_id="arch",
                                                                    os_version=None)))
    assert [f.id for f in fixes.script_formats(arch, [HOSTILE])] == ["pip", "conda"]
    with pytest.raises(ValueError, match=r"--format dnf: the plan is for ubuntu 22\.04"):
        fixes.fix_script(report, [HOSTILE], "dnf")
    with pytest.raises(ValueError, match="no yum script"):
        fixes.fix_script(report, [HOSTILE], "yum")
    assert fixes.script_file_name([HOSTILE]) == "gpu-doctor-fix-x-y-apt.sh"
    assert fixes.script_file_name([HOSTILE, HOSTILE], "apt") == "gpu-doctor-fix-all-apt.sh"


def test_a_conda_environment_puts_conda_before_pip() -> None:
    report = report_of("rtx5090-cu124-torch")
    envs = [replace(e, origin="CONDA_PREFIX") for e in report.facts.python_envs]
    conda = replace(report, facts=replace(report.facts, python_envs=envs))
    formats = fixes.script_formats(conda, report.findings)
    assert [f.id for f in formats] == ["apt", "conda", "pip"]
    assert formats[0].about.startswith("gpu-doctor fix --format apt, for every problem: apt for the system, conda "
                                       "for Python (Ubuntu 24.04")


@pytest.mark.parametrize("name", [e.name for e in EXAMPLES])
def test_every_problem_in_every_plan_format_is_what_gpu_doctor_fix_writes(name: str, tmp_path: Path) -> None:
    report = report_of(name)
    problems = [f for f in report.findings if f.severity in ("fail", "warn")]
    formats = [f.id for f in fixes.script_formats(report, problems)]
    assert formats == ([] if name == "healthy-8x-h100" else ["apt", "pip", "conda"])
    for fmt in formats:
        out = tmp_path / f"{fmt}.sh"
        assert cli.main(["fix", "--facts", str(EXAMPLES_DIR / f"{name}.json"), "--format", fmt, "-o", str(out)]) == 0
        assert fixes.fix_script(report, problems, fmt) == out.read_text(), fmt
    if name == "rtx5090-cu124-torch":  # sm_120 needs a torch with Blackwell kernels: PyTorch's cu128 index
        pip = fixes.fix_script(report, problems, "pip")
        assert ("    run /home/ml/venv/bin/python -m pip install --index-url https://download.pytorch.org/whl/cu128 -- "
                "torch==2.11.0\n") in pip


def test_a_planner_crash_offers_no_script_rather_than_half_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(report: object, findings: object, python_only: bool = False) -> None:
        raise KeyError("gpus")

    monkeypatch.setattr(fixes, "plan_for", crash)
    assert fixes.script_formats(report_of("healthy-8x-h100"), [HOSTILE]) == []


# --- active tests and live sampling -----------------------------------------------------------------


def test_the_engine_runner_runs_the_engines_tests_and_none_switches_them_off() -> None:
    runner = active.engine_runner()
    with pytest.raises(ValueError, match="no active test 'burn'"):
        runner(active.ActiveTest("burn", "Burn", "?"), by_name("healthy-8x-h100").facts())  # type: ignore[union-attr]
    assert active.unavailable_reason(None, live=True) == active.NOT_AVAILABLE
    assert "recorded snapshot" in (active.unavailable_reason(runner, live=False) or "")
    assert active.unavailable_reason(runner, live=True) is None
    assert active.OOM.confirm and not active.SMOKE.confirm


def test_result_line_drops_the_tests_name_the_engine_puts_first() -> None:
    assert active.result_line(active.SMOKE, active.Outcome("ok", "smoke test: passed")) == "passed"
    assert active.result_line(active.OOM, active.Outcome("warn", "OOM probe: 9.2 of 9.6 GiB")) == "9.2 of 9.6 GiB"
    assert active.result_line(active.SMOKE, active.Outcome("error", "cancelled")) == "cancelled"


def test_live_sample_on_this_machine_answers_with_gpus_or_the_reason() -> None:
    sample = sample_gpus(Host(root=Path("/"), timeout=10))
    assert sample.gpus or sample.error  # no GPU here: NVML's own words ("Driver Not Loaded") or why it failed
    if not sample.gpus and Path("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists():
        assert sample.error == "Driver Not Loaded"


def test_tree_titles_keep_the_words_after_a_long_path() -> None:
    title = "torch 2.13.0+cpu in /home/me/venvs/project-x/bin/python3 is a CPU-only build"
    assert model.tree_title(title) == "torch 2.13.0+cpu in …/project-x/bin/python3 is a CPU-only build"
    assert model.tree_title("CUDA toolkit found: 13.0 at /usr/local/cuda-13.0") == \
        "CUDA toolkit found: 13.0 at /usr/local/cuda-13.0"


def test_the_fix_view_folds_the_helpers_and_shows_the_first_step_early() -> None:
    from doctor.tui import fixes

    example = by_name("r470-geforce-cu124-torch")
    report = diagnose(example.facts())  # type: ignore[union-attr]
    problems = [f for f in report.findings if f.severity == "fail"]
    script = fixes.fix_script(report, problems[:1], fixes.script_formats(report, problems[:1])[0].id)
    shown, folded = model.fold_script(script)
    assert folded > 40 and "lines folded: options and helpers" in shown
    assert shown.splitlines().index("step_1() {") < 30  # in sight at 80×24, with the header's plan above it
    assert shown.splitlines()[:5] == script.splitlines()[:5]


def test_the_tuis_first_frame_imports_neither_the_engine_nor_the_dialogs() -> None:
    """What `gpu-doctor tui` imports before its first frame: Textual and the main screen, not the engine, the
    model's classes, the renderers, the dialogs or their syntax highlighting (they come after it; issue 23)."""
    code = ("import sys\nimport doctor.cli, doctor.commands.tui, doctor.tui.app\n"
            "print(','.join(sorted(m for m in ('doctor.engine', 'doctor.model.facts', "
            "'doctor.model.findings', 'doctor.render.text', 'doctor.tui.screens', 'pygments', 'rich.syntax', "
            "'textual.widgets._data_table', 'textual.widgets._log') if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == ""


def test_what_the_first_frame_of_tui_and_demo_imports_leaves_out_the_host_and_what_it_never_draws() -> None:
    """Up to the first frame of `gpu-doctor demo` (headless), after the arguments of `tui` and of `demo` were
    turned into sources as the commands do: no host layer (ctypes) when there is no --root or --python to check
    (the GPUs are sampled after the first frame), no importlib.resources for the examples' list, no emoji table
    for the tree's hidden root label, no engine (issue 23, start-up). The sampler still samples."""
    code = """if True:
        import asyncio, sys
        from doctor.cli import build_parser
        from doctor.commands import tui
        from doctor.tui.app import DoctorApp

        _, _, sampler = tui.tui_sources(build_parser(only="tui").parse_args(["tui"]))
        sources, index, _ = tui.demo_sources(build_parser(only="demo").parse_args(["demo"]))
        seen = []

        class First(DoctorApp):
            def on_ready(self):
                seen.extend(m for m in ("doctor.host", "ctypes", "importlib.resources", "rich._emoji_codes",
                                        "doctor.engine", "doctor.model.facts") if m in sys.modules)
                self.exit()

        async def main():
            async with First(sources, index=index).run_test(size=(120, 40)) as pilot:
                await pilot.pause()

        asyncio.run(main())
        print(",".join(seen))
        print(type(sampler()).__name__, "doctor.host" in sys.modules)
        """
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.splitlines() == ["", "GpuSample True"], result.stderr[-2000:]
