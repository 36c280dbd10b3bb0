"""`dev --attach`'s pure parts: the alias's Host block as ssh reads it (hostile paths arrive
whole), the sshd's config, the refusal without an sshd on the node, and the file's blocks."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.slurm.interactive import sshd_argv
from hpctrain.submission.devssh import (
    Alias,
    SshdFiles,
    alias_block,
    config_path,
    sshd_config,
    write_alias,
)

HOSTILE = "/runs/a 'q' $(touch pwned); x %h %%"


def _ssh_reads(config: str, tmp_path: Path, alias: str) -> dict[str, str]:
    """`ssh -G`: the options ssh takes for `alias` from `config` (first value of each)."""
    path = tmp_path / "config"
    path.write_text(config)
    out = subprocess.run(["ssh", "-G", "-F", str(path), alias], capture_output=True,
                         text=True, check=True).stdout
    seen: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        seen.setdefault(key, value)
    return seen


def test_the_alias_reaches_ssh_whole(tmp_path: Path) -> None:
    config = Path(HOSTILE) / "dev-ssh" / "sshd_config"
    proxy = ("ssh", "-F", "/my ssh/config", "--", "login", "cd -- '/x y' && srun")
    proxy = (*proxy, *sshd_argv("42", config))
    block = alias_block("hpctrain-dev-42", "me", proxy, Path("/home/me/.hpc %u/key"),
                        Path("/home/me/known hosts"), "job 42")
    seen = _ssh_reads(block, tmp_path, "hpctrain-dev-42")
    # ssh turns %% into % when it runs the ProxyCommand (-G shows it before), then hands it
    # to sh: sh's words are exactly the argv.
    assert shlex.split(seen["proxycommand"].replace("%%", "%")) == list(proxy)
    assert seen["identityfile"].replace("%%", "%") == "/home/me/.hpc %u/key"
    assert seen["userknownhostsfile"] == "/home/me/known hosts"
    assert (seen["user"], seen["hostkeyalias"]) == ("me", "hpctrain-dev-42")


def test_what_no_config_can_quote_is_refused() -> None:
    with pytest.raises(HpctrainError, match="cannot quote"):
        config_path('/runs/a"b')
    with pytest.raises(HpctrainError, match="user name"):
        alias_block("a", "me\nHost *", ("x",), Path("/k"), Path("/h"), "c")


def test_the_sshd_config_is_read_by_sshd(tmp_path: Path) -> None:
    root = tmp_path / "run 'q' %h"
    root.mkdir()
    files = SshdFiles(root)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(files.host_key)],
                   check=True)
    files.authorized_keys.write_text("")
    files.config.write_text(sshd_config(files))
    # -T: sshd checks the file and prints what it took, as the dev job's sshd would start.
    done = subprocess.run(["/usr/sbin/sshd", "-T", "-f", str(files.config)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"hostkey {files.host_key}" in done.stdout
    assert "usepam no" in done.stdout and "passwordauthentication no" in done.stdout


def test_a_node_without_sshd_is_refused_with_the_reason(tmp_path: Path) -> None:
    argv = sshd_argv("42", tmp_path / "sshd_config")
    script = argv[argv.index("-c") + 1]
    # The node's end as srun runs it, where no sshd is found.
    done = subprocess.run(["/bin/sh", "-c", script.replace("/usr/sbin/sshd", "/no/sshd"),
                           "sh", "cfg"], env={"PATH": str(tmp_path)}, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 127
    assert "no sshd on" in done.stderr and "hpctrain dev` through the login" in done.stderr


def test_write_alias_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.d" / "hpctrain"
    first = Alias("hpctrain-dev-1", "1", "Host hpctrain-dev-1\n  User a\n")
    assert write_alias(first, path) == "added"
    assert path.stat().st_mode & 0o777 == 0o600
    path.write_text(path.read_text() + "Host mine\n  User me\n")
    assert write_alias(Alias("hpctrain-dev-2", "2", "Host hpctrain-dev-2\n"), path) == "added"
    again = Alias("hpctrain-dev-1", "1", "Host hpctrain-dev-1\n  User b\n")
    assert write_alias(again, path) == "replaced"
    text = path.read_text()
    assert "User b" in text and "User a" not in text and "Host mine\n  User me" in text
    assert text.count("Host hpctrain-dev-2") == 1
    # A block of the same name the user wrote is theirs: refused, not overwritten.
    theirs = tmp_path / "theirs"
    theirs.write_text("Host hpctrain-dev-1\n  User mine\n")
    with pytest.raises(HpctrainError, match="did not write"):
        write_alias(first, theirs)
    assert theirs.read_text() == "Host hpctrain-dev-1\n  User mine\n"


def test_dev_attach_needs_no_profile_and_the_rest_of_dev_is_clicks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from hpctrain.cli import dev

    seen: list[dict[str, object]] = []
    monkeypatch.setattr(dev, "attach_alias", lambda **kw: seen.append(kw))
    assert dev.run_plain(["--attach", "42", "--write-ssh-config", "--ssh-config-file", "a b"])
    assert seen == [{"attach": "42", "write_ssh_config": True, "ssh_config_file": "a b"}]
    assert not dev.run_plain(["-P", "local", "--nodes", "2"])
    assert not dev.run_plain(["--attach", "42", "extra"])
