"""The embedded index's manifest, kept at its former import path (it lives in `amsrag.store.embedded.manifest`)."""

from amsrag.store.embedded.manifest import MANIFEST, fsync_dir, read_manifest, write_json_atomic
from amsrag.store.writes import param_differences

__all__ = ["MANIFEST", "fsync_dir", "param_differences", "read_manifest", "write_json_atomic"]
