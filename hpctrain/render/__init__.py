"""A job plan as its sbatch script (pure), through the one Jinja set-up; `python -m
hpctrain.render` regenerates _compiled/ from templates/."""
