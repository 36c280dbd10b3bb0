"""`python -m hpctrain.render`: regenerate hpctrain/render/_compiled/ after a template change."""

from hpctrain.files.resources import templates_dir
from hpctrain.render import templating

for path in templating.write_compiled(templates_dir()):
    print(f"wrote {path}")
