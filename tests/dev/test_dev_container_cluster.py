"""`hpctrain dev --container` on the dev cluster, through a real terminal (tmux): the shell runs
inside the image (Charliecloud's ch-run; the image is Debian 13, this host Debian 12) with the
environment of a batch rank 0 of the same request in the same container, `dev-run` runs every
rank inside it through the job's script, and `submit --like-dev` keeps the container. The
image's path has a space and a quote: it arrives whole."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tests.containers.image import MARKER as IMAGE_MARKER
from tests.containers.image import container_image
from tests.dev import test_dev_cluster as dev_cluster
from tests.dev.terminal import Terminal, wait_file
from tests.dev.test_dev_cluster import REQUEST, _differences
from tests.jobs.test_jobs_cluster import Cli

# The dev tests' own fixtures: a history and directory of the test's, a tmux server of its own.
cli, term = dev_cluster.cli, dev_cluster.term

MARKER = "/" + IMAGE_MARKER
# Each rank writes where it runs: its rank, its node, its root's Debian and image marker.
WHERE = ("import os\n"
         "root = open('/etc/debian_version').read().strip()\n"
         f"marked = os.path.exists({MARKER!r})\n"
         "open(f\"rank-{os.environ['RANK']}.txt\", 'w').write(\n"
         "    f\"{os.environ['SLURMD_NODENAME']} {root} {marked} {os.environ['WORLD_SIZE']}\")\n")


def test_a_dev_shell_in_a_container_is_a_batch_rank_0_there_and_dev_run_runs_inside(
        cli: Cli, term: Terminal) -> None:
    image = cli.cwd.parent / "the image's root"
    image.symlink_to(container_image())
    (cli.cwd / "where.py").write_text(WHERE)
    box = f"--container {shlex.quote(str(image))}"
    term.type(f"hpctrain submit {' '.join(REQUEST)} {box} --no-snapshot --json -- python3 "
              "dump_env.py batch-env.json >batch.json && echo SUBMITTED")
    term.type(f"hpctrain dev {' '.join(REQUEST)} {box}")
    screen = term.wait_for(":" + str(cli.cwd) + "$ ", 45)
    job = re.search(r"dev job (\d+) queued", screen)
    assert job, screen
    # In the shell: the image's root (its marker, Debian 13) and the job's environment.
    # Written whole (the test reads it once it exists: a file written in two steps was read
    # between them once, in CI).
    term.type(f"{{ cat /etc/debian_version; test -e {MARKER} && echo marked; }} >inside.tmp; "
              "mv inside.tmp inside.txt; python3 dump_env.py dev-env.json")
    assert wait_file(cli.cwd / "inside.txt", 20).split() == [
        (container_image() / "etc/debian_version").read_text().strip(), "marked"]
    assert (cli.cwd / "inside.txt").read_text().startswith("13.")
    dev = json.loads(wait_file(cli.cwd / "dev-env.json", 20))
    batch = json.loads(wait_file(cli.cwd / "batch-env.json", 60))
    assert dev["SLURM_JOB_ID"] == job[1] and dev["RANK"] == "0" and dev["WORLD_SIZE"] == "2"
    assert _differences(dev, batch) == {}
    # dev-run: every rank inside the image, through the job's script (no srun in there); its
    # output comes to this terminal, and the prompt after it.
    # What is awaited is never what was typed: a line typed while the last command still ran
    # shows twice (the terminal's echo, then bash's), as "RANKS-DONE" did once in CI.
    term.type("hpctrain dev-run -- python3 where.py; echo RANKS-DONE-$?")
    term.wait_for("RANKS-DONE-0", 60)
    ranks = sorted((cli.cwd / f"rank-{r}.txt").read_text().split() for r in (0, 1))
    assert [r[0] for r in ranks] == ["node1", "node2"], ranks
    assert all(r[1].startswith("13.") and r[2:] == ["True", "2"] for r in ranks), ranks
    # Ctrl-C at the shell stops a relayed dev-run's ranks (outside, where they were started).
    term.type("hpctrain dev-run -- sleep 300; echo STOPPED-$?")
    term.wait_for(f"hpctrain: job {job[1]} (hpctrain) on 2 node(s)", 30, count=2)
    term.tmux("send-keys", "-t", "t", "C-c")
    stopped = re.search(r"STOPPED-(\d+)", term.wait_for("STOPPED-1", 30))
    assert stopped and stopped[1] != "0"
    term.type("exit")
    term.wait_for(f"dev job {job[1]} ends with its shell", 15)
    assert cli.cluster.wait_job(job[1], timeout_s=15)["State"] == "COMPLETED"
    # Back to batch: the same container.
    again = json.loads(cli.ok("submit", "--like-dev", job[1], "--dry-run", "--json").stdout)
    assert again["plan"]["container"]["image"] == str(image), again["plan"]
    assert "ch-run" in again["script_text"]
    assert Path(json.loads((cli.cwd / "batch.json").read_text())["run_dir"]).exists()
