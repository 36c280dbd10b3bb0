"""`hpctrain dev --container`'s parts that need no cluster (docs/dev.md, "In a container"): the
plan keeps the container, the dev script saves the runtime's words and relays dev-runs, the
shell's step starts the words with the job's environment, and a dev-run's script goes out of
the container and back, whole (paths with a space and a quote)."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
from pathlib import Path

from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.dev import batch_request
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script
from hpctrain.slurm.interactive import shell_argv
from hpctrain.submission.devrelay import (
    ContainerFiles,
    env_changes,
    environ_words,
    nul_words,
    relay,
    relay_request,
)
from hpctrain.values.rundir import RunDir

IMAGE = "/images/it's here"


def _request(**kw: object) -> JobRequest:
    kw = {"dev": True, "container": IMAGE, **kw}
    return JobRequest(profile=load_profile("local"), nodes=2, time="10", run_dir="/r/dev",
                      **kw)  # type: ignore[arg-type]


def _script(tmp_path: Path) -> str:
    text = render_script(build_plan(_request()))
    (tmp_path / "dev.sbatch").write_text(text)
    subprocess.run(["bash", "-n", str(tmp_path / "dev.sbatch")], check=True)
    return text


def test_a_dev_job_keeps_its_container_and_submit_like_dev_too() -> None:
    dev = build_plan(_request())
    assert dev.container is not None and dev.container.image == IMAGE and dev.dev_idle_s
    assert build_plan(batch_request(_request())).container == dev.container


def test_the_dev_script_saves_the_runtime_words_beside_the_environment(tmp_path: Path) -> None:
    text = _script(tmp_path)
    files = ContainerFiles(RunDir("/r/dev").dev_env)
    # The names the shell's step and dev-run read are the ones the script writes.
    for path in (files.words, files.srun_options, files.relay):
        assert f'"$HPCTRAIN_RUN_DIR/{{0}}{path.name[len("dev-env.sh"):]}"'.format(
            "dev-env.sh") in text, path.name
    assert f'"$hpctrain_dev_dir/{files.inside.name}"' in text
    # Worked out once, as for a batch rank, before the environment the shell waits for.
    assert text.count("hpctrain_container=(ch-run)") == 1
    assert text.index(files.words.name) < text.index("mv -f ") < text.index("dev shell ready")
    # The host's ~/.bashrc is not run in the image; without a container it is.
    assert ". ~/.bashrc" not in text
    plain = render_script(build_plan(_request(container=None)))
    assert ". ~/.bashrc" in plain and ".inside" not in plain and "relay" not in plain


def test_the_shell_starts_the_saved_words_with_the_job_environment(tmp_path: Path) -> None:
    run = tmp_path / "run's dir"
    run.mkdir()
    files = ContainerFiles(RunDir(run).dev_env)
    # A runtime that changes what it passes in, as ch-run does (HOME, its own variable).
    files.words.write_bytes(b"env\0FAKE_RUNTIME=in it\0HOME=/home/me\0")
    files.dev_env.write_text("export JOB_VAR='a b'\nexport HOME=/root\nexport PATH=/usr/bin:/bin\n")
    rc, out = RunDir(run).dev_rc, tmp_path / "out"
    # The start-up file as the template writes it: the environment the runtime passed in.
    rc.write_text(f". {shlex.quote(str(files.inside))}\n"
                  'printf "%s|%s|%s|%s|%s\\n" "$JOB_VAR" "$FAKE_RUNTIME" "$HOME" '
                  f'"${{SLURM_STEP_ID-unset}}" "$TERM" >{shlex.quote(str(out))}\nexit 0\n')
    argv = shell_argv("7", rc, container=(files.words, files.dev_env))
    assert argv[:3] == ("srun", "--jobid=7", "--overlap") and "--export=TERM" in argv
    # What the step runs on the node; the step's own variables go, the terminal's TERM stays.
    subprocess.run(argv[argv.index("/bin/bash"):], input="exit\n", text=True, check=True,
                   timeout=30, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "TERM": "xterm", "SLURM_STEP_ID": "0"})
    assert out.read_text() == "a b|in it|/home/me|unset|xterm\n"
    started = environ_words(files.inside_env.read_bytes())
    assert started["FAKE_RUNTIME"] == "in it" and started["JOB_VAR"] == "a b"


def test_srun_options_go_to_srun_and_the_shell_stays_one_step() -> None:
    argv = shell_argv("7", Path("/r/rc"), container=(Path("/r/w"), Path("/r/e")),
                      srun_options=("--container-image=x y", "--container-mounts=/a:/a"))
    at = argv.index("--container-image=x y")
    assert argv.index("--job-name=hpctrain-dev-shell") < at < argv.index("/bin/bash")
    assert argv[-4:-1] == ("/r/w", "/r/e", "/r/rc")


def test_env_changes_are_the_shells_own_not_the_runtimes() -> None:
    started = {"HOME": "/home/me", "CH_RUNNING": "yes", "A": "1", "GONE": "x"}
    now = {"HOME": "/home/me", "CH_RUNNING": "yes", "A": "2", "NEW": "a=b c",
           "BASH_FUNC_f%%": "() { :; }"}
    assert env_changes(started, now) == ("-u", "GONE", "A=2", "NEW=a=b c")
    assert nul_words(relay_request("/d i r", ("A=2",))) == ("/d i r", "A=2")
    assert nul_words(b"") == () and nul_words(b"\0") == ("",)
    assert environ_words(b"A=1\0B=x=y\0") == {"A": "1", "B": "x=y"}


def test_a_dev_run_goes_out_through_the_job_script_and_back(tmp_path: Path) -> None:
    # The job's script's side, as rendered: its relay function, reading the FIFO once.
    text = _script(tmp_path)
    lines = text.splitlines()
    start = lines.index("hpctrain_dev_relay() {")
    function = "\n".join(lines[start:lines.index("}", start) + 1])
    run = tmp_path / "run's dir"
    here = RunDir(run).dev_run(1).root
    here.mkdir(parents=True)
    fifo = ContainerFiles(RunDir(run).dev_env).relay
    os.mkfifo(fifo)
    # Held open as the job's script holds it from its start: a request waits in it.
    held = os.open(fifo, os.O_RDWR)
    RunDir(here).script.write_text('echo "out $JOB_VAR|$CHANGED|${GONE-unset}|$PWD"; '
                                   "echo err >&2; exit 3\n")
    side = subprocess.Popen(
        ["bash", "-c", f'set -eo pipefail\n{function}\nexec {{fd}}<>"$1"\n'
         'IFS= read -r -d "" here <&"$fd"\nhpctrain_dev_relay "$here"', "job", str(fifo)],
        env={"PATH": os.environ["PATH"], "HPCTRAIN_RUN_DIR": str(run), "JOB_VAR": "job's",
             "GONE": "x"})
    try:
        out = io.BytesIO()
        code = relay(here, fifo, relay_request(str(tmp_path), ("-u", "GONE", "CHANGED=a b")),
                     out)
    finally:
        os.close(held)
        side.wait(timeout=30)
    assert code == 3
    assert out.getvalue().decode() == f"out job's|a b|unset|{tmp_path}\nerr\n"
