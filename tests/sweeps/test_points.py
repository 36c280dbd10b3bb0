"""The sweep's points as values: grids, files, random samples, arrays (plan/sweep.py)."""

from __future__ import annotations

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.plan import sweep


def test_grid_is_every_combination_first_key_slowest() -> None:
    made = sweep.grid(["optim.lr=0.1,0.03", "trainer.batch_size=32,64,128"])
    assert made.keys == ("optim.lr", "trainer.batch_size")
    assert len(made.points) == 6
    assert made.points[0] == (("optim.lr", "0.1"), ("trainer.batch_size", "32"))
    assert made.points[3] == (("optim.lr", "0.03"), ("trainer.batch_size", "32"))


@pytest.mark.parametrize("item", ["optim.lr", "optim.lr=", "-rf=1", "a;b=1", "$(x)=1",
                                  "optim.lr=1,,2", "optim.lr=1,1", "optim.lr=a\nb"])
def test_grid_refuses_what_is_not_a_key_and_values(item: str) -> None:
    with pytest.raises(HpctrainError) as e:
        sweep.grid([item])
    assert e.value.fix


def test_grid_refuses_a_key_twice() -> None:
    with pytest.raises(HpctrainError, match="twice"):
        sweep.grid(["optim.lr=1", "optim.lr=2"])


def test_csv_points_keep_values_whole() -> None:
    text = "optim.lr,data.name\n0.1,\"a, b; $(rm -rf ~)\"\n0.01,plain\n"
    made = sweep.from_table(text, "points.csv")
    assert made.method == "list"
    assert made.points[0] == (("optim.lr", "0.1"), ("data.name", "a, b; $(rm -rf ~)"))


def test_csv_row_with_missing_value_names_the_row() -> None:
    with pytest.raises(HpctrainError, match="row 3"):
        sweep.from_table("optim.lr,trainer.batch_size\n0.1,32\n0.2\n", "p.csv")


def test_yaml_points_as_flow_values() -> None:
    made = sweep.from_table("- {optim.lr: 0.1, trainer.batch_size: 32}\n"
                            "- {optim.lr: 1.0e-3, trainer.batch_size: 64}\n", "p.yaml")
    assert dict(made.points[1]) == {"optim.lr": "0.001", "trainer.batch_size": "64"}


@pytest.mark.parametrize("text", ["", "a: [", "{optim.lr: 1}", "- 3\n", "- {}\n",
                                  "- {optim.lr: 1}\n- {optim.lr: 1}\n"])
def test_bad_yaml_points_are_refused(text: str) -> None:
    with pytest.raises(HpctrainError):
        sweep.from_table(text, "p.yaml")


def test_samples_are_reproducible_and_in_range() -> None:
    items = ["optim.lr=loguniform:1e-4,1e-1", "trainer.batch_size=choice:32,64",
             "model.width=int:8,16", "optim.momentum=uniform:0.8,0.99"]
    one, two = sweep.samples(items, 50, seed=7), sweep.samples(items, 50, seed=7)
    assert one == two
    assert one != sweep.samples(items, 50, seed=8)
    for point in one.points:
        p = dict(point)
        assert 1e-4 <= float(p["optim.lr"]) <= 1e-1
        assert p["trainer.batch_size"] in {"32", "64"}
        assert 8 <= int(p["model.width"]) <= 16
        assert 0.8 <= float(p["optim.momentum"]) <= 0.99


@pytest.mark.parametrize("item", ["optim.lr=normal:0,1", "optim.lr=uniform:2,1",
                                  "optim.lr=loguniform:0,1", "optim.lr=int:1.5,3",
                                  "optim.lr=uniform:a,b", "optim.lr=choice:"])
def test_bad_distributions_are_refused(item: str) -> None:
    with pytest.raises(HpctrainError) as e:
        sweep.samples([item], 3, seed=0)
    assert "uniform:A,B" in (e.value.fix or "")


def test_a_fixed_setting_may_not_be_swept() -> None:
    made = sweep.grid(["optim.lr=0.1,0.2"])
    with pytest.raises(HpctrainError, match="swept"):
        sweep.with_fixed(made, ["optim.lr=0.5"])
    assert sweep.with_fixed(made, ["trainer.max_epochs=2"]) is made


def test_chunks_split_at_max_array_size_and_keep_the_throttle() -> None:
    arrays = sweep.chunks(2500, 1001, 8)
    assert [(a.offset, a.size) for a in arrays] == [(0, 1001), (1001, 1001), (2002, 498)]
    assert [a.spec for a in arrays] == ["0-1000%8", "0-1000%8", "0-497%8"]
    assert {a.width for a in arrays} == {4}
    assert sweep.chunks(24, 1001, None)[0].spec == "0-23"


def test_point_directory_names_sort_as_points() -> None:
    names = [sweep.point_dir_name(i, 1200) for i in (0, 9, 10, 1199)]
    assert names == ["0000", "0009", "0010", "1199"]
    assert names == sorted(names)
    assert sweep.point_dir_name(3, 24) == "003"
