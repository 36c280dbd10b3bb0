from pathlib import Path

import pytest

from hpctrain.errors import ProfileError
from hpctrain.profiles import list_profiles, load_profile, load_profile_file

SHIPPED = ["gilbreth", "local", "marvin", "raven"]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def user_profile(home: Path, name: str, text: str) -> Path:
    d = home / "config" / "profiles"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{name}.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profiles_load(name: str) -> None:
    p = load_profile(name)
    assert p.name == name
    assert p.partitions
    assert p.sources


def test_shipped_facts() -> None:
    raven = load_profile("raven")
    gpu = raven.partition("gpu")
    assert gpu is not None
    assert (gpu.gpus_per_node, gpu.cpus_per_node, gpu.mem_per_node_mb) == (4, 72, 500000)
    assert gpu.allowed_gpus_per_node == [1, 2, 4]
    assert gpu.implicit and gpu.default_constraint == "gpu"
    assert raven.partition("gpudev") is not None
    assert raven.shared_node.cpus_per_gpu == 18 and raven.shared_node.mem_per_gpu_mb == 125000
    gil = load_profile("gilbreth")
    assert gil.account == "required" and gil.gpu_request == "gpus_per_node"
    training = gil.partition("training")
    assert training is not None and training.required_qos == "training"
    assert gil.nccl.socket_ifname == "ib"  # a prefix: names vary per node
    marvin = load_profile("marvin")
    names = {p.name for p in marvin.partitions}
    assert {"sgpu_devel", "sgpu_long", "mlgpu_short"} <= names
    assert "sgpu" not in names
    assert marvin.environment.module_use == ["/opt/software/easybuild-AMD/modules/all"]


def test_list_profiles_shows_user_override(_home: Path) -> None:
    user_profile(_home, "raven", "extends: raven\ndefault_account: mylab\n")
    user_profile(_home, "mine", "extends: local\ndescription: my cluster\n")
    infos = {i.name: i for i in list_profiles()}
    assert set(SHIPPED) <= set(infos)
    assert infos["raven"].source == "user" and infos["raven"].shadows_shipped
    assert infos["mine"].source == "user"
    assert load_profile("raven").default_account == "mylab"
    assert load_profile("mine").description == "my cluster"


def test_extends_merges_nested_fields(_home: Path) -> None:
    user_profile(_home, "myraven", "extends: raven\nnccl:\n  socket_ifname: ib0\n")
    p = load_profile("myraven")
    assert p.name == "myraven"
    assert p.nccl.socket_ifname == "ib0"
    assert p.environment.modules == ["gcc/13", "cuda/12.6"]  # kept from raven


def test_extends_unknown_and_loop(_home: Path) -> None:
    user_profile(_home, "a", "extends: nosuch\n")
    with pytest.raises(ProfileError, match="extends unknown profile 'nosuch'"):
        load_profile("a")
    user_profile(_home, "b", "extends: c\n")
    user_profile(_home, "c", "extends: b\n")
    with pytest.raises(ProfileError, match="extends loop"):
        load_profile("b")


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\npartitions: [\n")
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    assert str(f) in str(e.value) and "line" in str(e.value)


def test_invalid_fields_one_line_each(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ncluster: c\ngpu_request: magic\nparitions: []\n"
        "partitions:\n  - name: p\n    gpus_per_node: -1\n    cpus_per_node: 4\n"
        "    mem_per_node_mb: 100\n    max_time: forever\n"
    )
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    lines = e.value.what.splitlines()
    assert all(line.startswith(f"{f}: ") for line in lines)
    text = e.value.what
    assert "gpu_request" in text
    assert "paritions: unknown field" in text
    assert "partitions.0.gpus_per_node" in text
    assert "partitions.0.max_time" in text


def test_inconsistent_profile(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "name: bad\ncluster: c\npartitions:\n"
        "  - {name: p, gpus_per_node: 2, cpus_per_node: 4, mem_per_node_mb: 100,"
        " max_time: '1:00:00', required_qos: gold, allowed_gpus_per_node: [1, 3]}\n"
    )
    with pytest.raises(ProfileError) as e:
        load_profile_file(f)
    assert "allowed_gpus_per_node" in e.value.what


def test_not_a_mapping(tmp_path: Path) -> None:
    f = tmp_path / "list.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ProfileError, match="mapping"):
        load_profile_file(f)


def test_unknown_profile_lists_known() -> None:
    with pytest.raises(ProfileError) as e:
        load_profile("nosuch")
    assert "raven" in str(e.value)
