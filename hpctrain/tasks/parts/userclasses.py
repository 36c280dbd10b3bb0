"""The custom task: a LightningModule and LightningDataModule named 'package.module:Class'."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import TYPE_CHECKING, Any, TypeVar

import lightning as L
from lightning.pytorch.utilities.model_helpers import is_overridden

from hpctrain.errors import ConfigError

# Settings are read, never built, here: no pydantic at import.
if TYPE_CHECKING:
    from hpctrain.trainsettings.sections import CustomSection

T = TypeVar("T")


def import_class(path: str, field: str, base: type[T]) -> type[T]:
    """Import 'package.module:ClassName' and check that it subclasses `base`."""
    module_name, _, attr = path.partition(":")
    # Console scripts do not put the working directory on sys.path; `python -m` does. Users
    # expect a package next to their config to import either way.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(
            f"{field}: cannot import module {module_name!r} ({e})",
            "check the spelling, and that the package is installed or on PYTHONPATH",
        ) from e
    except Exception as e:
        raise ConfigError(
            f"{field}: importing {module_name!r} failed: {type(e).__name__}: {e}",
            "fix the error in that module",
        ) from e
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{field}: module {module_name!r} has no attribute {attr!r}",
                "check the class name after the ':'",
            )
        obj = getattr(obj, part)
    if not (inspect.isclass(obj) and issubclass(obj, base)):
        raise ConfigError(
            f"{field}: {path} is not a subclass of {base.__module__}.{base.__qualname__}",
            f"name a {base.__qualname__} subclass",
        )
    return obj


def instantiate(cls: type[T], kwargs: dict[str, Any], field: str, extra: dict[str, Any]) -> T:
    """Build cls(**kwargs), adding `extra` entries the constructor accepts and kwargs lack."""
    params = inspect.signature(cls).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    full = dict(kwargs)
    for key, value in extra.items():
        if key in params and key not in full:
            full[key] = value
    try:
        inspect.signature(cls).bind(**full)
    except TypeError as e:
        accepted = ", ".join(n for n in params if n not in ("self", "args", "kwargs"))
        raise ConfigError(
            f"{field}: {cls.__qualname__} does not accept these arguments ({e})",
            f"it takes: {accepted or 'no arguments'}" + (" and **kwargs" if takes_any else ""),
        ) from e
    return cls(**full)


def build_custom(
    custom: CustomSection, lr: float, batch_size: int
) -> tuple[L.LightningModule, L.LightningDataModule | None]:
    """The user's module and data module (None: the module serves its own data)."""
    assert custom.module is not None
    module_cls = import_class(custom.module, "custom.module", L.LightningModule)
    module = instantiate(module_cls, custom.module_kwargs, "custom.module_kwargs", {"lr": lr})
    if custom.datamodule is None:
        if not is_overridden("train_dataloader", module, L.LightningModule):
            raise ConfigError(
                f"custom.datamodule is not set and {custom.module} has no train_dataloader",
                "set custom.datamodule to a LightningDataModule 'package.module:ClassName', "
                "or give the module train_dataloader (and val_dataloader) methods",
            )
        return module, None
    data_cls = import_class(custom.datamodule, "custom.datamodule", L.LightningDataModule)
    data = instantiate(
        data_cls, custom.datamodule_kwargs, "custom.datamodule_kwargs", {"batch_size": batch_size}
    )
    return module, data
