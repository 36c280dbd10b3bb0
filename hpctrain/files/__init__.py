"""hpctrain's files: where it keeps them, the data beside the package, writing one whole,
reading a user's YAML safely and writing YAML for a person to read."""
