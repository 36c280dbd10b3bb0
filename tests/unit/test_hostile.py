"""Hostile names, paths and values rendered into a script and run: nothing injected runs."""

import json
import os
import stat
import subprocess
from pathlib import Path

from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script

PAYLOADS = [
    "'; touch {m}; '",
    '"; touch {m}; "',
    "$(touch {m})",
    "`touch {m}`",
    "a b; touch {m}",
    "x\\\"$(touch {m})",
    "${{IFS}}touch${{IFS}}{m}",
]


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_hostile_values_stay_data(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.json"
    # srun records the argv it got and the environment the job exported.
    _stub(
        bin_dir / "srun",
        f'exec {os.environ.get("PYTHON", "python3")} -c "import json,os,sys; '
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open('{record}', 'w'))\" "
        '"$@"\n',
    )
    _stub(bin_dir / "scontrol", 'printf "node1\\nnode2\\n"\n')

    payloads = [p.format(m=marker) for p in PAYLOADS]
    env = {f"V{i}": p for i, p in enumerate(payloads)}
    weird_dir = tmp_path / "runs with 'quotes' and $(touch PWNED) ;"
    venv = tmp_path / "venv $(touch PWNED) `x`"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("export ACTIVATED=yes\n")
    command = ("python", "train.py", *payloads)
    job_name = "job \"quoted\" ; $(touch PWNED) `id` 'x'"
    plan = build_plan(
        JobRequest(
            profile=load_profile("raven"),
            nodes=2,
            job_name=job_name,
            env=env,
            command=command,
            log_dir=str(weird_dir),
            python_env=str(venv),
            invocation="hpctrain render " + " ".join(payloads) + "\n; touch " + str(marker),
        )
    )
    script = tmp_path / "job.sh"
    script.write_text(render_script(plan))
    subprocess.run(["bash", "-n", str(script)], check=True)

    run_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_CLUSTER_NAME": "hpctrain-dev",
        "SLURM_CPUS_PER_TASK": "18",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=run_env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()
    assert not (tmp_path / "PWNED").exists()
    got = json.loads(record.read_text())
    # srun starts the launcher's wrapper (sh -c CODE NAME), which execs the command whole.
    assert got["argv"][:3] == ["--kill-on-bad-exit=1", "sh", "-c"]
    assert got["argv"][4:] == ["hpctrain-srun", *command]
    for key, value in env.items():
        assert got["env"][key] == value
    assert got["env"]["ACTIVATED"] == "yes"
    assert got["env"]["MASTER_ADDR"] == "node1"
    assert got["env"]["MASTER_PORT"] == str(20000 + 42)
    assert got["env"]["HPCTRAIN_RUN_DIR"] == f"{weird_dir}/{job_name}-42"
    assert Path(got["env"]["HPCTRAIN_RUN_DIR"]).is_dir()
