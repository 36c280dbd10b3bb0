"""`hpctrain data`: fetch the datasets of the packaged trainer on a machine with internet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.output import err_console, print_json
from hpctrain.tasks import registry

data_app = typer.Typer(
    name="data",
    help="Datasets for the packaged trainer (compute nodes have no internet: fetch on a login "
    "node).\n\nExample: hpctrain data fetch fashionmnist --to /ptmp/$USER/data/fashionmnist",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@data_app.command(
    epilog="Example: hpctrain data fetch fashionmnist --to /ptmp/$USER/data/fashionmnist"
)
def fetch(
    dataset: Annotated[str, typer.Argument(help=" or ".join(
        t.name for t in registry.all_tasks().values() if t.data_files) + ".")],
    to: Annotated[
        Path | None,
        typer.Option(
            "--to",
            help="Target directory (default: $HPCTRAIN_DATA_DIR/<dataset>, else ./data/<dataset>).",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Mirror holding the four .gz files (default: $HPCTRAIN_DATA_URL, else the "
            "official site); '{dataset}' in it is replaced by the dataset name."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server.")] = 60.0,
    json_out: JsonOpt = False,
) -> None:
    """Download a dataset's IDX files, verify their checksums, and write them atomically."""
    from hpctrain.tasks.parts.datasets.fetch import default_data_dir, fetch_dataset

    target = (to or default_data_dir(dataset)).expanduser().absolute()
    files = fetch_dataset(
        dataset,
        target,
        base_url=base_url,
        timeout=timeout,
        progress=None if json_out else lambda f: err_console.print(f"{f.status:>10}  {f.path}"),
    )
    if json_out:
        print_json(
            {
                "dataset": dataset,
                "directory": str(target),
                "files": [{"path": str(f.path), "status": f.status, "url": f.url} for f in files],
            }
        )
        return
    err_console.print(
        f"{dataset} is ready in {target}: train with --set data.dir={target}", highlight=False
    )


def register(app: typer.Typer) -> None:
    """Add `hpctrain data` to the root app."""
    app.add_typer(data_app)
