"""Cluster profiles: models, loading, and the shipped YAML files."""

from hpctrain.profiles.loader import (
    ProfileInfo,
    list_profiles,
    load_profile,
    load_profile_file,
)
from hpctrain.profiles.model import NodeType, Partition, Profile

__all__ = [
    "NodeType",
    "Partition",
    "Profile",
    "ProfileInfo",
    "list_profiles",
    "load_profile",
    "load_profile_file",
]
